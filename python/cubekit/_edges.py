"""Entropy-threshold edges with fusions and noise removal, the classical baselines and the edge
scores (spec: edges.md; the CLI's ``edges``, ``edges-baseline`` and ``edges-score``).

Result objects are plain dataclasses (they pickle): array fields are arrays of the input's kind,
scalar fields and per-band tables use the keys of the CLI's ``--json`` output and thresholds file.
"""
from __future__ import annotations

import inspect
import os
from dataclasses import dataclass, field

import numpy as np

from . import _cubekit, _runtime


def _numel(a) -> int:
    return int(np.prod(tuple(a.shape), dtype=np.int64))


def _edge_pixels(a) -> int:
    return int((a != 0).sum())


def _per_band_edge_pixels(edges) -> list[int]:
    """Edge pixels of every band of an (H, W) or (H, W, B) map (NumPy, CuPy or torch)."""
    if len(edges.shape) == 2:
        return [_edge_pixels(edges)]
    return [int(v) for v in (edges != 0).reshape(-1, edges.shape[2]).sum(0).tolist()]


def _bool_keyword(keywords: dict, name: str, function: str) -> bool:
    v = keywords.pop(name, False)
    if not isinstance(v, (bool, np.bool_)):
        raise ValueError(f"{function}: {name} = {v!r}; expected True or False")
    return bool(v)


# ---- entropy edges -------------------------------------------------------------------------------

@dataclass
class EdgesResult:
    """What :func:`entropy_edges` returns.

    edges : (H, W) uint8 0/1 (a fusion), or the input's shape with fusion='none' (one map per band).
    thresholds : per input band, ``{"band", "t1", "t2", "t3", "levels", "constant"}`` (a list of dicts,
        on the host): the "bands" list of the CLI's ``--thresholds-out`` file.
    derived_thresholds : the file's other keys (``"band_mean"``, ``"threshold_mean"``, ``"pca"``,
        ``"pca_mean"``), each a list of such dicts; empty for fusion='none' and the band votes.
    parameters : the options as run (the CLI's JSON "parameters"; fusion resolved from 'auto').
    vote_count : vote fusions: (H, W) uint16 votes per pixel (the CLI's --vote-count-out .npy); else None.
    band_edges : keep_band_edges with a vote fusion: (H, W, K) uint8, the K maps voted (bands or
        PCA components); else None.
    binary : keep_binary: (H, W, K) uint8, the binary images f that E2 ran on; else None.
    votes_needed : vote fusions: the smallest count that sets a pixel; else None.
    pca_components_used, explained_variance_ratio : PCA fusions; else None.
    tiled : the tiled path (tile keywords or a file path): the CLI's JSON "tiled" ({"tiles",
        "tile_width", "tile_height", "peak_bytes", "device_peak_bytes", "devices", "passes", ...}); else None.
    edge_pixels, edge_fraction : properties, as the CLI's JSON.
    """
    edges: object
    thresholds: list
    derived_thresholds: dict
    parameters: dict
    vote_count: object = None
    band_edges: object = None
    binary: object = None
    votes_needed: int | None = None
    pca_components_used: int | None = None
    explained_variance_ratio: list | None = None
    tiled: dict | None = None

    @property
    def edge_pixels(self) -> int:
        return _edge_pixels(self.edges)

    @property
    def edge_fraction(self) -> float:
        n = _numel(self.edges)
        return self.edge_pixels / n if n else 0.0

    def thresholds_file(self) -> dict:
        """The content of the CLI's ``--thresholds-out`` JSON file."""
        return {"bands": self.thresholds, **self.derived_thresholds}


def entropy_edges(cube, **keywords):
    tiles = _runtime.pop_tile_keywords(keywords)
    if tiles or _runtime.is_path(cube):
        return _entropy_edges_tiled(cube, keywords, tiles)
    return _entropy_edges(cube, keywords)


