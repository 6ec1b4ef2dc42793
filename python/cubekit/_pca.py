"""Principal component analysis of a cube (spec: edges.md §3.9 "E5"): pixels are samples, bands
are variables. ``pca`` is ``cubekit pca``: the same model and scores, bit for bit (exact integer
sums, one shared eigensolve, float64 projection), on CPU and GPU."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _cubekit, _runtime
from ._kmeans import _as_input, _shape


@dataclass(eq=False, repr=False)
class PCAResult:
    """What ``pca`` gives; fields are named as ``cubekit pca``'s model file (<OUT>.pca.json).

    scores : (H, W, K) float64 of the input's kind: component j of each pixel, NaN where a band
        is not finite.
    mean : (B,) NumPy; eigenvalues : (B,) all of them, descending (the explained variances);
    explained_variance_ratio : (K,); components : (K, B), row j the unit eigenvector of PC j+1
        (signed so that its entries sum to >= 0); covariance : (B, B). All NumPy float64.
    samples : pixels used (all bands finite); parameters : components (used) and
        components_requested, as in the CLI's JSON.
    tiled : the tiled path (tile keywords or a file path): the CLI's JSON "tiled" ("tiles", "passes",
        "peak_bytes", ...); else None.
    """
    scores: object
    mean: np.ndarray
    eigenvalues: np.ndarray
    explained_variance_ratio: np.ndarray
    components: np.ndarray
    covariance: np.ndarray
    bands: int
    samples: int
    num_components: int
    parameters: dict
    tiled: dict | None = None

    def __repr__(self):
        ratio = [round(float(r), 4) for r in self.explained_variance_ratio]
        return (f"PCAResult(bands={self.bands}, samples={self.samples}, num_components={self.num_components}, "
                f"explained_variance_ratio={ratio}, ...)")

    def transform(self, cube, **keywords):
        """``pca_transform(cube, self, **keywords)``: the scores of another cube under this model."""
        return pca_transform(cube, self, **keywords)


def _components(keywords, bands: int):
    """K as the compiled call will use it (clamped to the bands), or None when the keyword is not
    an integer (the compiled call then raises, naming it)."""
    k = keywords.get("components")
    if k is None:
        k = _DEFAULTS["components"]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        return None
    return min(int(k), bands)


def pca(cube, **keywords):
    tiles = _runtime.pop_tile_keywords(keywords)
    if tiles or _runtime.is_path(cube):
        ctx, progress = _runtime.begin_tiled(cube, keywords, tiles, "pca")
        scores, d, run = _cubekit.pca_tiled(ctx, _runtime.fspath_or(cube), keywords, tiles, progress)
        return PCAResult(scores=scores, **d, tiled=run)
    return _pca(cube, keywords)


def _pca(cube, keywords):
    ctx, kind, out, progress = _runtime.begin(cube, keywords, "pca")
    cube = _as_input(cube, kind)
    h, w, b = _shape(cube, "pca", "cube")
    if out is None:
        k = _components(keywords, b)
        out = _runtime.new_output(kind, cube, (h, w, k), "float64") if k else None
    d = _cubekit.pca(ctx, cube, out, keywords, progress)
    return PCAResult(scores=out, **d)


def pca_transform(cube, model, **keywords):
    return _pca_transform(cube, model, keywords)


def _pca_transform(cube, model, keywords):
    backend, device, threads, out, progress = _runtime.split_common(keywords)
    if keywords:
        raise TypeError(f"pca_transform() got an unexpected keyword argument '{next(iter(keywords))}'; "
                        "its options are backend, device, threads, out, progress")
    if not isinstance(model, PCAResult):
        raise TypeError(f"pca_transform: model is a {type(model).__name__}; expected the PCAResult of cubekit.pca")
    ctx, kind = _runtime.context(cube, backend, device, threads)
    _runtime.check_out_kind(out, kind, "pca_transform")
    cube = _as_input(cube, kind)
    h, w, b = _shape(cube, "pca_transform", "cube")
    if b != model.bands:
        raise ValueError(f"pca_transform: cube has {b} bands; the model was fitted on {model.bands}")
    if out is None:
        out = _runtime.new_output(kind, cube, (h, w, model.num_components), "float64")
    _cubekit.pca_transform(ctx, cube, out, np.ascontiguousarray(model.mean, np.float64),
                           np.ascontiguousarray(model.components, np.float64), progress)
    return out


_DECLARATIONS = _cubekit.pca_declarations()
_DEFAULTS = {name: default for name, default, _doc, _choices in _DECLARATIONS}

_runtime.declare(pca, ["cube"], _DECLARATIONS, """
Principal components of an image or cube, as ``cubekit pca``: covariance of the bands over the
pixels whose bands are all finite (exact sums), eigenvalues descending, and the scores of every
pixel. CPU and CUDA results are bit-identical. ``components`` beyond the bands is clamped to the
bands, as the CLI does (parameters["components_requested"] keeps what was asked).

Parameters
----------
cube : array (H, W) or (H, W, B), or a file path
    NumPy, CuPy or PyTorch CUDA; bool, (u)int8/16/32, float16/32/64; any strides.
    A path (ENVI, .npy, GeoTIFF: read by windows; other formats whole) is computed in tiles.
memory_limit, device_memory_limit : int or str, optional
    Host working-memory and per-GPU budgets in bytes ("512M", "2G"): the exact sums are gathered
    over tiles that fit them, then the scores computed in tiles, bit-identical to the whole call
    (NumPy or path input; ``.tiled`` reports the tiles and passes).
devices : list of int, optional
    CUDA devices to deal the tiles to (implies backend='cuda').
tile_size : (int, int), optional
    Force tiles of (width, height) pixels (testing).

Returns
-------
PCAResult: .scores (H, W, K) float64 of the input's kind (out= if given); .mean, .eigenvalues,
.explained_variance_ratio, .components (K, B), .covariance as NumPy; .samples, .bands.

Example
-------
>>> import cubekit
>>> cube, meta = cubekit.read(cubekit.data_path("samson"))      # (95, 95, 156) int16
>>> r = cubekit.pca(cube, components=3)
>>> r.scores.shape, r.components.shape
((95, 95, 3), (3, 156))
>>> scores2 = r.transform(other_cube)                            # the same model on another cube
>>> t = cubekit.pca(cube, components=3, memory_limit="64K")     # in tiles, the same bits
>>> bool((t.scores == r.scores).all()), t.tiled["passes"]
(True, 2)
""")
_runtime.with_tile_keywords(pca)

_runtime.declare(pca_transform, ["cube", "model"], [], """
The scores of ``cube`` under a fitted model (the PCAResult of ``pca``): (H, W, K) float64,
(x - mean) . v_j in float64 as ``pca`` computes them, NaN where a band is not finite.

Example
-------
>>> model = cubekit.pca(scene1, components=4)
>>> s = cubekit.pca_transform(scene2, model)     # (H, W, 4), of scene2's kind
""")
