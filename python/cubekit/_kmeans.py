"""k-means clustering of pixel vectors and colour quantization (spec: kmeans.md).

``kmeans`` is ``cubekit cluster``, ``apply_palette`` is ``cubekit cluster --centroids-in`` and
``quantize`` is ``cubekit quantize``: the same labels, centroids, palette and numbers, bit for bit.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import _cubekit, _runtime

# ---- results ---------------------------------------------------------------------------------------


def _summary(self, names) -> str:
    parts = ", ".join(f"{n}={getattr(self, n)!r}" for n in names)
    return f"{type(self).__name__}({parts}, ...)"


@dataclass(eq=False, repr=False)
class KMeansResult:
    """What ``kmeans`` and ``apply_palette`` give; scalar fields are named as ``cubekit cluster --json``.

    labels : (H, W) int32, of the input's kind: cluster 0..k-1 (by decreasing pixel count), -1 for
        excluded pixels (mask 0 or a NaN band).
    centroids : (k, B) NumPy, float32 (float64 for float64 input): the cluster means, sorted like
        the labels (a cluster that never got a pixel holds NaN).
    counts : (k,) NumPy uint64, pixels per cluster.
    history : NumPy float64, the inertia after each assignment step of the winning run.
    restarts : list of dicts (seed, inertia, iterations, converged, k_effective), one per n_init.
    """
    labels: object
    centroids: np.ndarray
    counts: np.ndarray
    k: int
    k_effective: int
    inertia: float
    iterations: int
    converged: bool
    valid_pixels: int
    winner: int
    restarts: list
    history: np.ndarray
    bands: int
    dtype: str
    centroid_type: str
    mode: str
    implementation: str
    parameters: dict
    warnings: list = field(default_factory=list)
    #: the tiled path (tile keywords or a file path): the CLI's JSON "tiled" ("tiles", "passes",
    #: "peak_bytes", ...); None for a whole-scene call.
    tiled: dict | None = None

    def __repr__(self):
        return _summary(self, ("k", "k_effective", "inertia", "iterations", "converged", "mode"))


@dataclass(eq=False, repr=False)
class QuantizeResult:
    """What ``quantize`` gives; scalar fields are named as ``cubekit quantize --json`` and its
    palette JSON.

    image : the quantized image, shape and element type of the input, of the input's kind.
    labels : (H, W) int32, of the input's kind: the palette entry of each pixel, -1 if excluded.
    palette : (n, channels) NumPy in the image's element type: the colours used (n = palette_size,
        clusters without pixels left out), by decreasing pixel count.
    centroids : (n, channels) NumPy, the unrounded cluster means of integer images (float32), or
        None (float images, Lab, dithering, applied palettes), as the palette JSON's "centroid".
    counts : (n,) NumPy uint64; fractions : (n,) float64 = counts / valid_pixels.
    """
    image: object
    labels: object
    palette: np.ndarray
    centroids: object
    counts: np.ndarray
    fractions: np.ndarray
    palette_size: int
    k: int
    k_effective: int
    inertia: float
    iterations: int
    converged: bool
    valid_pixels: int
    winner: int
    restarts: list
    history: np.ndarray
    channels: int
    dtype: str
    colorspace: str
    dither: str
    mode: str
    implementation: str
    parameters: dict
    warnings: list = field(default_factory=list)
    #: the tiled path (tile keywords or a file path): the CLI's JSON "tiled" ("tiles", "passes", ...)
    tiled: dict | None = None

    def __repr__(self):
        return _summary(self, ("palette_size", "k", "inertia", "iterations", "converged", "mode"))


# ---- argument helpers ------------------------------------------------------------------------------

_CONVERTED = {"bool": "uint8", "int8": "int16", "float16": "float32"}
_CUBE_TYPES = {"uint8", "uint16", "int16", "uint32", "int32", "float32", "float64"}


def _cube_dtype(x):
    """The element type the library sees for ``x`` (bool → uint8, int8 → int16, float16 →
    float32), or None when it refuses it (the compiled call then names the argument)."""
    name = str(x.dtype).replace("torch.", "")
    name = _CONVERTED.get(name, name)
    return name if name in _CUBE_TYPES else None


def _as_input(x, kind):
    return np.asarray(x) if kind == "numpy" else x


def _shape(x, function: str, name: str = "image"):
    """(H, W, B) of an (H, W) or (H, W, B) array; ValueError otherwise."""
    shape = tuple(int(n) for n in x.shape)
    if len(shape) not in (2, 3):
        raise ValueError(f"{function}: {name} has {len(shape)} dimensions; expected (H, W) or (H, W, B)")
    return shape[0], shape[1], (shape[2] if len(shape) == 3 else 1)


def _source_shape(image, function: str):
    """(H, W, B) of a tiled call's input: a file's from its header, an array's own."""
    return _cubekit.file_shape(_runtime.fspath_or(image)) if _runtime.is_path(image) else _shape(image, function)


