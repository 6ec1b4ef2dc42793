"""cubekit on Dask arrays: the same results as the whole-array call, for scenes and mosaics that do
not fit one machine's memory or that many workers (one per GPU) share.

Each function takes a ``dask.array`` (NumPy or CuPy chunks; spatial chunks of any size, the bands
in one chunk or rechunked into one) and returns a lazy ``dask.array``. Local families run through
Dask's overlap with the family's halo (RCMG: 1 pixel; the pixel detectors: none, so plain
``map_blocks``; the classical detectors need their background statistics given, fitted once on the
whole scene or a sample of it, as a per-chunk fit would differ). Families with scene statistics
gather them over the chunks when called, with exact merges, then return the lazy per-chunk result
(``entropy_edges``: E1 band ranges and 256-bin histograms, then the maps with a 1-pixel halo; ``pca``:
the exact sums, one eigensolve, then the scores). Connected components (``label``,
``label_components``, ``remove_small_objects``) label each chunk on its own, join the components
that touch across chunk borders from the chunks' edge pixels alone (a merge on the client whose size
grows with the chunks' perimeters, not their pixels), then relabel each chunk lazily. The region table
(``region_statistics``) and the majority vote (``region_vote``, ``classify``) merge exact integer counts
over the chunks; the table's float means are added strip after strip in raster order, so they equal the
whole call's bit for bit. A trained classifier (``cubekit.train_classifier``) is applied chunk by chunk
(``predict``). Each chunk is computed by the cubekit
function on the chunk's own kind of array (CuPy chunks on their GPU), so a ``distributed`` cluster
with one worker pinned to each GPU spreads the work over the GPUs.

>>> import dask.array as da, numpy as np, cubekit, cubekit.dask
>>> cube = da.from_array(np.random.default_rng(0).random((300, 200, 8), np.float32), chunks=(64, 64, 8))
>>> g = cubekit.dask.rcmg(cube)              # lazy (300, 200) float32, chunks (64, 64)
>>> bool((g.compute() == cubekit.rcmg(cube.compute())).all())
True
"""
from __future__ import annotations

import numpy as np

import dataclasses

from . import _cubekit, _edges, _gradient, _kmeans, _labels, _pca, _runtime, _zernike

__all__ = ["rcmg", "RCMG_HALO", "entropy_edges", "EDGES_HALO", "baseline_edges", "pca", "kmeans", "rbfn_scores", "rx", "sam", "matched_filter", "ace", "background_stats",
           "cem", "detect_multires", "label", "label_components", "remove_small_objects", "watershed", "segment",
           "region_statistics", "predict", "region_vote", "classify", "zernike_moments"]

#: Pixels each RCMG chunk reads beyond its own (the 3x3 window; the 5-pixel cross needs no more).
RCMG_HALO = 1


_dask_array = _runtime.dask_array


#: Pixels each entropy-edges chunk reads beyond its own (the 3x3 rule), once the scene's statistics are known.
EDGES_HALO = 1


def _local(array, halo, function, dtype, out_bands=None):
    """function over the chunks of a (H, W) or (H, W, B) array with `halo` pixels of overlap on both
    spatial axes, returning (H, W) of `dtype` (or (H, W, out_bands) when given). No padding at the array's outer edges: there each
    chunk is at the scene's border, where the cubekit function applies its own border rule, so the
    result equals the whole-array call."""
    da = _dask_array()
    a = da.asarray(array)
    if a.ndim not in (2, 3):
        raise ValueError(f"cube has {a.ndim} dimensions; expected (H, W) or (H, W, B)")
    if a.ndim == 3 and a.numblocks[2] != 1:
        a = a.rechunk({2: -1})  # every pixel's spectrum whole in one chunk
    # A chunk thinner than the halo cannot lend its neighbours the rows they need.
    small = [axis for axis in (0, 1) if min(a.chunks[axis]) < halo and a.shape[axis] > halo]
    if small:
        a = a.rechunk({axis: max(halo, max(a.chunks[axis])) for axis in small})
    depth = {0: halo, 1: halo}
    if a.ndim == 3:
        depth[2] = 0
    grown = da.overlap.overlap(a, depth=depth, boundary="none")
    if out_bands is not None and a.ndim == 3:  # one output band per input band: the chunks' bands
        meta = da.utils.meta_from_array(a, ndim=3, dtype=dtype)
        blocks = grown.map_blocks(function, dtype=dtype, meta=meta)
        return da.overlap.trim_internal(blocks, {0: halo, 1: halo, 2: 0}, boundary="none")
    meta = da.utils.meta_from_array(a, ndim=2, dtype=dtype)
    blocks = grown.map_blocks(function, drop_axis=2 if a.ndim == 3 else [], dtype=dtype, meta=meta)
    return da.overlap.trim_internal(blocks, {0: halo, 1: halo}, boundary="none")


