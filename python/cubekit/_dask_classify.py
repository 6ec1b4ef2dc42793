"""Pixel-wise classification of dask arrays with a trained model (cubekit.dask re-exports it): each
pixel's class depends on its own spectrum only, so every chunk is predicted on its own."""
from __future__ import annotations

import numpy as np

from . import _runtime


def _predict_chunk(block, model, keywords):
    classes = model.predict(block, **keywords)
    if _runtime.array_kind(block) == "cupy":  # the chunk's own kind of array
        import cupy
        return cupy.asarray(classes)
    return classes


def predict(model, cube, **keywords):
    """The class of every pixel of a dask array (H, W, B) with a :class:`cubekit.ClassifierModel`
    (trained by cubekit.train_classifier or read by cubekit.load_classifier): a lazy (H, W) int32
    array equal to ``model.predict(cube.compute())`` exactly. The bands are rechunked into one chunk;
    the spatial chunks are predicted in parallel (NumPy or CuPy chunks; the model is pickled whole to
    each worker). Keywords: backend, device, threads (per chunk).

    >>> import dask.array as da, numpy as np, cubekit, cubekit.dask
    >>> cube = np.zeros((8, 8, 2), np.float32); cube[:, 4:] = (5, 1); cube[:, :4] = (1, 5)
    >>> train = np.zeros((8, 8), np.int32); train[0, 0] = 3; train[0, 7] = 7
    >>> m = cubekit.train_classifier(cube, train, classifier="sam")
    >>> lazy = cubekit.dask.predict(m, da.from_array(cube, chunks=(3, 5, 1)))
    >>> bool((lazy.compute() == m.predict(cube)).all())
    True
    """
    da = _runtime.dask_array()
    cube = da.asarray(cube)
    if cube.ndim != 3 or cube.shape[2] != model.bands:
        raise ValueError(f"cubekit.dask.predict: cube has shape {cube.shape}; expected (H, W, {model.bands}), "
                         "the model's bands")
    for key in keywords:
        if key not in ("backend", "device", "threads"):
            raise TypeError(f"cubekit.dask.predict() got an unexpected keyword argument '{key}'; its options are "
                            "backend, device, threads")
    cube = cube.rechunk({2: -1})
    return cube.map_blocks(_predict_chunk, model, keywords, drop_axis=2, dtype=np.int32)


def _pair_counts(regions, classes):
    """One chunk's votes: (region, class) pairs with their pixel counts (region > 0, class 0 included,
    so that the region sizes follow), as a sorted key array region << 32 | class and its counts."""
    r = np.asarray(_runtime.to_host(regions)).astype(np.int64).ravel()
    c = np.asarray(_runtime.to_host(classes)).astype(np.int64).ravel()
    inside = r > 0
    keys, counts = np.unique((r[inside] << 32) | c[inside], return_counts=True)
    return keys, counts.astype(np.int64)


def _decide(parts, tau):
    """The vote of every region from its exact counts, by region_vote's rules: the class with the most
    voters (class 0 does not vote) wins unless another class has as many (a tie), nobody votes, or
    its share of the region's pixels is below tau. Returns (regions, winner or 0 = keep, stats).
    Array operations over the sorted (region, class) keys: no Python loop over the regions."""
    keys = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int64)
    counts = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
    keys, at = np.unique(keys, return_inverse=True)
    # Pixel counts are integers far below 2^53: their float64 sums are exact.
    summed = np.bincount(at.ravel(), weights=counts, minlength=len(keys)).astype(np.int64)
    region, klass = keys >> 32, keys & 0xFFFFFFFF
    labels, first = np.unique(region, return_index=True)
    stats = {"regions": int(len(labels)), "relabelled": 0, "ties": 0, "no_voters": 0, "below_tau": 0, "changed_pixels": 0}
    if len(labels) == 0:
        return labels, np.zeros(0, np.int64), stats
    size = np.add.reduceat(summed, first)
    voter = klass != 0
    best = np.maximum.reduceat(np.where(voter, summed, -1), first)  # -1: nobody votes
    owner = np.repeat(np.arange(len(labels)), np.diff(np.append(first, len(keys))))
    is_best = voter & (summed == best[owner])
    n_best = np.add.reduceat(is_best.astype(np.int64), first)
    best_class = np.maximum.reduceat(np.where(is_best, klass, -1), first)  # the class when it is alone
    no_voters = best < 0
    tie = ~no_voters & (n_best > 1)
    below_tau = ~no_voters & ~tie & (best.astype(np.float64) / size.astype(np.float64) < tau)
    relabel = ~no_voters & ~tie & ~below_tau
    winner = np.where(relabel, best_class, 0).astype(np.int64)
    stats.update(relabelled=int(relabel.sum()), ties=int(tie.sum()), no_voters=int(no_voters.sum()),
                 below_tau=int(below_tau.sum()), changed_pixels=int((size - best)[relabel].sum()))
    return labels, winner, stats