def _entropy_edges_tiled(cube, keywords, tiles):
    """The tiled path: a NumPy array or a file path (ENVI/.npy/GeoTIFF read by windows); NumPy out."""
    for name in ("keep_band_edges", "keep_binary"):
        if _bool_keyword(keywords, name, "entropy_edges"):
            raise ValueError(f"entropy_edges: {name} needs every band's whole map, which the tiled path (tile keywords "
                             "or a file path) does not hold")
    ctx, progress = _runtime.begin_tiled(cube, keywords, tiles, "entropy_edges")
    path = _runtime.is_path(cube)
    edges, s, run = _cubekit.entropy_edges_tiled(ctx, os.fspath(cube) if path else cube, keywords, tiles, progress)
    return EdgesResult(edges=edges, thresholds=s["thresholds"], derived_thresholds=s["derived_thresholds"],
                       parameters=s["parameters"], votes_needed=s.get("votes_needed"), tiled=run)


def _edge_outputs(cube, kind, out, keywords, keep_band_edges, keep_binary):
    """The output arrays of the into call, of the input's kind: out (or a new edges array), and the
    extras that this fusion produces and the caller asked for (the vote count always)."""
    shape = tuple(cube.shape)
    bands = shape[2] if len(shape) == 3 else 1
    n = _cubekit.entropy_edges_bands(bands, keywords)
    h, w = shape[:2]

    def new(count, dtype, squeeze):
        return _runtime.new_output(kind, cube, (h, w) if squeeze and count == 1 else (h, w, count), dtype)
    if out is None:  # fusion none keeps the input's shape, a fused map is (H, W)
        out = new(n["edges"], "uint8", n["fusion"] != "none" or len(shape) == 2)
    band_edges = new(n["band_edges"], "uint8", False) if keep_band_edges and n["band_edges"] else None
    binary = new(n["binary"], "uint8", False) if keep_binary and n["binary"] else None
    vote_count = new(n["vote_count"], "uint16", True) if n["vote_count"] else None
    return out, band_edges, binary, vote_count


def _entropy_edges(cube, keywords):
    keep_band_edges = _bool_keyword(keywords, "keep_band_edges", "entropy_edges")
    keep_binary = _bool_keyword(keywords, "keep_binary", "entropy_edges")
    ctx, kind, out, progress = _runtime.begin(cube, keywords, "entropy_edges")
    outs = (None, None, None, None)
    if (out is not None or kind != "numpy") and len(getattr(cube, "shape", ())) in (2, 3):
        outs = _edge_outputs(cube, kind, out, keywords, keep_band_edges, keep_binary)
    edges, band_edges, binary, vote_count, s = _cubekit.entropy_edges(ctx, cube, *outs, keywords, keep_band_edges,
                                                                      keep_binary, progress)
    return EdgesResult(edges=edges, thresholds=s["thresholds"], derived_thresholds=s["derived_thresholds"],
                       parameters=s["parameters"], vote_count=vote_count, band_edges=band_edges, binary=binary,
                       votes_needed=s.get("votes_needed"), pca_components_used=s.get("pca_components_used"),
                       explained_variance_ratio=s.get("explained_variance_ratio"))


# ---- pieces of a scene (cubekit.dask.entropy_edges): each chunk on its own kind of array -----------

def _piece_ranges(piece, **common):
    """(lo, hi): the finite range of every band of one piece (NumPy or CuPy)."""
    ctx, _kind, _out, progress = _runtime.begin(piece, dict(common), "entropy_edges")
    return _cubekit.entropy_piece_ranges(ctx, piece, progress)


def _piece_histograms(piece, lo, hi, with_mean, **common):
    """(B [+1], 256) uint32 histograms of one piece quantised with the scene's ranges (host)."""
    ctx, _kind, _out, progress = _runtime.begin(piece, dict(common), "entropy_edges")
    return _cubekit.entropy_piece_histograms(ctx, piece, list(lo), list(hi), with_mean, progress)


def _edges_piece(piece, scene, **keywords):
    """The edge map of one piece with the scene's statistics, of the piece's kind: (H, W) uint8, or
    (H, W, B) with fusion 'none' on a 3-D piece."""
    ctx, kind, _out, progress = _runtime.begin(piece, keywords, "entropy_edges")
    shape = tuple(piece.shape)
    bands = shape[2] if len(shape) == 3 else 1
    n = _cubekit.entropy_edges_bands(bands, keywords)
    fused = n["fusion"] != "none" or len(shape) == 2
    out = _runtime.new_output(kind, piece, shape[:2] if fused else (shape[0], shape[1], n["edges"]), "uint8")
    return _cubekit.entropy_edges_piece(ctx, piece, out, keywords, scene, progress)