def rcmg(cube, **keywords):
    """cubekit.rcmg over the chunks of a dask array (halo 1); keywords as cubekit.rcmg's.

    Returns a lazy (H, W) array (float32, or float64 with out_type='f64') equal to
    ``cubekit.rcmg(cube.compute(), **keywords)`` bit for bit.
    """
    if "out" in keywords:
        raise ValueError("cubekit.dask.rcmg: 'out' cannot be given (each chunk gets its own output)")
    dtype = np.float64 if keywords.get("out_type", "f32") == "f64" else np.float32
    return _local(cube, RCMG_HALO, lambda block: _gradient.rcmg(block, **keywords), dtype)


_COMMON = ("backend", "device", "threads")


def entropy_edges(cube, **keywords):
    """cubekit.entropy_edges over the chunks of a dask array; keywords as cubekit.entropy_edges'.

    The scene's statistics are gathered over the chunks when this is called (for non-uint8 input each
    chunk's band ranges, then each chunk's 256-bin histograms: two reads of the chunks, computed at
    once; exact merges), then the map is a lazy array computed chunk by chunk with a 1-pixel halo.
    Returns (H, W) uint8 (0/1), or (H, W, B) with fusion='none', equal to
    ``cubekit.entropy_edges(cube.compute(), **keywords).edges`` bit for bit. With min_component > 1
    the map then goes through ``cubekit.dask.remove_small_objects`` (E3 over the chunks: the map's
    chunks are computed once for the components' sizes when this is called, and again lazily). Not
    available here: the PCA fusions, filter_each_band with E3, and the optional outputs.
    """
    da = _dask_array()
    import dask
    for bad in ("out", "keep_band_edges", "keep_binary"):
        if keywords.get(bad) is not None and keywords.get(bad) is not False:
            raise ValueError(f"cubekit.dask.entropy_edges: '{bad}' cannot be given (each chunk makes its own map)")
    keywords = dict(keywords)
    min_component = int(keywords.pop("min_component", 0) or 0)
    if min_component > 1 and keywords.get("filter_each_band"):
        raise ValueError("cubekit.dask.entropy_edges: filter_each_band needs every band's whole map before the vote; "
                         "leave it off (E3 then runs on the fused map, over the chunks)")
    a = da.asarray(cube)
    if a.ndim not in (2, 3):
        raise ValueError(f"cube has {a.ndim} dimensions; expected (H, W) or (H, W, B)")
    if a.ndim == 3 and a.numblocks[2] != 1:
        a = a.rechunk({2: -1})  # every pixel's spectrum whole in one chunk
    bands = a.shape[2] if a.ndim == 3 else 1
    common = {k: keywords[k] for k in _COMMON if k in keywords}
    options = {k: v for k, v in keywords.items() if k not in _COMMON}
    fusion = _cubekit.entropy_edges_bands(bands, dict(options))["fusion"]
    if fusion.startswith("pca"):
        raise ValueError(f"cubekit.dask.entropy_edges: fusion '{fusion}' needs the scene's principal components; "
                         "use mean, vote-edges, vote-binary or threshold-mean")
    with_mean = fusion in ("mean", "threshold-mean")
    blocks = list(a.to_delayed().ravel())
    lo, hi = [], []
    if a.dtype != np.uint8:
        ranges = dask.compute(*[dask.delayed(_edges._piece_ranges)(b, **common) for b in blocks])
        lo = np.min([r[0] for r in ranges], axis=0)
        hi = np.max([r[1] for r in ranges], axis=0)
        if options.get("quantize", "per-band") == "global":
            lo, hi = np.full(bands, lo.min()), np.full(bands, hi.max())
        lo, hi = [float(v) for v in lo], [float(v) for v in hi]
    hists = dask.compute(*[dask.delayed(_edges._piece_histograms)(b, lo, hi, with_mean, **common) for b in blocks])
    total = np.sum([np.asarray(h, np.uint64) for h in hists], axis=0, dtype=np.uint64)
    scene = _cubekit.entropy_scene_thresholds(total, lo, hi, float(options.get("q", 0.5)), with_mean)
    per_band = fusion == "none" and a.ndim == 3
    edges = _local(a, EDGES_HALO, lambda block: _edges._edges_piece(block, scene, **keywords), np.uint8,
                   bands if per_band else None)
    if min_component <= 1:
        return edges
    # E3 on the 0/1 map (where the equal-value rule is the detector's binary rule), over the chunks.
    return remove_small_objects(edges, min_size=min_component, connectivity=int(keywords.get("connectivity", 8)), **common)


def _pca_scan(piece, **common):
    ctx, _kind, _out, progress = _runtime.begin(piece, dict(common), "pca")
    return _cubekit.pca_piece_scan(ctx, piece, progress)