def _mask(mask, h: int, w: int, function: str):
    """The mask as a C-contiguous uint8 (H, W) array: nonzero and not NaN = used."""
    if mask is None:
        return None
    m = _runtime.to_host(mask)
    if m.ndim == 3 and m.shape[2] == 1:
        m = m[:, :, 0]
    if m.shape != (h, w):
        raise ValueError(f"{function}: mask has shape {m.shape}; expected ({h}, {w}), the image's (H, W)")
    if m.dtype == object or m.dtype.kind not in "biuf":
        raise ValueError(f"{function}: mask has dtype {m.dtype}; expected numbers or bool (0 = excluded)")
    used = (m != 0) & ~np.isnan(m) if m.dtype.kind == "f" else m != 0
    if not used.any():
        raise ValueError(f"{function}: mask is 0 everywhere (every pixel excluded); nothing is left to cluster")
    return np.ascontiguousarray(used, dtype=np.uint8)


def _table(values, columns: int, function: str, name: str):
    """(n, columns) float64 C-contiguous, n >= 1 (a 1-D array is n × 1 for one column)."""
    t = np.array(_runtime.to_host(values), dtype=np.float64, copy=True)
    if t.ndim == 1 and columns == 1:
        t = t[:, None]
    if t.ndim != 2 or t.shape[0] < 1 or t.shape[1] != columns:
        raise ValueError(f"{function}: {name} has shape {t.shape}; expected (n, {columns}), one row of "
                         f"{columns} value(s) per entry")
    if not np.isfinite(t).all():
        raise ValueError(f"{function}: {name} contains a value that is not finite")
    return np.ascontiguousarray(t)


def _check_k(keywords, n: int, function: str, name: str):
    """k defaults to the n given entries; a k that disagrees is an error (as in the CLI)."""
    k = keywords.get("k")
    if k is None:
        keywords["k"] = n
    elif not isinstance(k, bool) and isinstance(k, (int, np.integer)) and k != n:
        raise ValueError(f"{function}: k = {k} disagrees with {name}, which has {n} entries")


# ---- kmeans ----------------------------------------------------------------------------------------

def kmeans(image, **keywords):
    return _kmeans(image, keywords)


def _kmeans(image, keywords):
    tiles = _runtime.pop_tile_keywords(keywords)
    if tiles or _runtime.is_path(image):
        return _kmeans_tiled(image, keywords, tiles)
    backend, device, threads, _, progress = _runtime.split_common(keywords, out=False)
    mask = keywords.pop("mask", None)
    init_centroids = keywords.pop("init_centroids", None)
    if keywords.get("init") is not None and not isinstance(keywords["init"], str) and init_centroids is None:
        init_centroids = keywords.pop("init")  # scikit-learn's spelling: init=array
    ctx, kind = _runtime.context(image, backend, device, threads)
    image = _as_input(image, kind)
    h, w, b = _shape(image, "kmeans")
    centroids = _explicit_centroids(keywords, init_centroids, b)
    labels = _runtime.new_output(kind, image, (h, w), "int32")
    d = _cubekit.kmeans(ctx, image, labels, keywords, _mask(mask, h, w, "kmeans"), centroids, _CLUSTER_K, progress)
    return KMeansResult(labels=labels, **d)


