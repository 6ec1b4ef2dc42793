"""Watershed and segmentation (spec gradient-watershed.md part B; cubekit/watershed.hpp): the
cellular-automaton watershed of a relief with scikit-image's argument names, its boundary map,
the RCMG -> watershed segmentation of a cube and per-region statistics. Each is the CLI's
``cubekit watershed`` / ``cubekit segment``: the same library code, the same labels.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass

import numpy as np

from . import _cubekit, _runtime
from ._gradient import _DECLARATIONS as _RCMG_DECLARATIONS

_INT32_MAX = 2**31 - 1


def region_dtype(bands: int) -> np.dtype:
    """The row of a region table (named as the CLI's ``--regions-out``): inclusive box x0..x1,
    y0..y1 (x = column, y = row), centroid = mean pixel coordinates, the region's mean gradient
    (NaN without one) and mean spectrum (``bands`` values, 0 without a cube)."""
    return np.dtype([("label", "<i4"), ("area", "<i8"), ("x0", "<i8"), ("y0", "<i8"), ("x1", "<i8"), ("y1", "<i8"),
                     ("centroid_x", "<f8"), ("centroid_y", "<f8"), ("mean_gradient", "<f8"),
                     ("mean_spectrum", "<f8", (bands,))])


@dataclass
class SegmentResult:
    """What :func:`segment` returns.

    labels : int32 (H, W) watershed labels 1..count, of the input's kind.
    gradient : (H, W) float32 RCMG (float64 with out_type='f64'), of the input's kind.
    count : the number of regions R.
    regions : the region table (a NumPy structured array, ``region_dtype``; row i = label i + 1 without
        markers), or None with ``statistics=False``.
    """
    labels: object
    gradient: object
    count: int
    regions: object = None


# ---- helpers ---------------------------------------------------------------------------------------

def _zyx_to_xyz(a, kind):
    """A (D, H, W) array as the (H, W, D) view the library reads (bands = z-slices); no copy."""
    return a.permute(1, 2, 0) if kind == "torch" else a.transpose(1, 2, 0)


def _xyz_to_zyx(a, kind):
    return a.permute(2, 0, 1) if kind == "torch" else a.transpose(2, 0, 1)


def _dtype_name(a) -> str:
    return str(getattr(a, "dtype", "")).replace("torch.", "")


def _as_markers(markers, kind, function: str, name: str = "markers"):
    """Integer labels as an array the library takes; 64-bit integers (NumPy's default) are converted
    to int32 after checking their range (values <= 0 mean no label either way)."""
    if markers is None:
        return None
    if isinstance(markers, (int, np.integer)) and not isinstance(markers, bool):
        raise ValueError(f"{function}: {name} = {markers}: a number of markers is not supported; give a label image "
                         "(> 0 = a marker), or None for one region per regional minimum")
    if kind == "numpy":
        markers = np.asarray(markers)
    if _dtype_name(markers) not in ("int64", "uint64"):
        return markers
    n = markers.numel() if kind == "torch" else markers.size
    if n and int(markers.max()) > _INT32_MAX:
        raise ValueError(f"{function}: {name} hold {int(markers.max())}; labels must be at most 2^31-1")
    if n and int(markers.min()) < -_INT32_MAX:
        markers = markers.clip(min=0)
    if kind == "torch":
        import torch
        return markers.to(torch.int32)
    return markers.astype("int32")


def _as_mask(mask, kind):
    """The mask as bool or uint8 (nonzero and not NaN = inside)."""
    if mask is None:
        return None
    if kind == "numpy":
        mask = np.asarray(mask)
    name = _dtype_name(mask)
    if name in ("bool", "uint8"):
        return mask
    inside = mask != 0
    if name.startswith("float"):
        inside = inside & (mask == mask)
    return inside


def _table(columns, bands: int) -> np.ndarray:
    rows = np.zeros(len(columns["label"]), region_dtype(bands))
    for name in rows.dtype.names:
        rows[name] = columns[name]
    return rows


def _check_connectivity(connectivity, volume: bool, function: str) -> int:
    if connectivity is None:
        return 26 if volume else 8
    if isinstance(connectivity, (int, np.integer)) and not isinstance(connectivity, bool) and connectivity in (1, 2, 3):
        raise ValueError(f"{function}: connectivity = {connectivity}; cubekit spells it as the neighbour count: 4 or 8 "
                         "(scikit-image's 1 or 2), 6 or 26 for a volume")
    return connectivity


def _check_image(image, volume: bool, function: str, name: str = "image"):
    shape = tuple(int(n) for n in image.shape)
    if volume and len(shape) != 3:
        raise ValueError(f"{function}: {name} has shape {shape}; with volume=True expected (D, H, W)")
    if not volume and not (len(shape) == 2 or (len(shape) == 3 and shape[2] == 1)):
        raise ValueError(f"{function}: {name} has shape {shape}; expected (H, W) (a one-band relief), "
                         "or (D, H, W) with volume=True")


_SKIMAGE_DEFAULTS = {"offset": None, "compactness": 0, "watershed_line": False}


def _skimage_keywords(keywords: dict, function: str) -> None:
    """scikit-image's keywords that cubekit's automaton has no use for, accepted at their defaults."""
    for key, default in _SKIMAGE_DEFAULTS.items():
        if key not in keywords:
            continue
        value = keywords.pop(key)
        if value is None and default is None or (default is not None and value == default):
            continue
        why = {"offset": "the neighbourhood is given by connectivity (4, 8, 6 or 26) alone",
               "compactness": "the automaton is the steepest-descent watershed (no compact watershed)",
               "watershed_line": "every pixel gets a label; draw the lines with watershed_boundary()"}[key]
        raise ValueError(f"{function}: {key} = {value!r} is not supported: {why}")


# ---- watershed ---------------------------------------------------------------------------------------

def watershed(image, markers=None, connectivity=None, mask=None, **keywords):
    return_regions = keywords.pop("return_regions", False)
    if not isinstance(return_regions, (bool, np.bool_)):
        raise ValueError(f"watershed: return_regions = {return_regions!r}; expected True or False")
    _skimage_keywords(keywords, "watershed")
    tiles = _runtime.pop_tile_keywords(keywords)
    if tiles or _runtime.is_path(image):
        labels, regions = _watershed_tiled(image, markers, connectivity, mask, keywords, tiles)
        return (labels, regions) if return_regions else labels
    ctx, kind, out, progress = _runtime.begin(image, keywords, "watershed")
    volume = bool(keywords.get("volume", False))
    keywords["connectivity"] = _check_connectivity(connectivity, volume, "watershed")
    if kind == "numpy":
        image = np.asarray(image)
    _check_image(image, volume, "watershed")
    markers = _as_markers(markers, kind, "watershed")
    mask = _as_mask(mask, kind)
    for name, a in (("markers", markers), ("mask", mask), ("out", out)):
        if a is not None and tuple(a.shape) != tuple(image.shape):
            raise ValueError(f"watershed: {name} has shape {tuple(a.shape)}; expected the image's {tuple(image.shape)}")
    if out is None and kind != "numpy":
        out = _runtime.empty(kind, image, tuple(image.shape), "int32")
    target = out
    if volume:
        image, markers, mask = (None if a is None else _zyx_to_xyz(a, kind) for a in (image, markers, mask))
        target = None if out is None else _zyx_to_xyz(out, kind)
    labels, regions = _cubekit.watershed(ctx, image, markers, mask, target, keywords, progress)
    if out is not None:
        labels = out
    elif volume:
        labels = _xyz_to_zyx(labels, kind)  # (H, W, D) of BSQ memory: a C-contiguous (D, H, W) array
    return (labels, int(regions)) if return_regions else labels


def _watershed_tiled(image, markers, connectivity, mask, keywords, tiles):
    """The tiled path: a NumPy (H, W) relief or a file path (ENVI/.npy/GeoTIFF read by windows); NumPy out."""
    if markers is not None:
        raise ValueError("watershed: markers need the whole relief; they cannot run in tiles (leave out memory_limit, "
                         "device_memory_limit, devices and tile_size, and pass an array)")
    if keywords.get("volume"):
        raise ValueError("watershed: volume=True cannot run in tiles (tiles cut 2-D reliefs)")
    keywords["connectivity"] = _check_connectivity(connectivity, False, "watershed")
    if not _runtime.is_path(image):
        image = np.asarray(image)
        _check_image(image, False, "watershed")
    if mask is not None:
        mask = np.ascontiguousarray(_as_mask(np.asarray(mask), "numpy")).view("uint8")
        if not _runtime.is_path(image) and mask.shape[:2] != image.shape[:2]:
            raise ValueError(f"watershed: mask has shape {mask.shape}; expected the image's {image.shape}")
    ctx, progress = _runtime.begin_tiled(image, keywords, tiles, "watershed")
    labels, regions, _run = _cubekit.watershed_tiled(ctx, _runtime.fspath_or(image), mask, keywords, tiles, progress)
    return labels, int(regions)


def watershed_boundary(labels, connectivity=None, volume=False):
    """The boundary map of a label image (a display aid; spec B2): uint8, 1 where a forward neighbour
    (right or lower; with 8-connectivity any of (0, +1), (+1, -1), (+1, 0), (+1, +1); volumes: any
    forward neighbour of the 6 or 26) has another label, else 0.

    labels : int32 (H, W), or (D, H, W) with volume=True; NumPy, CuPy or PyTorch CUDA (computed on
        the host; the map comes back as the labels' kind).
    connectivity : 4 or 8 (default 8); 6 or 26 with volume (default 26).

    >>> import numpy as np, cubekit
    >>> cubekit.watershed_boundary(np.array([[1, 1, 2], [1, 1, 2]], np.int32), connectivity=4).tolist()
    [[0, 1, 0], [0, 1, 0]]
    """
    ctx, kind = _runtime.context(labels, None, None, 0)
    connectivity = _check_connectivity(connectivity, bool(volume), "watershed_boundary")
    if kind == "numpy":
        labels = np.asarray(labels)
    _check_image(labels, bool(volume), "watershed_boundary", "labels")
    view = _zyx_to_xyz(labels, kind) if volume else labels
    b = _cubekit.watershed_boundary(ctx, view, connectivity, bool(volume))
    if volume:
        b = b.transpose(2, 0, 1)
    return b if kind == "numpy" else _to_kind(b, kind, labels)


def _to_kind(a, kind, like):
    if kind == "torch":
        import torch
        return torch.as_tensor(a, device=like.device)
    import cupy
    with cupy.cuda.Device(like.device.id if kind == "cupy" else cupy.cuda.runtime.getDevice()):
        return cupy.asarray(a)


# ---- segment and region statistics ---------------------------------------------------------------------

_WS_DECLARATIONS = _cubekit.watershed_declarations()
_SEGMENT_WS = [d for d in _WS_DECLARATIONS if d[0] != "volume"]
_SEGMENT_RCMG = [d for d in _RCMG_DECLARATIONS if d[0] != "connectivity"]
_SEGMENT_RCMG_NAMES = {d[0] for d in _SEGMENT_RCMG}
_SEGMENT_WS_NAMES = {d[0] for d in _SEGMENT_WS}


def segment(cube, **keywords):
    markers = keywords.pop("markers", None)
    mask = keywords.pop("mask", None)
    statistics = keywords.pop("statistics", True)
    if not isinstance(statistics, (bool, np.bool_)):
        raise ValueError(f"segment: statistics = {statistics!r}; expected True or False")
    tiles = _runtime.pop_tile_keywords(keywords)
    if tiles or _runtime.is_path(cube):
        return _segment_tiled(cube, markers, mask, statistics, keywords, tiles)
    ctx, kind, out, progress = _runtime.begin(cube, keywords, "segment")
    if out is not None:
        raise TypeError("segment() got an unexpected keyword argument 'out'; its results come back in a SegmentResult")
    connectivity = keywords.pop("connectivity", None)
    connectivity = 8 if connectivity is None else _check_connectivity(connectivity, False, "segment")
    rcmg_connectivity = keywords.pop("rcmg_connectivity", None)
    rcmg_keywords, ws_keywords = {}, {}
    for key, value in keywords.items():
        if key in _SEGMENT_RCMG_NAMES:
            rcmg_keywords[key] = value
        elif key in _SEGMENT_WS_NAMES:
            ws_keywords[key] = value
        else:
            known = ["markers", "mask", "connectivity", "rcmg_connectivity", "statistics"] + \
                    [d[0] for d in _SEGMENT_RCMG + _SEGMENT_WS]
            raise TypeError(f"segment() got an unexpected keyword argument '{key}'; its options are " + ", ".join(known))
    ws_keywords["connectivity"] = connectivity
    rcmg_keywords["connectivity"] = connectivity if rcmg_connectivity is None else rcmg_connectivity
    if kind == "numpy":
        cube = np.asarray(cube)
    h, w = int(cube.shape[0]), int(cube.shape[1])
    markers = _as_markers(markers, kind, "segment")
    mask = _as_mask(mask, kind)
    for name, a in (("markers", markers), ("mask", mask)):
        if a is not None and tuple(a.shape) != (h, w):
            raise ValueError(f"segment: {name} has shape {tuple(a.shape)}; expected the cube's (H, W) = {(h, w)}")
    gradient_out = labels_out = None
    if kind != "numpy":
        out_type = rcmg_keywords.get("out_type") or "f32"
        gradient_out = _runtime.empty(kind, cube, (h, w), _runtime.numpy_dtype(out_type))
        labels_out = _runtime.empty(kind, cube, (h, w), "int32")
    d = _cubekit.segment(ctx, cube, markers, mask, gradient_out, labels_out, rcmg_keywords, ws_keywords,
                         bool(statistics), progress)
    bands = int(cube.shape[2]) if len(cube.shape) == 3 else 1
    table = None if d["table"] is None else _table(d["table"], bands)
    return SegmentResult(labels=d["labels"], gradient=d["gradient"], count=int(d["regions"]), regions=table)


def _segment_tiled(cube, markers, mask, statistics, keywords, tiles):
    """The tiled path: the RCMG in tiles, then the watershed of it in tiles (NumPy or a file path in,
    NumPy out); the region table from the NumPy arrays."""
    if markers is not None:
        raise ValueError("segment: markers need the whole relief; they cannot run in tiles")
    connectivity = keywords.pop("connectivity", None)
    connectivity = 8 if connectivity is None else _check_connectivity(connectivity, False, "segment")
    rcmg_connectivity = keywords.pop("rcmg_connectivity", None)
    common = {k: keywords.pop(k) for k in ("backend", "device", "threads", "progress") if k in keywords}
    rcmg_keywords = {k: keywords.pop(k) for k in list(keywords) if k in _SEGMENT_RCMG_NAMES}
    rcmg_keywords["connectivity"] = connectivity if rcmg_connectivity is None else rcmg_connectivity
    from ._gradient import rcmg
    gradient = rcmg(cube, **rcmg_keywords, **common, **tiles)
    labels, count = watershed(gradient, connectivity=connectivity, mask=mask, return_regions=True, **keywords, **common,
                              **tiles)
    table = None
    if statistics:  # a file is read a strip of rows at a time (within memory_limit): the same table
        table = region_statistics(labels, cube if _runtime.is_path(cube) else np.asarray(cube), gradient,
                                  memory_limit=tiles.get("memory_limit"))
    return SegmentResult(labels=labels, gradient=gradient, count=count, regions=table)


def region_statistics(labels, cube=None, gradient=None, memory_limit=None):
    """Per-region statistics of a label image (regions = labels > 0, ascending), as ``segment``
    computes them and the CLI's ``--regions-out`` writes them.

    labels : int32 (H, W) (int64 is converted after a range check); cube : optional (H, W) or
        (H, W, B) of the same size (mean spectrum per region, in float64), or the path of a cube file
        (ENVI, .npy, GeoTIFF), read a strip of rows at a time so that it never has to fit in memory
        (the same numbers); gradient : optional (H, W) relief (mean gradient). NumPy, CuPy or PyTorch
        CUDA arrays (device data is read back once).
    memory_limit : bytes (or "512M") for the strip of a cube file; None = 256 MiB.

    Returns a NumPy structured array, one row per label present (``region_dtype(B)``: label, area,
    x0, y0, x1, y1, centroid_x, centroid_y, mean_gradient, mean_spectrum).

    >>> import numpy as np, cubekit
    >>> labels = np.array([[1, 1, 2], [1, 3, 2]], np.int32)
    >>> r = cubekit.region_statistics(labels, cube=np.arange(6.0).reshape(2, 3))
    >>> r["area"].tolist(), r["x1"].tolist(), r["mean_spectrum"][:, 0].tolist()
    ([3, 2, 1], [1, 2, 1], [1.3333333333333333, 3.5, 4.0])
    """
    ctx, kind = _runtime.context(labels, None, None, 0)
    labels = _as_markers(labels, kind, "region_statistics", "labels")
    path = _runtime.is_path(cube)
    if kind == "numpy":
        cube = cube if cube is None or path else np.asarray(cube)
        gradient = None if gradient is None else np.asarray(gradient)
    columns = _cubekit.region_statistics(ctx, labels, _runtime.fspath_or(cube), gradient, memory_limit)
    if cube is None:
        return _table(columns, 0)
    spectra = np.asarray(columns["mean_spectrum"])
    bands = int(spectra.shape[1]) if path else (int(cube.shape[2]) if len(cube.shape) == 3 else 1)
    return _table(columns, bands)


# ---- signatures and docstrings -------------------------------------------------------------------------

def _signature(function, params, declarations, extra, out=True):
    kw = inspect.Parameter.KEYWORD_ONLY
    pos = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d) for n, d in params]
    function.__signature__ = inspect.Signature(
        pos + _runtime.option_parameters(declarations) + [inspect.Parameter(n, kw, default=d) for n, d in extra] +
        _runtime.common_parameters(out))


_WATERSHED_OPTIONS = [d for d in _WS_DECLARATIONS if d[0] != "connectivity"]
_signature(watershed, [("image", inspect.Parameter.empty), ("markers", None), ("connectivity", 8), ("mask", None)],
           _WATERSHED_OPTIONS, [("return_regions", False)] + list(_SKIMAGE_DEFAULTS.items()))
watershed.__doc__ = """
Watershed of a relief (like ``skimage.segmentation.watershed``, with its argument names): every pixel
flows down its steepest neighbour (the lowest; across a plateau towards its nearest lower border) into
a regional minimum, and each minimum's basin is one region (spec gradient-watershed.md, Decision B-2:
the result does not depend on the update order, so CPU and GPU labels are identical). Every pixel gets
a label: there are no watershed-line pixels (draw lines with :func:`watershed_boundary`).

Parameters
----------
image : array (H, W), or (D, H, W) with volume=True
    The relief: uint8, uint16, int16, uint32, int32, float32 or float64 (bool, int8 and float16 are
    widened), compared exactly in its type; NaN raises ValueError. NumPy, CuPy or PyTorch CUDA; any
    strides.
markers : array of the image's shape, optional
    Integer seed labels (> 0 = a marker; int64 is converted after a range check). The relief is
    replaced by its reconstruction by erosion from the markers (minima imposition), so each region
    is the basin of one marker and keeps its label (values are not renumbered); pixels no marker
    reaches get 0. None: one region per regional minimum, numbered 1..R in raster order of each
    minimum's first pixel.
connectivity : 4 or 8 (default 8); with volume=True 6 or 26 (default 26)
    scikit-image's 1 and 2 are spelt 4 and 8.
mask : array of the image's shape, optional
    Nonzero = inside; pixels outside get label 0 and are no part of the relief.
return_regions : bool
    Also return R, the number of regions (with markers: of the marker labels reached).
offset, compactness, watershed_line
    scikit-image's; accepted at their defaults (None, 0, False) only.
memory_limit, device_memory_limit, devices, tile_size : optional
    Run in tiles with a 1-pixel halo (bytes or "64M"; a device list; (width, height)): the tiles
    exchange plateau distances until they agree, then their labels are joined, so the labels are
    exactly the whole run's. ``image`` may then also be a file path (ENVI, .npy, GeoTIFF: read by
    windows); NumPy in, NumPy out; a 2-D relief, with a mask but no markers, levels, h_min or min_area.

Returns
-------
int32 labels of the image's shape and kind (a CuPy array or a torch tensor for device input, left
queued on its stream); with return_regions, ``(labels, R)``.