def _pca_sums(piece, exponent, **common):
    ctx, _kind, _out, progress = _runtime.begin(piece, dict(common), "pca")
    return _cubekit.pca_piece_sums(ctx, piece, exponent, progress)


def pca(cube, components=3, **common):
    """cubekit.pca over the chunks of a dask array: the model is fitted when this is called (float
    input: each chunk's scan of the pixels used, which fixes the scene's fixed point; then each chunk's
    exact sums, merged exactly; one eigensolve), the scores are a lazy (H, W, K) float64 array computed
    chunk by chunk. Returns a PCAResult whose fields equal ``cubekit.pca(cube.compute(), components=K)``'s
    bit for bit, with ``scores`` lazy. Keywords: backend, device, threads (each chunk runs on its own
    kind of array: CuPy chunks on their GPU).
    """
    da = _dask_array()
    import dask
    unknown = set(common) - set(_COMMON)
    if unknown:
        raise ValueError(f"cubekit.dask.pca: unknown keyword(s) {sorted(unknown)} (components, backend, device, threads)")
    a = da.asarray(cube)
    if a.ndim == 2:
        a = a[:, :, None]
    if a.ndim != 3:
        raise ValueError(f"cube has {a.ndim} dimensions; expected (H, W) or (H, W, B)")
    if a.numblocks[2] != 1:
        a = a.rechunk({2: -1})  # every pixel's spectrum whole in one chunk
    blocks = list(a.to_delayed().ravel())
    exponent = 0
    if np.issubdtype(a.dtype, np.floating):
        scans = dask.compute(*[dask.delayed(_pca_scan)(b, **common) for b in blocks])
        exponent = _cubekit.pca_scene_exponent(sum(int(s[0]) for s in scans), max(float(s[1]) for s in scans))
    parts = dask.compute(*[dask.delayed(_pca_sums)(b, exponent, **common) for b in blocks])
    model = _pca.PCAResult(scores=None, **_cubekit.pca_model_from_piece_sums(list(parts), int(components)))
    k = model.num_components
    meta = da.utils.meta_from_array(a, ndim=3, dtype=np.float64)
    scores = a.map_blocks(lambda block: _pca.pca_transform(block, model, **common), chunks=a.chunks[:2] + ((k,),),
                          dtype=np.float64, meta=meta)
    return dataclasses.replace(model, scores=scores)


# ---- k-means ------------------------------------------------------------------------------------

def _kmeans_piece(block, mask, x0, y0, request, threads):
    """A chunk's part of a k-means pass, on the chunk's own device (CuPy) or the CPU (NumPy)."""
    ctx, _kind = _runtime.context(block, None, None, threads)
    mask = None if mask is None else np.ascontiguousarray(_runtime.to_host(mask), np.uint8)
    return _cubekit.kmeans_piece(ctx, block, int(x0), int(y0), mask, request)


def _kmeans_labels(block, mask, x0, y0, labelling, threads):
    """A chunk's sorted labels, as the chunk's kind of array."""
    ctx, _kind = _runtime.context(block, None, None, threads)
    mask = None if mask is None else np.ascontiguousarray(_runtime.to_host(mask), np.uint8)
    return _on_chunk_kind(_cubekit.kmeans_piece_labels(ctx, block, int(x0), int(y0), mask, labelling), block)


