"""Connected components: labelling with per-band statistics, and removal of small components
(spec: edges.md §3.7 "E3"; cubekit/labels.hpp)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _cubekit, _runtime

#: One row per component of a band: its pixel count and inclusive bounding box (x = column, y = row).
COMPONENT_DTYPE = np.dtype([("size", "<i8"), ("x0", "<i8"), ("y0", "<i8"), ("x1", "<i8"), ("y1", "<i8")])


@dataclass
class Components:
    """What :func:`label_components` returns.

    labels : int32 array of the input's shape and kind; 0 = background, each band's components
        numbered 1..n in raster order of their first pixel.
    stats : one NumPy structured array per band (host), ``stats[b][label - 1]`` with fields size,
        x0, y0, x1, y1 (see COMPONENT_DTYPE).
    counts : property, the number of components of every band.
    tiled : the tiled path's report (tiles, tile_width, tile_height, peak_bytes, ...), else None.
    """
    labels: object
    stats: list
    tiled: dict | None = None

    @property
    def counts(self) -> list[int]:
        return [len(t) for t in self.stats]


def _tables(raw) -> list[np.ndarray]:
    return [np.ascontiguousarray(t).view(COMPONENT_DTYPE).reshape(-1) for t in raw]


def _label(image, keywords, function):
    tiles = _runtime.pop_tile_keywords(keywords)
    if tiles or _runtime.is_path(image):
        ctx, progress = _runtime.begin_tiled(image, keywords, tiles, function)
        labels, raw, run = _cubekit.label_tiled(ctx, _runtime.fspath_or(image), keywords, tiles, progress)
        return Components(labels=labels, stats=_tables(raw), tiled=run)
    backend, device, threads, out, progress = _runtime.split_common(keywords)
    ctx, kind = _runtime.context(image, backend, device, threads)
    _runtime.check_out_kind(out, kind, function)
    if out is None and kind != "numpy":
        out = _runtime.empty(kind, image, tuple(image.shape), "int32")
    labels, raw = _cubekit.label(ctx, image, out, keywords, progress)
    return Components(labels=labels, stats=_tables(raw))


def label_components(image, **keywords):
    return _label(image, keywords, "label_components")


def label(image, **keywords):
    return_num = keywords.pop("return_num", False)
    if not isinstance(return_num, (bool, np.bool_)):
        raise ValueError(f"label: return_num = {return_num!r}; expected True or False")
    c = _label(image, keywords, "label")
    if not return_num:
        return c.labels
    return c.labels, (c.counts[0] if c.labels.ndim == 2 else c.counts)


def _is_bool(x) -> bool:
    return str(getattr(x, "dtype", "")).endswith("bool")


def _as_bool(x, kind):
    """A uint8 0/1 array seen as bool, without a copy."""
    if kind == "torch":
        import torch
        return x.view(torch.bool)
    return x.view("bool")


def _as_u8(x, kind):
    if kind == "torch":
        import torch
        return x.view(torch.uint8)
    return x.view("uint8")


def remove_small_objects(mask, **keywords):
    tiles = _runtime.pop_tile_keywords(keywords)
    if tiles or _runtime.is_path(mask):
        ctx, progress = _runtime.begin_tiled(mask, keywords, tiles, "remove_small_objects")
        result, _run = _cubekit.remove_small_objects_tiled(ctx, _runtime.fspath_or(mask), keywords, tiles, progress)
        return result.view(bool) if _is_bool(mask) else result
    ctx, kind, out, progress = _runtime.begin(mask, keywords, "remove_small_objects")
    boolean = _is_bool(mask)
    target = out
    if out is not None and _is_bool(out):
        target = _as_u8(out, kind)  # the library writes uint8 0/1
    elif out is None and kind != "numpy":
        target = _runtime.empty(kind, mask, tuple(mask.shape), "uint8")
    result = _cubekit.remove_small_objects(ctx, mask, target, keywords, progress)
    if out is not None:
        return out
    return _as_bool(result, kind) if boolean else result


_LABEL_DECLARATIONS = _cubekit.label_declarations()

_runtime.declare(label, ["image"], _LABEL_DECLARATIONS + [
    ("return_num", False, "also return the number of components (a list per band for (H, W, B))", None)], """