def entropy_band_thresholds(cube, **keywords):
    backend, device, threads, _out, progress = _runtime.split_common(keywords, out=False)
    ctx, _kind = _runtime.context(cube, backend, device, threads)
    return _cubekit.entropy_band_thresholds(ctx, cube, keywords, progress)


def quantize_to_u8(cube, **keywords):
    ctx, kind, out, progress = _runtime.begin(cube, keywords, "quantize_to_u8")
    if out is None and kind != "numpy":
        out = _runtime.empty(kind, cube, tuple(cube.shape), "uint8")
    return _cubekit.quantize_to_u8(ctx, cube, out, keywords, progress)


_EDGE_DECLARATIONS = _cubekit.entropy_edges_declarations()

_runtime.declare(entropy_edges, ["cube"], _EDGE_DECLARATIONS, """
Entropy-threshold edge detection (the CLI's ``cubekit edges``): every band is quantised to 0..255,
cut by its Shannon threshold T1 and Tsallis thresholds T2, T3 into a binary image f, and a pixel is
an edge when at most 6 of its 3x3 window share its f (borders are never edges). Edge components
smaller than ``min_component`` are removed; several bands are fused into one map (default: a vote
over the per-band edge maps).

Parameters
----------
cube : array (H, W) or (H, W, B), or a file path
    NumPy, CuPy or PyTorch CUDA; bool, (u)int8/16/32, float16/32/64; any strides.
    A path (ENVI, .npy, GeoTIFF: read by windows; other formats whole) is computed in tiles.
memory_limit, device_memory_limit : int or str, optional
    Host working-memory and per-GPU budgets in bytes ("512M", "2G"): the scene's ranges and
    histograms are gathered over tiles that fit them, then the maps computed with a 1-pixel halo,
    bit-identical to the whole call (NumPy or path input; not the PCA fusions, keep_band_edges,
    keep_binary or the vote count).
devices : list of int, optional
    CUDA devices to deal the tiles to (implies backend='cuda').
tile_size : (int, int), optional
    Force tiles of (width, height) pixels (testing).

Returns
-------
EdgesResult: ``.edges`` (H, W) uint8 0/1 of the input's kind ((H, W, B) with fusion='none');
``.vote_count`` (H, W) uint16 for the vote fusions; ``.band_edges`` / ``.binary`` (H, W, K) uint8
when asked for; ``.thresholds`` (per band, list of dicts, host), ``.derived_thresholds``,
``.votes_needed``, ``.pca_components_used``, ``.explained_variance_ratio``, ``.parameters``,
``.edge_pixels``, ``.edge_fraction`` as the CLI's JSON. CPU and CUDA give identical results.
``out`` (optional) receives the edge map.

Example
-------
>>> import cubekit
>>> cube, _ = cubekit.read(cubekit.data_path("samson"))
>>> r = cubekit.entropy_edges(cube, min_component=5)           # vote over the 156 band maps
>>> r.edges.shape, r.parameters["fusion"], r.thresholds[0]["t1"]
((95, 95), 'vote-edges', 82)
>>> t = cubekit.entropy_edges(cube, min_component=5, memory_limit="64K")   # in tiles
>>> bool((t.edges == r.edges).all()), t.tiled["tiles"] > 1
(True, True)
""")
_runtime.with_tile_keywords(entropy_edges)

_THRESHOLD_DECLARATIONS = [d for d in _EDGE_DECLARATIONS if d[0] in ("q", "quantize")]

_runtime.declare(entropy_band_thresholds, ["cube"], _THRESHOLD_DECLARATIONS, """
The entropy thresholds of every band (E1 quantisation, 256-bin histograms, Shannon T1 and Tsallis
T2, T3) without the edge maps; a device cube stays on its device (only the thresholds come back).

Returns
-------
A list (host) of one dict per band: ``{"band", "t1", "t2", "t3", "levels", "constant"}``, as the
"bands" list of ``cubekit edges --thresholds-out``.

Example
-------
>>> import cubekit
>>> t = cubekit.entropy_band_thresholds(cubekit.imread(cubekit.data_path("chelsea")))
>>> [(b["t1"], b["t2"], b["t3"]) for b in t]          # red, green, blue
[(93, 44, 149), (69, 37, 130), (109, 52, 145)]
""", out=False)

