"""The detectors on Dask arrays (cubekit.dask re-exports them): the pixel detectors chunk by chunk
(no halo), and the multi-resolution search from every chunk's block sums."""
from __future__ import annotations

import json

import numpy as np

from . import _classical, _cubekit, _detect, _runtime



def _pixelwise(cube, function, dtype, outputs=None):
    """function over the chunks of an (H, W, B) array (no halo: a pixel's result is its own), returning
    (H, W) of `dtype`, or (H, W, outputs) when `outputs` is a count."""
    da = _runtime.dask_array()
    a = da.asarray(cube)
    if a.ndim != 3:
        raise ValueError(f"cube has {a.ndim} dimensions; expected (H, W, B)")
    if a.numblocks[2] != 1:
        a = a.rechunk({2: -1})  # every pixel's spectrum whole in one chunk
    if outputs is None:
        meta = da.utils.meta_from_array(a, ndim=2, dtype=dtype)
        return a.map_blocks(function, drop_axis=2, dtype=dtype, meta=meta)
    meta = da.utils.meta_from_array(a, ndim=3, dtype=dtype)
    return a.map_blocks(function, chunks=a.chunks[:2] + ((outputs,),), dtype=dtype, meta=meta)


def rbfn_scores(cube, models, **keywords):
    """cubekit.rbfn_scores over the chunks of a dask array (no halo): (H, W) float32 for one model,
    (H, W, K) for a list of K; equal to the whole-array call bit for bit on the same backend."""
    if "out" in keywords:
        raise ValueError("cubekit.dask.rbfn_scores: 'out' cannot be given (each chunk gets its own output)")
    single = isinstance(models, (dict, str, bytes)) or hasattr(models, "__fspath__")
    listed = [models] if single else list(models)
    texts = [_detect._model_text(m, "rbfn_scores", "model")[0] for m in listed]  # read once, not per chunk
    chosen = texts[0] if single else texts
    return _pixelwise(cube, lambda block: _detect.rbfn_scores(block, chosen, **keywords), np.float32,
                      None if single else len(listed))


def _kept_f64(block, mask, kept):
    """A chunk's kept bands as float64, pixels outside the mask NaN (what the whole fit gathers)."""
    x = np.asarray(_runtime.to_host(block))[:, :, kept].astype(np.float64)
    if mask is not None:
        x[np.asarray(_runtime.to_host(mask)) == 0] = np.nan
    return np.ascontiguousarray(x)


def background_stats(cube, mask=None, ddof=0, keep_all_bands=False):
    """cubekit.background_stats of a dask array (H, W, B), computed when called: the screening from
    every chunk's per-band counts, minima and maxima, then PCA's exact integer sums of every chunk's
    kept bands (a scan fixes the scene's fixed point first), merged: the same dict as
    ``cubekit.background_stats(cube.compute(), mask, ddof=, keep_all_bands=)`` bit for bit. ``mask``
    (H, W): only its nonzero pixels are used. The global detectors of cubekit.dask fit with it when
    no background is given.

    >>> import dask.array as da, numpy as np, cubekit, cubekit.dask
    >>> x = np.random.default_rng(5).normal(size=(30, 20, 4)); x[:, :, 1] = 2.0
    >>> s = cubekit.dask.background_stats(da.from_array(x, chunks=(7, 9, 4)))
    >>> w = cubekit.background_stats(x)
    >>> s["dropped"], bool((s["covariance"] == w["covariance"]).all() and (s["mean"] == w["mean"]).all())
    ([{'band': 1, 'reason': 'constant'}], True)
    """
    da = _runtime.dask_array()
    import dask
    a = da.asarray(cube)
    if a.ndim != 3:
        raise ValueError(f"cubekit.dask.background_stats: cube has shape {a.shape}; expected (H, W, B)")
    if ddof not in (0, 1):
        raise ValueError(f"cubekit.dask.background_stats: ddof = {ddof!r}; expected 0 or 1")
    if a.numblocks[2] != 1:
        a = a.rechunk({2: -1})  # every pixel's spectrum whole in one chunk
    bands = int(a.shape[2])
    blocks = list(a.to_delayed().ravel())
    masks = [None] * len(blocks)
    if mask is not None:
        m = da.asarray(mask)
        if tuple(m.shape) != tuple(a.shape[:2]):
            raise ValueError(f"cubekit.dask.background_stats: mask has shape {m.shape}; expected {tuple(a.shape[:2])}")
        masks = list(m.rechunk(a.chunks[:2]).to_delayed().ravel())
    kept, dropped = _screening(a, keep_all_bands)
    from . import dask as cdask  # its PCA piece tasks (imported here: cubekit.dask imports this module)
    scan, sums = cdask._pca_scan, cdask._pca_sums
    scans = dask.compute(*[dask.delayed(lambda b, m: scan(_kept_f64(b, m, kept)))(b, m) for b, m in zip(blocks, masks)])
    exponent = _cubekit.pca_scene_exponent(sum(int(s[0]) for s in scans), max(float(s[1]) for s in scans))
    parts = dask.compute(*[dask.delayed(lambda b, m: sums(_kept_f64(b, m, kept), exponent))(b, m) for b, m in zip(blocks, masks)])
    return _cubekit.background_from_piece_sums(list(parts), bands, kept, dropped, int(ddof))