def _kmeans_tiled(image, keywords, tiles):
    """kmeans in tiles (a NumPy array or a file read by windows), on the CPU or the GPUs: the same bits."""
    mask = keywords.pop("mask", None)
    init_centroids = keywords.pop("init_centroids", None)
    if keywords.get("init") is not None and not isinstance(keywords["init"], str) and init_centroids is None:
        init_centroids = keywords.pop("init")
    ctx, progress = _runtime.begin_tiled(image, keywords, tiles, "kmeans")
    source = _runtime.fspath_or(image)
    h, w, b = _source_shape(image, "kmeans")
    centroids = _explicit_centroids(keywords, init_centroids, b)
    labels, d = _cubekit.kmeans_tiled(ctx, source, keywords, _mask(mask, h, w, "kmeans"), centroids, _CLUSTER_K,
                                      tiles, progress)
    return KMeansResult(labels=labels, **d)


def _explicit_centroids(keywords, init_centroids, b):
    """The explicit initial centroids as a (k, b) float64 table (init and k checked), or None."""
    centroids = None
    if init_centroids is not None:
        centroids = _table(init_centroids, b, "kmeans", "init_centroids")
        init = keywords.setdefault("init", "explicit") or "explicit"
        if init != "explicit":
            raise ValueError(f"kmeans: init = {init!r} with init_centroids; init_centroids are explicit initial "
                             "centroids (leave init out, or use apply_palette to classify with fixed centroids)")
        keywords["init"] = "explicit"
        _check_k(keywords, len(centroids), "kmeans", "init_centroids")
    elif keywords.get("init") == "explicit":
        raise ValueError("kmeans: init = 'explicit' needs init_centroids, a (k, bands) array")
    return centroids


def apply_palette(image, palette, **keywords):
    return _apply_palette(image, palette, keywords)


def _apply_palette(image, palette, keywords):
    backend, device, threads, _, progress = _runtime.split_common(keywords, out=False)
    mask = keywords.pop("mask", None)
    if keywords:
        raise TypeError(f"apply_palette() got an unexpected keyword argument '{next(iter(keywords))}'; "
                        "its options are mask, backend, device, threads, progress")
    ctx, kind = _runtime.context(image, backend, device, threads)
    image = _as_input(image, kind)
    h, w, b = _shape(image, "apply_palette")
    if isinstance(palette, (KMeansResult, QuantizeResult)):
        palette = palette.centroids if isinstance(palette, KMeansResult) else palette.palette
        palette = np.asarray(palette, np.float64)
        palette = palette[~np.isnan(palette).all(axis=1)]  # clusters that never got a centroid
    table = _table(palette, b, "apply_palette", "palette")
    labels = _runtime.new_output(kind, image, (h, w), "int32")
    d = _cubekit.apply_palette(ctx, image, labels, table, _mask(mask, h, w, "apply_palette"), progress)
    return KMeansResult(labels=labels, **d)


# ---- quantize --------------------------------------------------------------------------------------

def quantize(image, **keywords):
    return _quantize(image, keywords)


def _quantize(image, keywords):
    tiles = _runtime.pop_tile_keywords(keywords)
    mask, palette = keywords.pop("mask", None), keywords.pop("palette", None)
    colorspace, dither = keywords.pop("colorspace", "rgb"), keywords.pop("dither", "none")
    alpha = keywords.pop("alpha", False)
    if not isinstance(alpha, (bool, np.bool_)):
        raise TypeError(f"quantize: alpha = {alpha!r}; expected True or False")
    for name, value in (("colorspace", colorspace), ("dither", dither)):
        if not isinstance(value, str):
            raise TypeError(f"quantize: {name} = {value!r}; expected a string")
    if tiles or _runtime.is_path(image):
        return _quantize_tiled(image, keywords, tiles, mask, palette, colorspace, dither, bool(alpha))
    backend, device, threads, out, progress = _runtime.split_common(keywords)
    ctx, kind = _runtime.context(image, backend, device, threads)
    _runtime.check_out_kind(out, kind, "quantize")
    image = _as_input(image, kind)
    h, w, b = _shape(image, "quantize")
    channels = b - (1 if alpha else 0)
    values = centroids = None
    if palette is not None:
        if isinstance(palette, QuantizeResult):  # like --palette-in with its palette JSON
            palette, centroids = palette.palette, palette.centroids
        values = _table(palette, channels, "quantize", "palette")
        if centroids is not None:
            centroids = _table(centroids, channels, "quantize", "palette centroids")
        _check_k(keywords, len(values), "quantize", "palette")
        if keywords.get("init") != "explicit":
            keywords.pop("k")  # applied, not fitted: k is the palette's
    if out is None:
        out = _runtime.new_output(kind, image, tuple(image.shape), _cube_dtype(image))
    labels = _runtime.new_output(kind, image, (h, w), "int32")
    d = _cubekit.quantize(ctx, image, out, labels, keywords, _mask(mask, h, w, "quantize"), values, centroids,
                          colorspace, dither, bool(alpha), progress)
    return QuantizeResult(image=out, labels=labels, **d)


