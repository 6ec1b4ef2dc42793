"""The classical detectors from Python (cubekit/detect_classical.hpp): global and local RX, the matched
filter, ACE, CEM and SAM with Spectral Python's definitions, background statistics (fitted, saved,
read), target spectra files, and the scoring of a map against a target mask (ROC, AUC, blobs).
cubekit re-exports them; the shared helpers are _detect.py's."""
from __future__ import annotations

import inspect
import os

import numpy as np

from . import _cubekit, _runtime
from ._detect import _as_input, _begin_no_out, _check_keywords, _declarations, _declare, _host_mask, _shape

_CLASSICAL = _declarations(_cubekit.classical_declarations())
_RX = [d for d in _CLASSICAL if d[0] != "window"]
_TARGETED = _RX
_SAM = [d for d in _CLASSICAL if d[0] in ("keep_all_bands", "out_type")]
_MASK = [("target_mask", None, "(H, W) mask: the target is the mean spectrum of its nonzero pixels (all bands finite)",
          None)]
_STATS = [d for d in _CLASSICAL if d[0] in ("ddof", "keep_all_bands")]
_EMPTY = inspect.Parameter.empty

# ---- classical detectors --------------------------------------------------------------------------------

_FUNCTION = {"rx": "rx", "mf": "matched_filter", "ace": "ace", "cem": "cem", "sam": "sam"}


def _stats_arg(background, function):
    """A background given as background_stats()'s dict, a statistics file, or Spectral Python's
    GaussianStats (calc_stats: mean, cov with divisor N - 1, nsamples) as the dict."""
    if background is None or isinstance(background, dict):
        return background
    if isinstance(background, (str, os.PathLike)):
        return read_background_stats(background)
    if hasattr(background, "mean") and hasattr(background, "cov"):
        mean = np.asarray(background.mean, np.float64).ravel()
        n = getattr(background, "nsamples", None)
        return {"bands": mean.size, "kept_bands": np.arange(mean.size), "dropped": [],
                "samples": int(n) if n else 1, "ddof": 1 if n and n > 1 else 0, "mean": mean,
                "covariance": np.asarray(background.cov, np.float64)}
    raise TypeError(f"{function}: background is a {type(background).__name__}; expected the dict of "
                    "background_stats(), a statistics file, or Spectral Python's GaussianStats")


def _target_arg(target, function):
    if target is None:
        return None
    t = np.asarray(_runtime.to_host(target), np.float64)
    if t.ndim == 2 and t.shape[0] == 1:
        t = t[0]
    if t.ndim != 1:
        raise ValueError(f"{function}: target has shape {t.shape}; expected one spectrum (B,) "
                         "(cubekit takes one target, not a subspace)")
    return np.ascontiguousarray(t)


def _classical(detector, cube, target, background, keywords, declarations):
    function = _FUNCTION[detector]
    target_mask = keywords.pop("target_mask", None) if detector != "rx" else None
    tiles = _runtime.pop_tile_keywords(keywords)
    if tiles or _runtime.is_path(cube):  # in tiles: a NumPy array or a file read by windows
        ctx, progress, out = _runtime.begin_tiled(cube, keywords, tiles, function, takes_out=True)
        _check_keywords(keywords, declarations, function, ["window"] if detector == "rx" else [])
        if target_mask is not None:
            target_mask = _host_mask(target_mask)
        scores, _info = _cubekit.classical_tiled(ctx, _runtime.fspath_or(cube), detector, _target_arg(target, function),
                                                 target_mask, _stats_arg(background, function), keywords, tiles, progress,
                                                 out)
        return scores
    ctx, kind, out, progress = _runtime.begin(cube, keywords, function)
    _check_keywords(keywords, declarations, function, ["window"] if detector == "rx" else [])
    cube = _as_input(cube, kind)
    if out is None and kind != "numpy":
        h, w, _b = _shape(cube, function, "cube")
        try:
            dtype = _runtime.numpy_dtype(keywords.get("out_type") or "f64")
        except TypeError:
            dtype = None  # the compiled call names out_type
        out = _runtime.new_output(kind, cube, (h, w), dtype)
    if target_mask is not None and kind == "numpy":
        target_mask = _host_mask(target_mask)
    scores, _info = _cubekit.classical(ctx, cube, out, detector, _target_arg(target, function), target_mask,
                                       _stats_arg(background, function), keywords, progress)
    return scores