def _with_background(function, name, cube, target, background, keywords):
    if background is None:  # fitted over the whole array (a per-chunk fit would differ)
        background = background_stats(cube, ddof=keywords.get("ddof", 0), keep_all_bands=keywords.get("keep_all_bands", False))
    if "out" in keywords:
        raise ValueError(f"cubekit.dask.{name}: 'out' cannot be given (each chunk gets its own output)")
    stats = _classical._stats_arg(background, name)
    dtype = np.float32 if keywords.get("out_type", "f64") == "f32" else np.float64
    extra = {} if target is None else {"target": _classical._target_arg(target, name)}
    return _pixelwise(cube, lambda block: function(block, background=stats, **extra, **keywords), dtype)


def _screening(a, keep_all_bands):
    """The bands cubekit's screening keeps and drops (with its reasons, in band order), decided over the
    whole dask array (H, W, B) as the whole-array call decides it: a chunk screened on its own could keep
    other bands. One pass of exact reductions (counts, min, max)."""
    import dask
    da = _runtime.dask_array()
    bands = int(a.shape[2])
    if keep_all_bands:
        return list(range(bands)), []
    bad, lo, hi = dask.compute((~da.isfinite(a)).sum(axis=(0, 1)), a.min(axis=(0, 1)), a.max(axis=(0, 1)))
    bad, lo, hi = (np.asarray(_runtime.to_host(x)) for x in (bad, lo, hi))
    kept, dropped = [], []
    for b in range(bands):
        if bad[b] > 0:
            dropped.append((b, "non-finite"))
        elif lo[b] == 0 and hi[b] == 0:
            dropped.append((b, "all-zero"))
        elif lo[b] == hi[b]:
            dropped.append((b, "constant"))
        else:
            kept.append(b)
    if not kept:
        raise ValueError("every band was dropped by screening (keep_all_bands=True keeps them)")
    return kept, dropped


def _kept_bands(cube, keep_all_bands):
    """The kept bands of _screening for a dask array (H, W, B)."""
    a = _runtime.dask_array().asarray(cube)
    if a.ndim != 3:
        raise ValueError(f"cube has {a.ndim} dimensions; expected (H, W, B)")
    return _screening(a, keep_all_bands)[0]


def _local_rx(cube, window, keywords):
    """Local (two-window) RX over chunks grown by OUTER - 1 pixels: a core pixel's window, shifted only
    at the scene's borders, lies inside its chunk's grown window; the bands screened on the whole array."""
    from . import dask as cdask
    if not (isinstance(window, (tuple, list)) and len(window) == 2):
        raise ValueError(f"cubekit.dask.rx: window = {window!r}; expected (inner, outer)")
    if "out" in keywords:
        raise ValueError("cubekit.dask.rx: 'out' cannot be given (each chunk gets its own output)")
    da = _runtime.dask_array()
    kept = _kept_bands(cube, keywords.pop("keep_all_bands", False))
    a = da.asarray(cube)[:, :, kept]
    dtype = np.float32 if keywords.get("out_type", "f64") == "f32" else np.float64
    chosen = tuple(int(w) for w in window)
    return cdask._local(a, max(chosen[1] - 1, 0),
                        lambda block: _classical.rx(block, window=chosen, keep_all_bands=True, **keywords), dtype)