Example
-------
>>> import numpy as np, cubekit
>>> relief = np.array([[1, 2, 3, 2, 1], [1, 2, 4, 2, 1]], np.uint8)
>>> labels, n = cubekit.watershed(relief, connectivity=4, return_regions=True)
>>> n, labels.tolist()
(2, [[1, 1, 1, 2, 2], [1, 1, 1, 2, 2]])
>>> cubekit.watershed(relief, markers=np.array([[0, 0, 0, 0, 7], [0, 0, 0, 0, 0]])).tolist()
[[7, 7, 7, 7, 7], [7, 7, 7, 7, 7]]
>>> cubekit.watershed(relief, connectivity=4, tile_size=(2, 1)).tolist()   # in 6 tiles: the same labels
[[1, 1, 1, 2, 2], [1, 1, 1, 2, 2]]
"""
watershed.__doc__ += "\nOptions\n-------\n" + _runtime.option_docs(_WATERSHED_OPTIONS) + \
    "\n\nCommon\n------\n" + _runtime.COMMON_DOC + "\n"
_runtime.with_tile_keywords(watershed)

_signature(segment, [("cube", inspect.Parameter.empty)], [],
           [("markers", None), ("mask", None), ("connectivity", 8), ("rcmg_connectivity", None),
            ("statistics", True)] + [(d[0], d[1]) for d in _SEGMENT_RCMG + _SEGMENT_WS if d[0] != "connectivity"],
           out=False)
segment.__doc__ = """
Segmentation of an image or cube: its RCMG gradient (:func:`rcmg`), then the :func:`watershed` of the
gradient — the CLI's ``cubekit segment``. On the GPU the gradient stays on the device between the two.