_runtime.declare(quantize_to_u8, ["cube"], [d for d in _EDGE_DECLARATIONS if d[0] == "quantize"], """
E1, the quantisation the entropy edges and the baselines start from: uint8 input as it is, any
other type scaled to 0..255 by the min and max of each band (or of the cube with
quantize='global'), floor((v - min) * 255 / (max - min) + 0.5) in float64; NaN and +-Inf map to 0,
a constant band to 0.

Returns
-------
uint8 array of the input's shape and kind.

Example
-------
>>> import numpy as np, cubekit
>>> cubekit.quantize_to_u8(np.array([[0.0, 0.5], [1.0, 2.0]]))
array([[  0,  64],
       [128, 255]], dtype=uint8)
""")


# ---- baselines -----------------------------------------------------------------------------------

@dataclass
class BaselineResult:
    """What :func:`baseline_edges` returns.

    edges : uint8 0/1 of the input's shape and kind.
    thresholds : per band, the threshold cut at on MATLAB's scale (NumPy float64, host).
    low_thresholds : canny: per band, the low threshold; else None.
    parameters : the options as they apply (the CLI's JSON "parameters": sigma as run, null for the
        mask methods; low_ratio only for canny; thinning only for sobel/prewitt/roberts).
    bands, edge_pixels : properties, the CLI's JSON "bands" list and total.
    """
    edges: object
    thresholds: np.ndarray
    parameters: dict
    low_thresholds: np.ndarray | None = None

    @property
    def bands(self) -> list[dict]:
        out = []
        for b, count in enumerate(_per_band_edge_pixels(self.edges)):
            entry = {"band": b, "threshold": float(self.thresholds[b]), "edge_pixels": count}
            if self.low_thresholds is not None:
                entry["low_threshold"] = float(self.low_thresholds[b])
            out.append(entry)
        return out

    @property
    def edge_pixels(self) -> int:
        return _edge_pixels(self.edges)


def baseline_edges(image, **keywords):
    return _baseline_edges(image, keywords)


def _baseline_edges(image, keywords):
    tiles = _runtime.pop_tile_keywords(keywords)
    if tiles:  # in groups of whole bands
        ctx, progress = _runtime.begin_tiled(image, keywords, tiles, "baseline_edges")
        edges, (high, low), params, _run = _cubekit.baseline_edges_tiled(ctx, image, keywords, tiles, progress)
        return BaselineResult(edges=edges, thresholds=np.asarray(high, np.float64), parameters=params,
                              low_thresholds=np.asarray(low, np.float64) if params["method"] == "canny" else None)
    ctx, kind, out, progress = _runtime.begin(image, keywords, "baseline_edges")
    if out is None and kind != "numpy":
        out = _runtime.empty(kind, image, tuple(image.shape), "uint8")
    edges, (high, low), params = _cubekit.baseline_edges(ctx, image, out, keywords, progress)
    canny = params["method"] == "canny"
    return BaselineResult(edges=edges, thresholds=np.asarray(high, np.float64), parameters=params,
                          low_thresholds=np.asarray(low, np.float64) if canny else None)


def canny(image, **keywords):
    if "method" in keywords:
        raise TypeError("canny() got an unexpected keyword argument 'method'; use baseline_edges(method=...)")
    return _baseline_edges(image, {**keywords, "method": "canny"}).edges


_BASELINE_DECLARATIONS = _cubekit.baseline_edges_declarations()