def rx(cube, background=None, window=None, **keywords):
    """cubekit.rx over the chunks of a dask array. Global RX (no window) takes the background statistics
    given, or fits them over the whole array when called (cubekit.dask.background_stats: a per-chunk fit
    would differ), and each chunk is scored on its own. Local RX
    (``window=(inner, outer)``) needs none: the bands are screened over the whole array, then each chunk
    is scored with OUTER - 1 pixels of overlap; equal to ``cubekit.rx(cube.compute(), window=...)``
    bit for bit on the same backend.

    >>> import dask.array as da, numpy as np, cubekit, cubekit.dask
    >>> x = np.random.default_rng(5).random((30, 26, 4))
    >>> lazy = cubekit.dask.rx(da.from_array(x, chunks=(8, 9, 4)), window=(3, 7))
    >>> bool(np.array_equal(lazy.compute(), cubekit.rx(x, window=(3, 7)), equal_nan=True))
    True
    """
    if window is not None:
        if background is not None:
            raise ValueError("cubekit.dask.rx: window (local RX) takes no background: each pixel's statistics are its window's")
        return _local_rx(cube, window, keywords)
    return _with_background(_classical.rx, "rx", cube, None, background, keywords)


def sam(cube, target, **keywords):
    """cubekit.sam (the cosine of the spectral angle to ``target``, one value per band of the cube) over
    the chunks of a dask array: the bands screened over the whole array, then each chunk scored on its
    own; equal to ``cubekit.sam(cube.compute(), target)`` bit for bit on the same backend.

    >>> import dask.array as da, numpy as np, cubekit, cubekit.dask
    >>> x = np.random.default_rng(6).random((20, 18, 5)); t = x[3, 4]
    >>> bool(np.array_equal(cubekit.dask.sam(da.from_array(x, chunks=(7, 7, 5)), t).compute(), cubekit.sam(x, t)))
    True
    """
    if "out" in keywords:
        raise ValueError("cubekit.dask.sam: 'out' cannot be given (each chunk gets its own output)")
    da = _runtime.dask_array()
    a = da.asarray(cube)
    t = _classical._target_arg(target, "sam")
    if a.ndim != 3 or len(t) != a.shape[2]:
        raise ValueError(f"cubekit.dask.sam: target has {len(t)} values for a cube of shape {a.shape}; expected one "
                         "per band (resample a spectrum file with cubekit.read_target_spectrum first)")
    kept = _kept_bands(a, keywords.pop("keep_all_bands", False))
    dtype = np.float32 if keywords.get("out_type", "f64") == "f32" else np.float64
    chosen = np.ascontiguousarray(t[kept])
    return _pixelwise(a[:, :, kept], lambda block: _classical.sam(block, chosen, keep_all_bands=True, **keywords), dtype)


def matched_filter(cube, target, background=None, **keywords):
    """cubekit.matched_filter over the chunks of a dask array, with the given background statistics or, without,
    those of cubekit.dask.background_stats (fitted over the whole array when this is called)."""
    return _with_background(_classical.matched_filter, "matched_filter", cube, target, background, keywords)


def ace(cube, target, background=None, **keywords):
    """cubekit.ace over the chunks of a dask array, with the given background statistics or, without,
    those of cubekit.dask.background_stats (fitted over the whole array when this is called)."""
    return _with_background(_classical.ace, "ace", cube, target, background, keywords)


def cem(cube, target, background=None, **keywords):
    """cubekit.cem over the chunks of a dask array, with the given background statistics or, without,
    those of cubekit.dask.background_stats (fitted over the whole array when this is called)."""
    return _with_background(_classical.cem, "cem", cube, target, background, keywords)