def _kmeans_fit(cube, mask, threads, keywords, function):
    """cubekit.kmeans over the chunks of a dask array: every pass of k-means (the first pass, the init
    sample, each Lloyd iteration, the final counts) is a round of per-chunk tasks whose small answers
    (exact integer sums, ranges, sampled pixels) are merged exactly on the client, so the labels,
    centroids, counts and iterations equal ``cubekit.kmeans(cube.compute(), ...)``'s bit for bit (the
    inertia within 1e-12, 1e-9 with CuPy chunks: f64 sums in another order). Returns a KMeansResult whose
    ``labels`` is a lazy (H, W) int32 array (CuPy chunks give CuPy labels); the fit is computed when this
    is called (one round of tasks per pass: about max_iter + 4 rounds). Keywords: the k-means options of
    cubekit.kmeans (k, init, init_centroids, seed, max_iter, tol, n_init, init_sample, empty, legacy),
    ``mask`` (an (H, W) array, dask or not), ``threads``. Each chunk runs where it lives: NumPy chunks
    on the CPU, CuPy chunks on their GPU; the merges and the seeding run on the client's CPU.

    >>> import dask.array as da, numpy as np, cubekit, cubekit.dask
    >>> x = np.random.default_rng(1).integers(0, 50, (120, 90, 4)).astype(np.uint16)
    >>> r = cubekit.dask.kmeans(da.from_array(x, chunks=(40, 30, 4)), k=5, seed=3)
    >>> bool((r.labels.compute() == cubekit.kmeans(x, k=5, seed=3).labels).all())
    True
    """
    da = _dask_array()
    import dask
    for name in ("backend", "device", "out", *_runtime.TILE_KEYWORDS):
        if keywords.get(name) is not None:
            raise ValueError(f"cubekit.dask.{function}: {name!r} is not taken here (each chunk runs where it lives)")
    a = da.asarray(cube)
    if a.ndim == 2:
        a = a[:, :, None]
    if a.ndim != 3:
        raise ValueError(f"cubekit.dask.{function}: cube has {a.ndim} dimensions; expected (H, W) or (H, W, B)")
    if a.numblocks[2] != 1:
        a = a.rechunk({2: -1})  # every pixel's spectrum whole in one chunk
    h, w, b = (int(n) for n in a.shape)
    init_centroids = keywords.pop("init_centroids", None)
    if keywords.get("init") is not None and not isinstance(keywords["init"], str) and init_centroids is None:
        init_centroids = keywords.pop("init")
    centroids = _kmeans._explicit_centroids(keywords, init_centroids, b)
    masks = None
    if mask is not None:
        m = da.asarray(mask)
        if m.ndim == 3 and m.shape[2] == 1:
            m = m[:, :, 0]
        if tuple(m.shape) != (h, w):
            raise ValueError(f"cubekit.dask.{function}: mask has shape {tuple(m.shape)}; expected ({h}, {w})")
        used = (m != 0) & ~da.isnan(m) if m.dtype.kind == "f" else m != 0
        masks = used.astype(np.uint8).rechunk(a.chunks[:2]).to_delayed()
    like = np.zeros((1, 1, b), a.dtype)
    run = _cubekit.KmeansPieces(w, h, like, keywords, centroids, _kmeans._CLUSTER_K, int(threads))
    ys, xs = np.cumsum((0,) + a.chunks[0]), np.cumsum((0,) + a.chunks[1])
    blocks = a.to_delayed().reshape(a.numblocks[:2])
    grid = [(i, j) for i in range(a.numblocks[0]) for j in range(a.numblocks[1])]

    def mask_of(i, j):
        return None if masks is None else masks[i, j]

    while (request := run.next()) is not None:
        parts = dask.compute(*[dask.delayed(_kmeans_piece)(blocks[i, j], mask_of(i, j), xs[j], ys[i], request, threads)
                               for i, j in grid])
        run.feed(list(parts))
    d = run.result()
    labelling = run.labelling()

    def chunk(block, *rest, block_info=None):
        i, j = block_info[0]["chunk-location"][:2]
        piece_mask = np.ascontiguousarray(rest[0], np.uint8) if rest else None
        return _kmeans_labels(block, piece_mask, xs[j], ys[i], labelling, threads)

    args = [a] + ([used.astype(np.uint8).rechunk(a.chunks[:2])[:, :, None]] if mask is not None else [])
    labels = da.map_blocks(chunk, *args, drop_axis=2, dtype=np.int32,
                           meta=np.empty((0, 0), np.int32))
    return labels, d


def kmeans(cube, mask=None, threads=0, **keywords):
    d_labels, d = _kmeans_fit(cube, mask, threads, keywords, "kmeans")
    d.pop("palette")
    return _kmeans.KMeansResult(labels=d_labels, **d)


kmeans.__doc__ = _kmeans_fit.__doc__


def _paint_chunk(block, labels, palette, channels):
    """A chunk painted with the palette where its label is >= 0 (excluded pixels keep their values), in
    the chunk's own kind of array (CuPy chunks on their GPU)."""
    if _runtime.array_kind(block) == "cupy":
        import cupy as xp
    else:
        xp = np
    out = block.copy()
    labels = labels[:, :, 0]
    inside = labels >= 0
    colours = xp.asarray(palette)[xp.where(inside, labels, 0)]
    out[:, :, :channels] = xp.where(inside[:, :, None], colours, block[:, :, :channels])
    return out