_runtime.declare(baseline_edges, ["image"], _BASELINE_DECLARATIONS, """
The classical edge detectors the entropy edges are compared with (the CLI's ``cubekit
edges-baseline``), with MATLAB R2016 ``edge()`` defaults: every band is quantised to 8 bits (as
:func:`quantize_to_u8`), scaled to [0, 1] and processed on its own by canny (sigma sqrt(2), high
threshold at 70 % of a 64-bin histogram, low = 0.4 high, hysteresis), sobel / prewitt / roberts
(automatic cutoff and MATLAB's thinning) or log (sigma 2, zero crossings).

Parameters
----------
image : array (H, W) or (H, W, B)
    NumPy, CuPy or PyTorch CUDA; bool, (u)int8/16/32, float16/32/64; any strides.
memory_limit, device_memory_limit, devices, tile_size : optional
    Run groups of whole bands within these budgets / over these GPUs (as cubekit.rcmg; tile_size
    (1, N) = N bands a group): the same maps and thresholds. NumPy only.

Returns
-------
BaselineResult: ``.edges`` uint8 0/1 of the input's shape and kind; ``.thresholds`` and (canny)
``.low_thresholds`` per band (NumPy, host); ``.parameters``, ``.bands``, ``.edge_pixels`` as the
CLI's JSON. The CUDA backend may differ from the CPU only at pixels within 1e-5 of a threshold.

Example
-------
>>> import cubekit
>>> photo = cubekit.imread(cubekit.data_path("chelsea"))
>>> r = cubekit.baseline_edges(photo, method="sobel")
>>> r.edges.shape, r.bands[0]["threshold"] > 0
((300, 451, 3), True)
""")
_runtime.with_tile_keywords(baseline_edges)

_runtime.declare(canny, ["image"], [d for d in _BASELINE_DECLARATIONS if d[0] != "method"], """
Canny edges with MATLAB R2016 ``edge(I, 'canny')`` defaults, band by band: the ``.edges`` of
``baseline_edges(image, method='canny', ...)``. Unlike ``skimage.feature.canny`` the thresholds
are MATLAB's: ``threshold`` is the high threshold on the magnitude normalised by its maximum
(default: automatic), the low one is ``low_ratio * threshold``; the result is uint8 0/1.

Returns
-------
uint8 0/1 array of the input's shape and kind.

Example
-------
>>> import numpy as np, cubekit
>>> img = np.zeros((32, 32), np.uint8); img[8:24, 8:24] = 200
>>> e = cubekit.canny(img, sigma=1.0)
>>> int(e[16, 7] | e[16, 8]), int(e[16, 16])
(1, 0)
""")


# ---- scores --------------------------------------------------------------------------------------

@dataclass
class EdgeScore:
    """Pratt's figure of merit and precision, recall and F of a predicted map against a reference;
    ``predicted`` and ``reference`` are the edge pixel counts (the keys of ``cubekit edges-score``)."""
    fom: float
    precision: float
    recall: float
    f: float
    predicted: int
    reference: int
    tolerance: float = field(default=1.0)


def edge_score(predicted, reference, **keywords):
    s = _cubekit.edge_score(_runtime.to_host(predicted), _runtime.to_host(reference), keywords)
    return EdgeScore(**s)


_SCORE_DECLARATIONS = _cubekit.edge_score_declarations()
edge_score.__signature__ = inspect.Signature(
    [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in ("predicted", "reference")] +
    _runtime.option_parameters(_SCORE_DECLARATIONS))
edge_score.__doc__ = """Scores a predicted edge map against a reference (the CLI's ``cubekit edges-score``).

d(p) is the exact Euclidean distance from p to the nearest edge pixel of the other map:
fom = sum over predicted pixels of 1 / (1 + d^2 / 9), divided by max(#predicted, #reference);
precision = fraction of predicted pixels with d <= tolerance; recall likewise from the reference;
f = 2PR / (P + R) (0 when P + R = 0). Both maps empty: every score 1; only one: every score 0.

Parameters
----------
predicted, reference : (H, W) arrays (or (H, W, 1)) of the same size; nonzero (and not NaN) = edge.
    Any dtype and strides; device arrays are copied to the host (scores are computed on the CPU).

Returns
-------
EdgeScore with ``fom``, ``precision``, ``recall``, ``f``, ``predicted``, ``reference`` (counts) and
``tolerance``: the keys of ``cubekit edges-score``.

Example
-------
>>> import numpy as np, cubekit
>>> ref = np.zeros((20, 20), np.uint8); ref[:, 10] = 1
>>> s = cubekit.edge_score(np.roll(ref, 1, axis=1), ref, tolerance=1.0)
>>> s.precision, s.recall, round(s.fom, 3)
(1.0, 1.0, 0.9)

Options
-------
""" + _runtime.option_docs(_SCORE_DECLARATIONS) + "\n"