_COMMON = ("backend", "device", "threads")


def _block_sums_chunk(chunk, block, common):
    """A chunk's block sums (gy, gx, B, 3): the count, the sum and the sum of squares (host NumPy)."""
    ctx, _kind, _out, progress = _runtime.begin(chunk, dict(common), "detect_multires")
    sums, _skipped = _cubekit.multires_block_sums(ctx, chunk, block, progress)
    return sums


def _whole_blocks(chunks, block):
    """Chunk sizes along one axis cut at multiples of `block` (all but the last), as close to the given
    ones as that allows."""
    if all(c % block == 0 for c in chunks[:-1]):
        return chunks
    size = max(block, max(chunks) // block * block)
    total = sum(chunks)
    return tuple([size] * (total // size) + ([total % size] if total % size else []))


def detect_multires(cube, model, **keywords):
    """cubekit.detect_multires on a dask array: every chunk's block sums (spec B.3 steps 1-2; the
    chunks are cut at multiples of the model's block, rechunked when they are not, with the bands in
    one chunk), placed side by side on the client (about 24 bytes per band and block), then one
    search from them. The same windows, outcomes and counts as the whole-array call; y1 and y2 bit
    for bit when the search runs on the same backend (``backend``, ``device``, ``threads`` choose it
    for the chunks and the client alike; auto: the CPU for the client's NumPy sums).

    Returns the result dict of cubekit.detect_multires (computed, not lazy: the search needs every
    chunk's sums).

    >>> import dask.array as da, numpy as np, cubekit, cubekit.dask
    >>> def step(c):
    ...     return {"type": "mlp", "inputs": 1, "hidden": 1, "W1": [[1000.0]], "b1": [-1000.0 * c],
    ...             "w2": [1.0], "b2": 0.0, "in_min": [-1.0], "in_max": [1.0]}
    >>> model = {"type": "multires", "block": 8, "min_window": 8, "ann1": step(0.01), "ann2": step(0.4)}
    >>> img = np.zeros((128, 128), np.float32); img[48:64, 48:64] = 1
    >>> r = cubekit.dask.detect_multires(da.from_array(img, chunks=(50, 40)), model)
    >>> [(w["x0"], w["y0"], w["width"], w["height"]) for w in r["detections"]]
    [(32, 32, 32, 32)]
    """
    da = _runtime.dask_array()
    text, source, _ = _detect._model_text(model, "detect_multires")
    block = int(json.loads(_cubekit.model_json(text, source, "multires"))["block"])
    common = {k: keywords.pop(k) for k in _COMMON if k in keywords}
    progress_keyword = {"progress": keywords.pop("progress")} if "progress" in keywords else {}
    if "out" in keywords:
        raise ValueError("cubekit.dask.detect_multires: 'out' cannot be given (the result is a dict of windows)")
    a = da.asarray(cube)
    if a.ndim == 2:
        a = a[:, :, None]
    if a.ndim != 3:
        raise ValueError(f"cube has {a.ndim} dimensions; expected (H, W) or (H, W, B)")
    a = a.rechunk({0: _whole_blocks(a.chunks[0], block), 1: _whole_blocks(a.chunks[1], block), 2: -1})
    height, width, bands = (int(n) for n in a.shape)
    out_chunks = (tuple(-(-c // block) for c in a.chunks[0]), tuple(-(-c // block) for c in a.chunks[1]), (bands,), (3,))
    sums = a.map_blocks(_block_sums_chunk, block, common, chunks=out_chunks, new_axis=3, dtype=np.float64,
                        meta=np.empty((0, 0, 0, 0), np.float64)).compute()
    skipped = height * width * bands - int(sums[..., 0].sum(dtype=np.int64))  # the samples no count holds
    ctx, _kind, progress = _detect._begin_no_out(sums, dict(common, **progress_keyword), "detect_multires")
    return _cubekit.detect_multires_from_sums(ctx, sums, skipped, width, height, text, source, keywords, progress)