Connected-component labelling (like ``skimage.measure.label``): nonzero pixels are foreground, and
two neighbouring pixels belong to one component when they hold the same value (a mask or a label
image both work). Every band of an (H, W, B) input is labelled on its own (no 3-D connectivity).
Connectivity is spelt 4 or 8 (scikit-image's 1 or 2); the default is 8.

Parameters
----------
image : array (H, W) or (H, W, B) of bool or an integer type (uint8/16/32, int8/16/32)
    NumPy, CuPy or PyTorch CUDA; any strides. Floats raise ValueError. Or a file path (ENVI,
    .npy, GeoTIFF read by windows), which takes the tiled path.
memory_limit, device_memory_limit, devices, tile_size : optional
    The tiled path (NumPy or a path in, NumPy out): tiles labelled on their own and joined exactly
    across their borders (the same labels); ``devices=[0, 1]`` deals them to two GPUs.

Returns
-------
int32 labels of the input's shape and kind (0 = background; each band numbered 1..n in raster
order of the components' first pixels); with return_num, ``(labels, n)``: n an int for (H, W)
input, a list of per-band counts for (H, W, B). CPU and CUDA give identical labels.

Example
-------
>>> import numpy as np, cubekit
>>> m = np.array([[1, 1, 0, 0], [0, 0, 0, 1], [1, 0, 0, 1]], np.uint8)
>>> labels, n = cubekit.label(m, connectivity=4, return_num=True)
>>> n, labels.tolist()
(3, [[1, 1, 0, 0], [0, 0, 0, 2], [3, 0, 0, 2]])
>>> bool((cubekit.label(m, connectivity=4, tile_size=(1, 1)) == labels).all())   # one-pixel tiles
True
""")
_runtime.with_tile_keywords(label)

_runtime.declare(label_components, ["image"], _LABEL_DECLARATIONS, """
Connected-component labelling with every component's size and bounding box; the labels are those
of :func:`label`.

Returns
-------
Components: ``.labels`` (int32, input's shape and kind), ``.stats`` (per band a NumPy structured
array on the host, fields size, x0, y0, x1, y1; row label - 1), ``.counts``; ``.tiled`` (the
report) with the tile keywords of :func:`label` or a file path.

Example
-------
>>> import numpy as np, cubekit
>>> m = np.zeros((6, 8), np.uint8); m[1:3, 1:4] = 1; m[4, 6] = 1
>>> c = cubekit.label_components(m)
>>> c.counts, c.stats[0]["size"].tolist(), int(c.stats[0][0]["x1"])
([2], [6, 1], 3)
""")
_runtime.with_tile_keywords(label_components)

_runtime.declare(remove_small_objects, ["mask"], _cubekit.remove_small_objects_declarations(), """
Removes the small connected components of a mask (like ``skimage.morphology.remove_small_objects``,
the edge detector's noise removal E3): every component of fewer than ``min_size`` pixels is zeroed,
other pixels keep their value. The same rule as scikit-image ("smaller than min_size removed";
min_size 0 or 1 removes nothing), with these differences: components follow the equal-value rule
of :func:`label` (two touching regions of different nonzero values are two components), bands of
an (H, W, B) mask are independent, connectivity is 4 or 8 with default 8 (scikit-image: 1, i.e. 4).

Parameters
----------
mask : array (H, W) or (H, W, B) of uint8 or bool (nonzero = foreground)
    NumPy, CuPy or PyTorch CUDA; any strides; other dtypes raise ValueError. ``out=mask`` cleans
    in place. Or a file path (ENVI, .npy, GeoTIFF read by windows): the tiled path.
memory_limit, device_memory_limit, devices, tile_size : optional
    The tiled path (NumPy or a path in, NumPy out): a labelling pass finds every component's size in
    the scene, then each tile is labelled again and cleaned (the same result).

Returns
-------
Array of the mask's shape and kind: bool for a bool mask, else uint8.

Example
-------
>>> import numpy as np, cubekit
>>> m = np.zeros((8, 8), bool); m[1:4, 1:4] = True; m[6, 6] = True
>>> int(cubekit.remove_small_objects(m, min_size=2).sum())       # the lone pixel is gone
9
>>> int(cubekit.remove_small_objects(m, min_size=2, tile_size=(3, 3)).sum())
9
""")
_runtime.with_tile_keywords(remove_small_objects)