def rx(cube, background=None, window=None, **keywords):
    if window is not None:
        keywords["window"] = window
    return _classical("rx", cube, None, background, keywords, _RX)


def matched_filter(cube, target=None, background=None, **keywords):
    return _classical("mf", cube, target, background, keywords, _TARGETED)


def ace(cube, target=None, background=None, **keywords):
    return _classical("ace", cube, target, background, keywords, _TARGETED)


def cem(cube, target=None, background=None, **keywords):
    return _classical("cem", cube, target, background, keywords, _TARGETED)


def sam(cube, target=None, **keywords):
    return _classical("sam", cube, target, None, keywords, _SAM)


def background_stats(cube, mask=None, memory_limit=None, **keywords):
    ctx, kind, progress = _begin_no_out(cube, keywords, "background_stats")
    _check_keywords(keywords, _STATS, "background_stats")
    path = _runtime.is_path(cube)
    if memory_limit is not None and not path:
        raise ValueError("background_stats: memory_limit is for a cube file (a path), read a strip of rows at a time")
    cube = os.fspath(cube) if path else _as_input(cube, kind)
    if mask is not None and kind == "numpy":
        mask = _host_mask(mask)
    return _cubekit.background_stats(ctx, cube, mask, keywords, progress, memory_limit)


def read_background_stats(path):
    return _cubekit.read_background_stats(os.fspath(path))


def write_background_stats(stats, path):
    stats = _stats_arg(stats, "write_background_stats")
    _cubekit.write_background_stats(stats, os.fspath(path))


def read_target_spectrum(path, wavelengths=None, bands=None):
    wl = [] if wavelengths is None else [float(w) for w in np.asarray(wavelengths, np.float64).ravel()]
    if bands is None:
        bands = len(wl)
    if isinstance(bands, bool) or not isinstance(bands, (int, np.integer)) or bands < 1:
        raise ValueError(f"read_target_spectrum: bands = {bands!r}; expected the cube's band count (or wavelengths=)")
    return _cubekit.read_target_spectrum(os.fspath(path), wl, int(bands))


def detect_score(scores, mask, far=0.01, **keywords):
    backend, device, threads, _out, _progress = _runtime.split_common(keywords, out=False)
    _check_keywords(keywords, [], "detect_score")
    if isinstance(far, bool) or not isinstance(far, (int, float, np.integer, np.floating)):
        raise ValueError(f"detect_score: far = {far!r}; expected a number in 0..1")
    s, m = _runtime.to_host(scores), _host_mask(_runtime.to_host(mask))  # host work, as the CLI's
    if s.dtype.kind in "iu" and s.dtype.itemsize == 8:
        s = s.astype(np.float64)
    if s.ndim == 1 or m.ndim == 1:
        raise ValueError("detect_score: scores and mask must be images (H, W)")
    ctx, _kind = _runtime.context(s, backend or "cpu", device, threads)
    d = _cubekit.detect_score(ctx, s, m, float(far))
    roc = d.pop("roc")
    d["roc"] = {"threshold": roc[:, 0].copy(), "far": roc[:, 1].copy(), "pd": roc[:, 2].copy()}
    return d


def roc_auc(scores, mask, **keywords):
    return detect_score(scores, mask, **keywords)["auc"]