def _apply_vote(regions, classes, labels, winner):
    r = np.asarray(_runtime.to_host(regions)).astype(np.int64)
    out = np.array(_runtime.to_host(classes), dtype=np.int32, copy=True)
    at = np.searchsorted(labels, r).clip(0, max(len(labels) - 1, 0))
    win = winner[at] if len(labels) else np.zeros(r.shape, np.int64)
    change = (r > 0) & (win != 0)
    out[change] = win[change]
    if _runtime.array_kind(classes) == "cupy":
        import cupy
        return cupy.asarray(out)
    return out


def region_vote(regions, class_map, tau=0.0, return_stats=False):
    """cubekit.region_vote of dask arrays ((H, W) region labels and pixel-wise classes, any chunks):
    each chunk counts its (region, class) pixels, the client merges the exact counts and decides
    every region by region_vote's rules, then the chunks are relabelled lazily: the whole call's map
    and counts exactly. Returns the lazy (H, W) int32 map, or (map, stats) with return_stats=True
    (stats computed when this is called).

    >>> import dask.array as da, numpy as np, cubekit, cubekit.dask
    >>> regions = np.array([[1, 1, 1, 2, 2, 2, 3, 3]]); classes = np.array([[5, 5, 7, 4, 6, 0, 0, 0]])
    >>> cubekit.dask.region_vote(da.from_array(regions, chunks=(1, 3)), da.from_array(classes, chunks=(1, 5))).compute().tolist()
    [[5, 5, 5, 4, 6, 0, 0, 0]]
    """
    da = _runtime.dask_array()
    import dask
    regions, class_map = da.asarray(regions), da.asarray(class_map)
    if regions.ndim != 2 or regions.shape != class_map.shape:
        raise ValueError(f"cubekit.dask.region_vote: regions {regions.shape} and class_map {class_map.shape}; "
                         "expected two (H, W) arrays of one shape")
    if not np.isfinite(tau) or tau < 0 or tau > 1:
        raise ValueError(f"cubekit.dask.region_vote: tau = {tau}; expected 0 <= tau <= 1")
    class_map = class_map.rechunk(regions.chunks)
    blocks = zip(regions.to_delayed().ravel(), class_map.to_delayed().ravel())
    parts = dask.compute(*[dask.delayed(_pair_counts)(r, c) for r, c in blocks])
    labels, winner, stats = _decide(list(parts), float(tau))
    voted = da.map_blocks(_apply_vote, regions, class_map, labels, winner, dtype=np.int32)
    return (voted, stats) if return_stats else voted


def classify(model, cube, segment=None, connectivity=8, tau=0.0, **keywords):
    """cubekit.classify of a dask array with a trained model (cubekit.train_classifier): the pixel-wise
    map (cubekit.dask.predict), and with segment='watershed' the majority vote inside the regions of
    cubekit.dask.watershed(cubekit.dask.rcmg(cube)) (cubekit.dask.region_vote): the maps of
    ``cubekit.classify(cube, train, ...)`` with the same model, exactly. Returns a dict: ``classes``,
    ``pixelwise`` and ``regions`` (None without a segmentation) lazy (H, W) int32; ``vote`` the vote's
    counts or None. Keywords: backend, device, threads (per chunk).

    >>> import dask.array as da, numpy as np, cubekit, cubekit.dask
    >>> cube = np.zeros((8, 8, 2), np.float32); cube[:, 4:] = (5, 1); cube[:, :4] = (1, 5)
    >>> train = np.zeros((8, 8), np.int32); train[0, 0] = 3; train[0, 7] = 7
    >>> m = cubekit.train_classifier(cube, train, classifier="mindist")
    >>> r = cubekit.dask.classify(m, da.from_array(cube, chunks=(3, 3, 2)), segment="watershed")
    >>> bool((r["classes"].compute() == cubekit.classify(cube, train, classifier="mindist", segment="watershed")["classes"]).all())
    True
    """
    from . import dask as cdask
    if segment not in (None, "none", "watershed"):
        raise ValueError(f"cubekit.dask.classify: segment = {segment!r}; expected 'watershed' or None")
    pixelwise = predict(model, cube, **keywords)
    if segment in (None, "none"):
        return {"classes": pixelwise, "pixelwise": pixelwise, "regions": None, "vote": None}
    gradient = cdask.rcmg(cube, connectivity=connectivity, **keywords)
    regions = cdask.watershed(gradient, connectivity=connectivity, **keywords)
    classes, stats = region_vote(regions, pixelwise, tau=tau, return_stats=True)
    return {"classes": classes, "pixelwise": pixelwise, "regions": regions, "vote": stats}