Parameters
----------
cube : array (H, W) or (H, W, B)
    NumPy, CuPy or PyTorch CUDA; any dtype :func:`rcmg` takes; any strides.
markers, mask : arrays (H, W), optional
    As in :func:`watershed`.
connectivity : 4 or 8 (default 8)
    The watershed's neighbours and, unless rcmg_connectivity is given, the RCMG window.
rcmg_connectivity : 4 or 8, optional
    The RCMG window when it differs from connectivity.
statistics : bool
    Compute the region table (area, box, centroid, mean spectrum and mean gradient of each region).
memory_limit, device_memory_limit, devices, tile_size : optional
    The RCMG and the watershed in tiles (as :func:`rcmg` and :func:`watershed`): the same labels and
    gradient; ``cube`` may then be a file path, whose region table is read a strip of rows at a time
    within memory_limit (the same numbers). No markers, levels, h_min or min_area.

Returns
-------
SegmentResult: ``.labels`` (int32 (H, W)), ``.gradient`` ((H, W) float32), both of the input's kind;
``.count`` (R); ``.regions`` (NumPy structured array, ``region_dtype(B)``, or None).

Example
-------
>>> import numpy as np, cubekit
>>> cube = np.zeros((20, 30, 3), np.float32); cube[:, 15:] = 1; cube[8:12, 4:8] = 2
>>> s = cubekit.segment(cube, levels=8)
>>> s.count, s.labels.shape, int(s.regions["area"].sum())
(3, (20, 30), 600)
"""
segment.__doc__ += "\nOptions\n-------\n" + _runtime.option_docs(
    [d for d in _SEGMENT_RCMG + _SEGMENT_WS if d[0] != "connectivity"]) + "\n\nCommon\n------\n" + _runtime.COMMON_DOC + "\n"
_runtime.with_tile_keywords(segment)