_CLASSICAL_NOTE = """
Statistics in float64 over the pixels whose kept bands are all finite: the mean and the covariance
with divisor N (ddof=1: N - 1, Spectral Python's np.cov), inverted by a pseudo-inverse (no
regularisation unless ``loading``). Bands that are non-finite, all-zero or constant are dropped
(``background_stats`` reports them) unless keep_all_bands. Pixels with a non-finite kept band
score NaN. CPU and CUDA scores agree within 1e-6 relative.

``background``: None (fitted on the cube), the dict of ``background_stats`` (of this or another
scene or tile), a statistics file (.json/.npz), or Spectral Python's GaussianStats (``calc_stats``:
its covariance has divisor N - 1).

In tiles: ``cube`` may be the path of a cube file (ENVI, .npy, GeoTIFF: read by windows, never whole;
the screening, the statistics and a ``target_mask`` spectrum a strip of rows at a time), and
``memory_limit``/``device_memory_limit`` (bytes or "512M"), ``devices`` (CUDA devices to deal the
tiles to) or ``tile_size`` run a NumPy cube or a file in tiles (local RX with a halo of outer - 1):
the same scores as the whole call, as a new NumPy array or in ``out`` (a writeable host NumPy array,
e.g. a ``numpy.memmap``, filled in place)."""

_TARGET_PARAMS = """

Parameters
----------
cube : array (H, W) or (H, W, B); NumPy, CuPy or PyTorch CUDA, any dtype cubekit reads
target : (B,) spectrum over all the cube's bands; or None with target_mask= (H, W): the target
    is then the mean spectrum of the mask's nonzero pixels
background : see above

Returns
-------
(H, W) float64 scores (float32 with out_type='f32') of the input's kind; ``out=`` if given."""

_declare(rx, [("cube", _EMPTY), ("background", None), ("window", None)], _RX, """
RX anomaly detector (Spectral Python's ``rx``, ``cubekit detect rx``): y = (x - mu)' Sigma^+ (x - mu).
With ``window=(inner, outer)`` (odd sizes): local RX, mu and Sigma of the outer x outer window
without the inner guard window, both shifted at the borders as SPy does (Cholesky per pixel; a
singular window scores NaN).
""" + _CLASSICAL_NOTE + """

Parameters
----------
cube : array (H, W) or (H, W, B); NumPy, CuPy or PyTorch CUDA, any dtype cubekit reads
background : see above (global RX only)
window : None (global) or (inner, outer)

Returns
-------
(H, W) float64 scores (float32 with out_type='f32') of the input's kind; ``out=`` if given.

Example
-------
>>> import numpy as np, cubekit
>>> cube = np.random.default_rng(0).normal(size=(40, 40, 5)); cube[20, 20] += 6
>>> y = cubekit.rx(cube)
>>> tuple(map(int, np.unravel_index(np.argmax(y), y.shape))), bool(abs(y.mean() - 5) < 1e-9)
((20, 20), True)
>>> cubekit.rx(cube, window=(3, 11)).shape
(40, 40)
>>> bool((cubekit.rx(cube, memory_limit="8K") == y).all())   # in tiles within 8 KiB
True
""")

_declare(matched_filter, [("cube", _EMPTY), ("target", None), ("background", None)], _MASK + _TARGETED, """
Matched filter (Spectral Python's ``matched_filter``, ``cubekit detect mf``):
y = (t - mu)' Sigma^+ (x - mu) / (t - mu)' Sigma^+ (t - mu): 0 on the background mean, 1 on t.
""" + _CLASSICAL_NOTE + _TARGET_PARAMS + """

Example
-------
>>> import numpy as np, cubekit
>>> cube = np.random.default_rng(1).normal(size=(30, 30, 4)); t = np.array([3.0, -2, 1, 0.5])
>>> cube[5, 7] = t
>>> y = cubekit.matched_filter(cube, t)
>>> round(float(y[5, 7]), 12), tuple(map(int, np.unravel_index(np.argmax(y), y.shape)))
(1.0, (5, 7))
""")