def quantize(image, mask=None, alpha=False, threads=0, **keywords):
    """cubekit.quantize (a plain fit) over the chunks of a dask array: the palette fitted by
    cubekit.dask.kmeans' exact merges, then every chunk painted where it lives, so ``image``, ``labels``,
    ``palette``, ``centroids`` and ``counts`` equal ``cubekit.quantize(image.compute(), ...)``'s bit for
    bit (the inertia within 1e-12, 1e-9 with CuPy chunks). Returns a QuantizeResult whose ``image`` (the
    input's shape and type) and ``labels`` (H, W) are lazy; the fit runs when this is called. Keywords:
    the k-means options (k, seed, max_iter, tol, n_init, init, init_sample, empty), ``mask``, ``alpha``
    (the last channel is alpha: copied, not clustered), ``threads``. A given palette, colorspace 'lab',
    dithering and legacy need the whole image (cubekit.quantize).

    >>> import dask.array as da, numpy as np, cubekit, cubekit.dask
    >>> x = np.random.default_rng(4).integers(0, 255, (90, 80, 3)).astype(np.uint8)
    >>> q = cubekit.dask.quantize(da.from_array(x, chunks=(30, 40, 3)), k=8, seed=2)
    >>> bool((q.image.compute() == cubekit.quantize(x, k=8, seed=2).image).all())
    True
    """
    da = _dask_array()
    for name, plain in (("palette", None), ("colorspace", "rgb"), ("dither", "none"), ("legacy", False),
                        ("init_centroids", None)):
        if keywords.get(name, plain) not in (plain, None):
            raise ValueError(f"cubekit.dask.quantize: {name} = {keywords[name]!r} needs the whole image; use "
                             "cubekit.quantize")
        keywords.pop(name, None)
    a = da.asarray(image)
    ndim = a.ndim
    if ndim == 2:
        a = a[:, :, None]
    if ndim not in (2, 3):
        raise ValueError(f"cubekit.dask.quantize: image has {ndim} dimensions; expected (H, W) or (H, W, B)")
    if a.numblocks[2] != 1:
        a = a.rechunk({2: -1})
    channels = int(a.shape[2]) - (1 if alpha else 0)
    if channels < 1:
        raise ValueError(f"cubekit.dask.quantize: alpha = True needs at least 2 channels; the image has {a.shape[2]}")
    labels, d = _kmeans_fit(a[:, :, :channels], mask, threads, keywords, "quantize")
    palette_all = np.asarray(d.pop("palette"))
    counts = np.asarray(d.pop("counts"))
    used = int(np.count_nonzero(counts))  # sorted by count: the empty clusters come last
    integer = np.dtype(a.dtype).kind in "biu"
    painted = da.map_blocks(_paint_chunk, a, labels[:, :, None], palette_all, channels, dtype=a.dtype,
                            meta=da.utils.meta_from_array(a, ndim=3))
    if ndim == 2:
        painted = painted[:, :, 0]
    valid = max(int(d["valid_pixels"]), 1)
    parameters = dict(d["parameters"], colorspace="rgb", dither="none")
    return _kmeans.QuantizeResult(
        image=painted, labels=labels, palette=palette_all[:used], centroids=np.asarray(d["centroids"])[:used] if integer else None,
        counts=counts[:used], fractions=counts[:used] / valid, palette_size=used, k=d["k"], k_effective=d["k_effective"],
        inertia=d["inertia"], iterations=d["iterations"], converged=d["converged"], valid_pixels=d["valid_pixels"],
        winner=d["winner"], restarts=d["restarts"], history=d["history"], channels=channels, dtype=d["dtype"],
        colorspace="rgb", dither="none", mode="fit", implementation=d["implementation"], parameters=parameters,
        warnings=d["warnings"])


# ---- Connected components ---------------------------------------------------------------------------

def _label_chunk(block, x0, y0, connectivity, common):
    """A chunk's local labels (a host NumPy array) and its summary for the merge."""
    ctx, _kind, _out, _progress = _runtime.begin(block, dict(common), "label")
    return _cubekit.label_piece(ctx, block, int(x0), int(y0), {"connectivity": connectivity})


def _label_pieces(image, connectivity, common, function):
    """Labels every chunk (computed now) and merges them. Returns (array, tables, stats, offsets)."""
    da = _dask_array()
    import dask
    unknown = set(common) - set(_COMMON)
    if unknown:
        raise ValueError(f"cubekit.dask.{function}: unknown keyword(s) {sorted(unknown)} (connectivity, backend, device, "
                         "threads)")
    a = da.asarray(image)
    if a.ndim not in (2, 3):
        raise ValueError(f"cubekit.dask.{function}: the image has {a.ndim} dimensions; expected (H, W) or (H, W, B)")
    if a.ndim == 3 and a.numblocks[2] != 1:
        a = a.rechunk({2: -1})  # every chunk holds all the bands (they are labelled alike)
    ys, xs = np.cumsum((0,) + a.chunks[0]), np.cumsum((0,) + a.chunks[1])
    blocks = a.to_delayed().reshape(a.numblocks[:2])
    summaries = dask.compute(*[dask.delayed(lambda b, x, y: _label_chunk(b, x, y, connectivity, common)[1])(
        blocks[i, j], xs[j], ys[i]) for i in range(a.numblocks[0]) for j in range(a.numblocks[1])])
    tables, raw = _cubekit.merge_label_pieces(list(summaries), int(a.shape[1]), int(a.shape[0]), int(connectivity))
    return a, tables, _labels._tables(raw), (xs, ys)


def _on_chunk_kind(result, block):
    """A host result as the chunk's own kind of array (CuPy chunks give CuPy)."""
    if _runtime.array_kind(block) == "cupy":
        import cupy
        return cupy.asarray(result)
    return result