def _quantize_tiled(image, keywords, tiles, mask, palette, colorspace, dither, alpha):
    """A plain fit in tiles (a NumPy array or a file read by windows), on the CPU or the GPUs: the
    whole call's image, labels and palette bit for bit."""
    if palette is not None:
        raise ValueError("quantize: palette needs the whole image; leave out memory_limit, device_memory_limit, "
                         "devices and tile_size (and pass an array, not a path)")
    ctx, progress = _runtime.begin_tiled(image, keywords, tiles, "quantize")
    source = _runtime.fspath_or(image)
    h, w, _ = _source_shape(image, "quantize")
    painted, labels, d = _cubekit.quantize_tiled(ctx, source, keywords, _mask(mask, h, w, "quantize"), colorspace,
                                                 dither, alpha, tiles, progress)
    if not _runtime.is_path(image) and np.ndim(image) == 2:
        painted = painted.reshape(image.shape)
    return QuantizeResult(image=painted, labels=labels, **d)


# ---- signatures and docstrings ---------------------------------------------------------------------

_DECLARATIONS = _cubekit.kmeans_declarations()
_CLUSTER_K = _cubekit.kmeans_cluster_default_k()
_MASK = ("mask", None, "(H, W) array, 0 (or NaN) = pixel excluded (label -1); NumPy, CuPy or torch", None)
_CLUSTER_DECLARATIONS = [(n, _CLUSTER_K if n == "k" else d, doc, c) for n, d, doc, c in _DECLARATIONS] + [
    ("init_centroids", None, "explicit initial centroids, a (k, bands) array (implies init='explicit'; "
     "init=array is the same)", None), _MASK]
_QUANTIZE_DECLARATIONS = [(n, d, doc.replace("(init_centroids)", "(palette=)"), c) for n, d, doc, c in _DECLARATIONS] + [
    _MASK,
    ("palette", None, "(n, channels) colours, or an earlier QuantizeResult (its palette and centroids): "
     "applied without fitting (like --palette-in); with init='explicit', k-means starts from it", None),
    *_cubekit.quantize_declarations(),  # colorspace, dither
    ("alpha", False, "the last channel is alpha (RGBA, grey+alpha): copied, not clustered (the CLI does this for "
     "PNG files with 2 or 4 channels)", None),
]

_runtime.declare(kmeans, ["image"], _CLUSTER_DECLARATIONS, """
k-means (Lloyd) clustering of the pixel vectors of an image or cube: unsupervised classification of
spectra, as ``cubekit cluster`` (k = 10 by default). Same seed, same result, on CPU and GPU (bit for
bit: labels, centroids, counts, iterations).

Parameters
----------
image : array (H, W) or (H, W, B), or a file path
    NumPy, CuPy or PyTorch CUDA; bool, (u)int8/16/32, float16/32/64; any strides.
    A path (ENVI, .npy, GeoTIFF: read by windows; other formats whole) is computed in tiles.
memory_limit : int or str, optional
    Host working-memory budget in bytes ("512M", "2G"): every pass of k-means runs over tiles that
    fit it, merged exactly: labels, centroids, counts and iterations equal the whole
    call's bit for bit, the inertia within 1e-12 (1e-9 on a GPU; NumPy or path input; ``.tiled``
    reports the tiles and passes). Each iteration reads the scene again: tiles are for scenes that
    do not fit.
device_memory_limit : int or str, optional
    Per-GPU budget: forces tiles on the GPU (backend='cuda').
devices : list of int, optional
    CUDA devices to deal the tiles to (implies backend='cuda').
tile_size : (int, int), optional
    Force tiles of (width, height) pixels (testing).

Returns
-------
KMeansResult: .labels (H, W) int32 of the input's kind (-1 = excluded), .centroids (k, B) and
.counts (k,) as NumPy (small tables stay on the host), .inertia, .iterations, .converged,
.k_effective, .valid_pixels, .winner, .restarts, .history, .parameters, .warnings, .tiled.

Example
-------
>>> import numpy as np, cubekit
>>> cube = np.zeros((32, 32, 4), np.float32); cube[:, 16:] = 1; cube[::2] += 0.1
>>> r = cubekit.kmeans(cube, k=2, seed=7)
>>> r.labels.shape, r.counts.tolist(), r.centroids.shape
((32, 32), [512, 512], (2, 4))
>>> t = cubekit.kmeans(cube, k=2, seed=7, memory_limit="8K")     # in tiles, the same labels
>>> bool((t.labels == r.labels).all()), t.tiled["tiles"] > 1
(True, True)
""", out=False)
_runtime.with_tile_keywords(kmeans)