_declare(ace, [("cube", _EMPTY), ("target", None), ("background", None)], _MASK + _TARGETED, """
Adaptive coherence estimator (Spectral Python's ``ace`` with one target, ``cubekit detect ace``):
y = ((t - mu)' S^+ (x - mu))^2 / ((t - mu)' S^+ (t - mu) * (x - mu)' S^+ (x - mu)), in [0, 1].
""" + _CLASSICAL_NOTE + _TARGET_PARAMS + """

Example
-------
>>> import numpy as np, cubekit
>>> cube = np.random.default_rng(1).normal(size=(30, 30, 4)); t = np.array([3.0, -2, 1, 0.5])
>>> cube[5, 7] = t
>>> y = cubekit.ace(cube, t)
>>> tuple(map(int, np.unravel_index(np.argmax(y), y.shape))), bool(0 <= y.min() and y.max() <= 1)
((5, 7), True)
""")

_declare(cem, [("cube", _EMPTY), ("target", None), ("background", None)], _MASK + _TARGETED, """
Constrained energy minimisation (``cubekit detect cem``): y = w'x with w = R^+ t / (t' R^+ t), R the
correlation matrix (1/N) sum x x' (from the background statistics: R = Sigma (N - ddof)/N + mu mu').
A pixel equal to t scores 1.
""" + _CLASSICAL_NOTE + _TARGET_PARAMS + """

Example
-------
>>> import numpy as np, cubekit
>>> cube = np.random.default_rng(1).normal(size=(30, 30, 4)) + 5; t = np.array([9.0, 2, 6, 5])
>>> cube[5, 7] = t
>>> round(float(cubekit.cem(cube, t)[5, 7]), 12)
1.0
""")

_declare(sam, [("cube", _EMPTY), ("target", None)], _MASK + _SAM, """
Spectral angle to a target, as its cosine (``cubekit detect sam``): y = t'x / (|t| |x|), higher =
more target-like (1 = the same direction; 0 for a zero pixel). Over the kept bands (all-zero,
constant and non-finite bands dropped unless keep_all_bands).
""" + _TARGET_PARAMS + """

Example
-------
>>> import numpy as np, cubekit
>>> cube = np.random.default_rng(1).uniform(1, 2, size=(10, 10, 3)); t = np.array([1.0, 2, 3])
>>> cube[4, 4] = 2 * t
>>> round(float(cubekit.sam(cube, t)[4, 4]), 12)
1.0
""")

_declare(background_stats, [("cube", _EMPTY), ("mask", None), ("memory_limit", None)], _STATS, """
The background statistics of the classical detectors (like Spectral Python's ``calc_stats``, but
with divisor N by default, band screening and the eigendecomposition kept), separate from the apply
step so that tiles and other scenes reuse them: ``rx(tile, background=stats)``. ``mask`` (H, W):
only its nonzero pixels are used. ``cube`` may be the path of a cube file (ENVI, .npy, GeoTIFF),
read a strip of rows at a time within ``memory_limit`` bytes (or "512M"; None = 256 MiB), so that a
scene larger than memory never has to fit: the statistics equal the CPU's of the whole cube bit for
bit, on any backend.

Returns
-------
dict with the statistics file's names: ``bands`` (of the cube), ``kept_bands`` (int64 indices),
``dropped`` (a list of {"band", "reason"}: "non-finite", "all-zero", "constant"), ``samples`` (N),
``ddof``, ``mean`` (K,), ``covariance`` (K, K), ``eigenvalues`` (K,, descending) and
``eigenvectors`` (K, K, row i for eigenvalue i). ``write_background_stats`` saves it.

Example
-------
>>> import numpy as np, cubekit
>>> cube = np.random.default_rng(2).normal(size=(20, 20, 4)); cube[:, :, 2] = 0
>>> s = cubekit.background_stats(cube)
>>> s["kept_bands"].tolist(), s["dropped"], s["samples"], s["covariance"].shape
([0, 1, 3], [{'band': 2, 'reason': 'all-zero'}], 400, (3, 3))
""", out=False)