def _relabelled(a, tables, offsets, connectivity, common, finish, dtype):
    """Each chunk labelled again and passed with its merge tables to finish(block, local, tables)."""
    da = _dask_array()
    xs, ys = offsets
    columns = a.numblocks[1]

    def chunk(block, block_info=None):
        i, j = block_info[0]["chunk-location"][:2]
        local, _ = _label_chunk(block, xs[j], ys[i], connectivity, common)
        return _on_chunk_kind(finish(_runtime.to_host(block), local, tables[i * columns + j]), block)

    meta = da.utils.meta_from_array(a, ndim=a.ndim, dtype=dtype)
    return a.map_blocks(chunk, dtype=dtype, meta=meta)


def _relabel(_block, local, tables):
    if local.ndim == 2:
        return tables[0][local]
    return np.stack([t[local[:, :, b]] for b, t in enumerate(tables)], axis=2)


def label_components(image, connectivity=8, **common):
    """cubekit.label_components over the chunks of a dask array: each chunk is labelled (computed when
    this is called), the components touching across chunk borders are joined from the chunks' edges,
    and the scene's labels are a lazy int32 array, each chunk labelled again and renumbered.

    Returns a Components whose ``.labels`` is lazy and whose ``.stats`` equal
    ``cubekit.label_components(image.compute(), connectivity=...)``'s; the labels equal its labels.
    Keywords: backend, device, threads (each chunk runs on its own kind of array).

    >>> import dask.array as da, numpy as np, cubekit, cubekit.dask
    >>> m = da.from_array(np.random.default_rng(1).random((60, 50)) < 0.5, chunks=(16, 16))
    >>> c = cubekit.dask.label_components(m)
    >>> bool((c.labels.compute() == cubekit.label(m.compute())).all())
    True
    """
    a, tables, stats, offsets = _label_pieces(image, connectivity, common, "label_components")
    labels = _relabelled(a, tables, offsets, connectivity, common, _relabel, np.int32)
    return _labels.Components(labels=labels, stats=stats)


def label(image, connectivity=8, return_num=False, **common):
    """cubekit.label over the chunks of a dask array (see label_components): the lazy int32 labels, and
    with return_num the number of components (an int for (H, W), a list per band for (H, W, B))."""
    c = label_components(image, connectivity, **common)
    if not return_num:
        return c.labels
    return c.labels, (c.counts[0] if c.labels.ndim == 2 else c.counts)


def remove_small_objects(mask, min_size=64, connectivity=8, **common):
    """cubekit.remove_small_objects over the chunks of a dask array: the components' sizes in the scene
    come from labelling each chunk and joining them across borders (computed when this is called);
    the cleaned mask is lazy, each chunk labelled again and cleaned. Equal to the whole-array call;
    bool in, bool out, else uint8."""
    if int(min_size) < 0:
        raise ValueError(f"cubekit.dask.remove_small_objects: min_size = {min_size}; expected 0 or more")
    boolean = str(getattr(mask, "dtype", "")) == "bool"
    a, tables, stats, offsets = _label_pieces(mask, connectivity, common, "remove_small_objects")
    kept = [[np.concatenate(([False], s["size"] >= int(min_size)))[t] for s, t in zip(stats, piece)]
            for piece in tables]

    def clean(block, local, keep):
        block = block.astype(np.uint8, copy=False)
        if local.ndim == 2:
            return np.where(keep[0][local], block, 0).astype(np.uint8)
        return np.stack([np.where(k[local[:, :, b]], block[:, :, b], 0) for b, k in enumerate(keep)], axis=2).astype(np.uint8)

    out = _relabelled(a, kept, offsets, connectivity, common, clean, np.uint8)
    return out.astype(bool) if boolean else out


# ---- Zernike moments ------------------------------------------------------------------------------

# ---- Watershed ------------------------------------------------------------------------------------

def _watershed_piece(window, mask, scene, core, seeds, connectivity, common):
    """A chunk's window (its core and a 1-pixel halo) run on its own kind of array: (labels, ring
    distances, ring labels, class cells, joined classes), host NumPy arrays."""
    ctx, _kind, _out, _progress = _runtime.begin(window, dict(common), "watershed")
    return _cubekit.watershed_piece(ctx, window, mask, scene, core, seeds, connectivity)