_runtime.declare(apply_palette, ["image", "palette"], [_MASK], """
Assigns every pixel to its nearest given centroid (the final pass of k-means alone), as
``cubekit cluster --centroids-in``: classify a new scene with the spectra of an earlier fit.

Parameters
----------
image : array (H, W) or (H, W, B), as for kmeans.
palette : (n, B) array of centroids, or a KMeansResult (its centroids) or QuantizeResult (its palette).

Returns
-------
KMeansResult (mode 'apply'): labels index the palette after sorting by decreasing pixel count, as
in kmeans; .centroids are the given rows in that order.

Example
-------
>>> fit = cubekit.kmeans(scene1, k=6)
>>> r = cubekit.apply_palette(scene2, fit)         # scene2's pixels in scene1's classes
""", out=False)

_runtime.declare(quantize, ["image"], _QUANTIZE_DECLARATIONS, """
Colour quantization with k-means, as ``cubekit quantize``: k palette colours (sorted by decreasing
pixel count) and the image repainted with them. Same seed, same result, on CPU and GPU.

Parameters
----------
image : array (H, W) grey, (H, W, 3) RGB, or any (H, W, B), or a file path
    NumPy, CuPy or PyTorch CUDA; bool, (u)int8/16/32, float16/32/64; any strides. A path (.npy,
    ENVI, GeoTIFF: read by windows; PNG and JPEG whole) is fitted in tiles.
memory_limit : int or str, optional
    Host working-memory budget in bytes ("512M", "2G"): a plain fit (no palette, colorspace 'rgb',
    no dithering, not legacy) whose every k-means pass runs over tiles within it, merged exactly: the
    whole call's image, labels and palette bit for bit (NumPy or path input; ``.tiled`` reports the
    tiles and passes). Each iteration reads the image again: tiles are for images that do not fit.
device_memory_limit : int or str, optional
    Per-GPU budget: forces tiles on the GPU (backend='cuda').
devices : list of int or "all", optional
    CUDA devices to deal the tiles to (implies backend='cuda').
tile_size : (int, int), optional
    Force tiles of (width, height) pixels (testing).

Returns
-------
QuantizeResult: .image (the quantized image: the input's shape, element type and kind; out= if
given; NumPy in tiles), .labels (H, W) int32 of the input's kind, .palette (n, channels) NumPy in
the image's type, .centroids, .counts, .fractions, .palette_size, .inertia, .iterations, .converged,
.tiled, ...

Example
-------
>>> import cubekit
>>> photo = cubekit.imread(cubekit.data_path("chelsea"))          # (300, 451, 3) uint8
>>> q = cubekit.quantize(photo, k=8, seed=7)
>>> q.image.dtype, q.palette.shape
(dtype('uint8'), (8, 3))
>>> q2 = cubekit.quantize(other_photo, palette=q)                   # reuse the palette
>>> t = cubekit.quantize(photo, k=8, seed=7, memory_limit="256K")     # in tiles: the same image
>>> bool((t.image == q.image).all()), t.tiled["tiles"] > 1
(True, True)
""")
_runtime.with_tile_keywords(quantize)