_declare(read_background_stats, [("path", _EMPTY)], [], """
Background statistics saved by ``write_background_stats`` or ``cubekit detect ... --stats-out``
(.json or .npz) as the dict of ``background_stats``.
""", common=False)

_declare(write_background_stats, [("stats", _EMPTY), ("path", _EMPTY)], [], """
Saves background statistics (the dict of ``background_stats``) as .json or .npz, the files that
``cubekit detect ... --stats-in`` reads.

Example
-------
>>> import numpy as np, cubekit, os, tempfile
>>> cube = np.random.default_rng(3).normal(size=(16, 16, 3))
>>> path = os.path.join(tempfile.mkdtemp(), "bg.npz")
>>> cubekit.write_background_stats(cubekit.background_stats(cube), path)
>>> bool(np.array_equal(cubekit.rx(cube, background=path), cubekit.rx(cube)))
True
""", common=False)

_declare(read_target_spectrum, [("path", _EMPTY), ("wavelengths", None), ("bands", None)], [], """
A target spectrum file, as ``cubekit detect mf|ace|cem|sam --target FILE`` reads it: CSV
("wavelength,value" rows, or one value per row) or JSON ({"wavelengths": [...], "values": [...]},
{"<wavelength>": value, ...} or [v0, v1, ...]). Pairs are resampled to ``wavelengths`` (the cube's,
e.g. ``cubekit.read(path)[1]["wavelengths"]``) by linear interpolation; a plain list must have
``bands`` values (default: len(wavelengths)).

Returns
-------
(B,) float64 NumPy spectrum, for ``matched_filter(cube, target)`` and the others.

Example
-------
>>> import cubekit, os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "t.json")
>>> with open(path, "w") as f:
...     _ = f.write('{"wavelengths": [400, 500, 600], "values": [0.1, 0.3, 0.5]}')
>>> cubekit.read_target_spectrum(path, wavelengths=[450, 500, 575]).tolist()
[0.2, 0.3, 0.45]
""", common=False)

_declare(detect_score, [("scores", _EMPTY), ("mask", _EMPTY), ("far", 0.01)], [], """
ROC, AUC and per-blob detection of a score map against a target mask, as ``cubekit detect-score``.
AUC: the Mann-Whitney statistic (ties count one half; NaN scores are the lowest). At false-alarm
rate ``far`` the threshold is the (floor(far * F) + 1)-th highest background score, detected =
score > threshold; a blob (8-connected component of the mask) is found when one of its pixels is.

Returns
-------
dict with the CLI's names: auc, blobs, blobs_found, far (achieved), far_requested, threshold, pd,
target_pixels, background_pixels, nan_scores, blob_list (dicts: label, area, box (x0, y0, x1, y1)
inclusive, peak, found), and ``roc`` ({"threshold", "far", "pd"} arrays, descending thresholds).

Example
-------
>>> import numpy as np, cubekit
>>> mask = np.zeros((8, 8), np.uint8); mask[2:4, 2:4] = 1; mask[6, 6] = 1
>>> scores = mask * 2.0; scores[6, 6] = 0.5; scores[0, 0] = 1.0
>>> r = cubekit.detect_score(scores, mask, far=0.0)
>>> r["auc"], r["blobs"], r["blobs_found"]
(0.9966101694915255, 2, 1)
""", out=False)

_declare(roc_auc, [("scores", _EMPTY), ("mask", _EMPTY)], [], """
The ROC AUC of a score map against a target mask (nonzero = target): ``detect_score(...)["auc"]``.

Example
-------
>>> import numpy as np, cubekit
>>> cubekit.roc_auc(np.array([[0.1, 0.9], [0.2, 0.8]]), np.array([[0, 1], [0, 1]]))
1.0
""", out=False)

for _function in (rx, matched_filter, ace, cem, sam):
    _runtime.with_tile_keywords(_function)