def watershed(image, connectivity=8, mask=None, return_regions=False, **common):
    """cubekit.watershed over the chunks of a 2-D dask array: the same labels as the whole call.

    Each chunk runs the automaton on its window (the chunk and a 1-pixel halo). Plateau distances are
    exchanged on the client until the chunks agree (a second pass over some chunks only where a
    plateau crosses chunk borders), the chunks' classes are joined (a merge whose size grows with the
    chunks' borders and the number of regions, not the pixels), and the labels are a lazy int32 array,
    each chunk run again and renumbered. ``mask`` (optional): a dask or NumPy array of the image's
    shape, nonzero = inside. Keywords: backend, device, threads (each chunk runs on its own kind of
    array: CuPy chunks on their GPU). Markers, levels, h_min, min_area and volumes need the whole
    relief: use cubekit.watershed.

    >>> import dask.array as da, numpy as np, cubekit, cubekit.dask
    >>> h = da.from_array(np.random.default_rng(2).integers(0, 8, (60, 50)).astype(np.uint8), chunks=(16, 16))
    >>> labels, n = cubekit.dask.watershed(h, return_regions=True)
    >>> whole, m = cubekit.watershed(h.compute(), return_regions=True)
    >>> bool((labels.compute() == whole).all()) and n == m
    True
    """
    da = _dask_array()
    import dask
    unknown = set(common) - set(_COMMON)
    if unknown:
        raise ValueError(f"cubekit.dask.watershed: unknown keyword(s) {sorted(unknown)} (connectivity, mask, "
                         "return_regions, backend, device, threads)")
    if connectivity not in (4, 8):
        raise ValueError(f"cubekit.dask.watershed: connectivity = {connectivity!r}; expected 4 or 8")
    a = da.asarray(image)
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[:, :, 0]
    if a.ndim != 2:
        raise ValueError(f"cubekit.dask.watershed: the relief has shape {a.shape}; expected (H, W)")
    height, width = (int(n) for n in a.shape)
    ys, xs = np.cumsum((0,) + a.chunks[0]), np.cumsum((0,) + a.chunks[1])
    rows, cols = a.numblocks
    cores = [(int(xs[j]), int(ys[i]), int(a.chunks[1][j]), int(a.chunks[0][i])) for i in range(rows) for j in range(cols)]
    exchange = _cubekit.WatershedExchange(width, height, cores)
    depth = {0: 1, 1: 1}
    grown = da.overlap.overlap(a, depth=depth, boundary="none")
    windows = grown.to_delayed().reshape(-1)
    masks, grown_mask = [None] * len(cores), None
    if mask is not None:
        m = da.asarray(mask)
        if m.ndim == 3 and m.shape[2] == 1:
            m = m[:, :, 0]
        if tuple(m.shape) != (height, width):
            raise ValueError(f"cubekit.dask.watershed: mask has shape {tuple(m.shape)}; expected the relief's {(height, width)}")
        m = m.rechunk(a.chunks)
        inside = m != 0
        if np.dtype(m.dtype).kind == "f":
            inside = inside & (m == m)
        grown_mask = da.overlap.overlap(inside.astype(np.uint8), depth=depth, boundary="none")
        masks = list(grown_mask.to_delayed().reshape(-1))
    scene = (width, height)
    piece = dask.delayed(lambda w, k, seeds, m: _watershed_piece(w, m, scene, cores[k], seeds, connectivity, common)[1:])
    for rounds, dirty in enumerate(iter(exchange.dirty, []), 1):
        if rounds > width * height + 1:  # at most one round per pixel can make progress (tiled.cpp)
            raise RuntimeError(f"cubekit.dask.watershed: the chunks did not agree after {rounds - 1} rounds: a fault, "
                               "please report it")
        reports = dask.compute(*[piece(windows[k], k, exchange.seeds(k), masks[k]) for k in dirty])
        for k, r in zip(dirty, reports):
            exchange.report(k, *r)
    tables, regions = exchange.join()
    seeds = [exchange.seeds(k) for k in range(len(cores))]

    def chunk(window, *rest, block_info=None):
        i, j = block_info[0]["chunk-location"][:2]
        k = i * cols + j
        local = _watershed_piece(window, rest[0] if rest else None, scene, cores[k], seeds[k], connectivity, common)[0]
        return _on_chunk_kind(np.concatenate(([0], tables[k])).astype(np.int32)[local], window)

    meta = da.utils.meta_from_array(a, ndim=2, dtype=np.int32)
    extra = [grown_mask] if grown_mask is not None else []
    labels = da.overlap.trim_internal(grown.map_blocks(chunk, *extra, dtype=np.int32, meta=meta), depth, boundary="none")
    return (labels, int(regions)) if return_regions else labels


def segment(cube, connectivity=8, rcmg_connectivity=None, mask=None, **keywords):
    """cubekit.segment over the chunks of a dask array: cubekit.dask.rcmg (halo 1), then
    cubekit.dask.watershed of that gradient, so ``labels``, ``gradient`` and ``count`` equal
    ``cubekit.segment(cube.compute(), statistics=False)``'s bit for bit. Returns a SegmentResult whose
    ``labels`` (H, W) int32 and ``gradient`` (H, W) are lazy (the plateau exchange runs when this is
    called); ``regions`` is None, or with ``statistics=True`` the region table, computed now
    (cubekit.dask.region_statistics: the whole call's table bit for bit).
    Keywords: the RCMG's (reject, out_type, ...); ``connectivity`` sets both the watershed's neighbours
    and, unless ``rcmg_connectivity`` is given, the RCMG window; ``mask`` as cubekit.dask.watershed's.

    >>> import dask.array as da, numpy as np, cubekit, cubekit.dask
    >>> x = np.random.default_rng(3).random((64, 48, 5)).astype(np.float32)
    >>> s = cubekit.dask.segment(da.from_array(x, chunks=(20, 16, 5)))
    >>> w = cubekit.segment(x, statistics=False)
    >>> bool((s.labels.compute() == w.labels).all()) and s.count == w.count
    True
    """
    from ._watershed import SegmentResult
    statistics = keywords.pop("statistics", False)
    if not isinstance(statistics, (bool, np.bool_)):
        raise ValueError(f"cubekit.dask.segment: statistics = {statistics!r}; expected True or False")
    for name, plain in (("markers", None), ("levels", 0), ("h_min", 0), ("min_area", 1), ("out", None)):
        value = keywords.pop(name, plain)
        if value is not None and (plain is None or value is not plain and value != plain):
            raise ValueError(f"cubekit.dask.segment: {name} = {value!r} needs the whole cube; use cubekit.segment")
    gradient = rcmg(cube, connectivity=connectivity if rcmg_connectivity is None else rcmg_connectivity, **keywords)
    labels, count = watershed(gradient, connectivity=connectivity, mask=mask, return_regions=True)
    regions = region_statistics(labels, cube, gradient) if statistics else None
    return SegmentResult(labels=labels, gradient=gradient, count=count, regions=regions)


def _zernike_chunk(block, max_order, keywords):
    """The moments (images, count) complex128 of a chunk's images (its bands), where the chunk lives."""
    if block.ndim == 2:
        block = block[:, :, None]
    return _zernike.zernike_moments(block, max_order, **keywords).values


def zernike_moments(images, max_order=None, **keywords):
    """cubekit.zernike_moments over the chunks of a dask array of images (H, W) or (H, W, B): every
    image (band) is a whole disk, so each image is gathered into one chunk (spatial chunks are merged)
    and the chunks split the batch of images; each chunk is computed where it lives (CuPy chunks on
    their GPU). Returns a ZernikeResult whose ``values`` is a lazy (images, count) complex128 array,
    equal to the whole-array call's bit for bit on the same backend; the other fields (indices, disk,
    method) come from the same call on one zero image of that size. Keywords: as cubekit.zernike_moments
    (max_order, order, moment, moments, and the options), without ``out``.

    >>> import dask.array as da, numpy as np, cubekit, cubekit.dask
    >>> x = np.random.default_rng(2).random((48, 40, 6))
    >>> z = cubekit.dask.zernike_moments(da.from_array(x, chunks=(16, 40, 2)), max_order=6)
    >>> bool((z.values.compute() == cubekit.zernike_moments(x, max_order=6).values).all())
    True
    """
    da = _dask_array()
    if keywords.get("out") is not None:
        raise ValueError("cubekit.dask.zernike_moments: 'out' cannot be given (each chunk gets its own output)")
    keywords.pop("out", None)
    a = da.asarray(images)
    ndim = a.ndim
    if ndim == 2:
        a = a[:, :, None]
    if ndim not in (2, 3):
        raise ValueError(f"cubekit.dask.zernike_moments: images has {ndim} dimensions; expected (H, W) or (H, W, B)")
    a = a.rechunk({0: -1, 1: -1})  # each image whole in one chunk
    h, w, b = (int(n) for n in a.shape)
    probe = _zernike.zernike_moments(np.zeros((h, w, 1), np.float32), max_order, **keywords)
    count = len(probe.indices)
    meta = da.utils.meta_from_array(a, ndim=2, dtype=np.complex128)
    values = a.map_blocks(_zernike_chunk, max_order, keywords, drop_axis=[0, 1], new_axis=1,
                          chunks=(a.chunks[2], (count,)), dtype=np.complex128, meta=meta)
    info = {key: value for key, value in vars(probe).items() if key not in ("values", "ndim")}
    info["images"] = b
    return _zernike.ZernikeResult(values, info, ndim)


# The detectors and the per-band families live in their own modules (this one's size); they are part
# of cubekit.dask.
from ._dask_detect import ace, background_stats, cem, detect_multires, matched_filter, rbfn_scores, rx, sam  # noqa: E402
from ._dask_bands import baseline_edges  # noqa: E402
from ._dask_regions import region_statistics  # noqa: E402
from ._dask_classify import classify, predict, region_vote  # noqa: E402
