"""Tiles from Python (issue 17): cubekit.rcmg with budgets, devices or a file path equals the whole call."""
import numpy as np
import pytest

import cubekit
from conftest import gpu


def _cube(shape=(61, 47, 5), seed=0):
    return (np.random.default_rng(seed).random(shape) * 1000).astype(np.float32)


@pytest.mark.parametrize("tiles", [{"memory_limit": "4K"}, {"memory_limit": 3000}, {"tile_size": (5, 3)}, {"tile_size": (1, 1)}])
def test_rcmg_tiles_equal_whole(tiles):
    x = _cube()
    whole = cubekit.rcmg(x)
    got = cubekit.rcmg(x, **tiles)
    assert got.dtype == whole.dtype and np.array_equal(got.view(np.uint32), whole.view(np.uint32))


def test_rcmg_from_a_file_read_by_windows(tmp_path):
    x = _cube((40, 33, 4), seed=1)
    for name in ("c.npy", "c.hdr"):
        cubekit.write(tmp_path / name, x)
        got = cubekit.rcmg(str(tmp_path / name), memory_limit="8K", connectivity=4)
        assert np.array_equal(got, cubekit.rcmg(x, connectivity=4))
    assert np.array_equal(cubekit.rcmg(tmp_path / "c.npy"), cubekit.rcmg(x))  # a path alone: tiled, no budget


@pytest.mark.parametrize("bad, match", [({"memory_limit": "1Q"}, "memory_limit"), ({"memory_limit": -3}, "memory_limit"),
                                        ({"tile_size": (0, 3)}, "tile_size"), ({"memory_limit": 20}, "raise the budget")])
def test_rcmg_bad_tile_options(bad, match):
    with pytest.raises(ValueError, match=match):
        cubekit.rcmg(_cube(), **bad)


def test_rcmg_tiles_fill_a_memmap_out(tmp_path):
    x = _cube()
    np.save(tmp_path / "c.npy", x)
    out = np.lib.format.open_memmap(tmp_path / "g.npy", mode="w+", dtype=np.float32, shape=x.shape[:2])
    assert cubekit.rcmg(tmp_path / "c.npy", memory_limit="4K", out=out) is out
    out.flush()
    assert np.array_equal(np.load(tmp_path / "g.npy"), cubekit.rcmg(x))
    strided = np.zeros((x.shape[0], 2 * x.shape[1]), np.float32)[:, ::2]  # any strides
    cubekit.rcmg(x, tile_size=(9, 7), out=strided)
    assert np.array_equal(strided, cubekit.rcmg(x))
    with pytest.raises(ValueError, match="out"):
        cubekit.rcmg(x, memory_limit="4K", out=np.empty(x.shape[:2], np.float64))  # the wrong type
    with pytest.raises(ValueError, match="out"):
        cubekit.rcmg(x, memory_limit="4K", out=np.empty(x.shape[:2], np.float32)[None])  # the wrong shape


@gpu
def test_rcmg_tiles_on_every_device():
    x = _cube((300, 200, 8), seed=2)
    whole = cubekit.rcmg(x)
    devices = list(range(cubekit.cuda_device_count()))
    got = cubekit.rcmg(x, devices=devices, tile_size=(200, 16))
    assert np.array_equal(got.view(np.uint32), whole.view(np.uint32))
    assert np.array_equal(cubekit.rcmg(x, backend="cuda", device_memory_limit="256K"), whole)


# A page-locked NumPy array (CuPy's pinned memory, as a user reading scenes for the GPU allocates) is
# moved by the copy engines in place; the result is the same.
@gpu
def test_rcmg_tiles_from_page_locked_numpy():
    cupyx = pytest.importorskip("cupyx")
    x = _cube((257, 190, 6), seed=4)
    pinned = cupyx.empty_pinned(x.shape, x.dtype)
    pinned[...] = x
    whole = cubekit.rcmg(x)
    devices = list(range(cubekit.cuda_device_count()))
    got = cubekit.rcmg(pinned, devices=devices, tile_size=(100, 30))
    assert np.array_equal(got.view(np.uint32), whole.view(np.uint32))


# What cubekit.dask hands each chunk, on CuPy (the GPU machine has no Dask; this is the chunk function
# called directly on CuPy windows with their halos, as Dask's overlap would).
@gpu
def test_rcmg_chunk_function_on_cupy_windows():
    cp = pytest.importorskip("cupy")
    x = _cube((130, 70, 9), seed=3)
    whole = cubekit.rcmg(x)
    d = cp.asarray(x)
    out = np.empty_like(whole)
    for y0 in range(0, 130, 40):  # what the overlap hands each chunk: its rows plus one on each side
        r0, r1 = max(0, y0 - 1), min(130, y0 + 40 + 1)
        g = cubekit.rcmg(d[r0:r1])
        assert isinstance(g, cp.ndarray)
        out[y0:y0 + 40] = cp.asnumpy(g)[y0 - r0:y0 - r0 + min(40, 130 - y0)]
    assert np.array_equal(out.view(np.uint32), whole.view(np.uint32))


def test_rbfn_scores_in_tiles_equal_whole(tmp_path):
    rng = np.random.default_rng(7)
    x = (rng.random((45, 38, 6)) * 1000).astype(np.float32)
    model = {"type": "rbfn", "bands": 6, "hidden": 3, "centres": (rng.random((3, 6)) * 1000).tolist(),
             "sigma": [400.0, 500.0, 300.0], "weights": [0.5, -0.2, 0.8], "bias": 0.0, "threshold": 0.3}
    whole = cubekit.rbfn_scores(x, model)
    assert np.array_equal(cubekit.rbfn_scores(x, model, tile_size=(7, 5)), whole)
    assert np.array_equal(cubekit.rbfn_scores(x, [model, model], memory_limit="8K")[:, :, 1], whole)
    cubekit.write(tmp_path / "c.hdr", x)
    assert np.array_equal(cubekit.rbfn_scores(tmp_path / "c.hdr", model, memory_limit="16K"), whole)
    with pytest.raises(ValueError, match="memory_limit"):
        cubekit.rbfn_scores(x, model, memory_limit="lots")


@pytest.mark.parametrize("method", ["canny", "roberts"])
def test_baseline_edges_in_band_groups_equal_whole(method):
    x = np.random.default_rng(11).random((33, 40, 5)).astype(np.float32)
    x[6:25, 9:30] += 2
    whole = cubekit.baseline_edges(x, method=method)
    assert whole.edges.any()
    for keywords in ({"tile_size": (1, 2)}, {"memory_limit": "64K"}):
        got = cubekit.baseline_edges(x, method=method, **keywords)
        assert np.array_equal(got.edges, whole.edges)
        assert np.array_equal(got.thresholds, whole.thresholds)
    with pytest.raises(ValueError, match="raise it"):
        cubekit.baseline_edges(x, method=method, memory_limit="2K")


def test_detect_multires_in_tiles_equals_whole(tmp_path):
    rng = np.random.default_rng(9)
    x = rng.random((45, 70, 3)).astype(np.float32)

    def step(c):
        return {"type": "mlp", "inputs": 3, "hidden": 1, "W1": [[1000.0, 0.0, 0.0]], "b1": [-1000.0 * c], "w2": [1.0],
                "b2": 0.0, "in_min": [-1.0] * 3, "in_max": [1.0] * 3}
    model = {"type": "multires", "block": 8, "min_window": 8, "ann1": step(0.2), "ann2": step(0.295)}
    whole = cubekit.detect_multires(x, model, trace=True)
    assert len(whole["trace"]) > 5
    for tiled in (cubekit.detect_multires(x, model, trace=True, tile_size=(13, 9)),
                  cubekit.detect_multires(x, model, trace=True, memory_limit="8K")):
        assert tiled["detections"] == whole["detections"] and tiled["levels"] == whole["levels"]
        assert tiled["trace"] == whole["trace"]
    cubekit.write(tmp_path / "c.npy", x)
    from_file = cubekit.detect_multires(tmp_path / "c.npy", model, trace=True, memory_limit="8K")
    assert from_file["detections"] == whole["detections"] and from_file["trace"] == whole["trace"]
    with pytest.raises(ValueError, match="memory_limit"):
        cubekit.detect_multires(x, model, memory_limit="lots")


def test_detect_multires_chunk_sums_on_cupy_and_tiles_on_the_gpu():
    """cubekit.dask.detect_multires' chunk function on CuPy pieces cut at block edges (the GPU machine has
    no Dask): the pieces' sums side by side are the CPU's whole-scene sums bit for bit; and the search in
    tiles on the GPU gives the whole GPU call's windows."""
    cp = pytest.importorskip("cupy")
    from cubekit import _dask_detect
    rng = np.random.default_rng(10)
    x = rng.random((45, 70, 4)).astype(np.float32)
    x[30, 7, 1] = np.nan
    whole = _dask_detect._block_sums_chunk(x, 8, {"backend": "cpu"})
    assert whole.shape == (6, 9, 4, 3)
    placed = np.zeros_like(whole)
    for r0, r1, c0, c1 in ((0, 16, 0, 24), (0, 16, 24, 70), (16, 45, 0, 24), (16, 45, 24, 70)):
        part = _dask_detect._block_sums_chunk(cp.asarray(x[r0:r1, c0:c1]), 8, {})
        placed[r0 // 8:r0 // 8 + part.shape[0], c0 // 8:c0 // 8 + part.shape[1]] = part
    assert np.array_equal(placed, whole, equal_nan=True)

    def step(c):
        return {"type": "mlp", "inputs": 4, "hidden": 1, "W1": [[1000.0, 0.0, 0.0, 0.0]], "b1": [-1000.0 * c],
                "w2": [1.0], "b2": 0.0, "in_min": [-1.0] * 4, "in_max": [1.0] * 4}
    model = {"type": "multires", "block": 8, "min_window": 8, "ann1": step(0.2), "ann2": step(0.295)}
    on_gpu = cubekit.detect_multires(cp.asarray(x), model, trace=True)
    tiled = cubekit.detect_multires(x, model, trace=True, backend="cuda", tile_size=(16, 16))
    assert tiled["implementation"] == "cuda" and len(on_gpu["trace"]) > 5
    assert tiled["detections"] == on_gpu["detections"] and tiled["trace"] == on_gpu["trace"]


def _edge_cube(shape=(53, 41, 5), seed=3, dtype=np.float32):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 9, shape).astype(np.float64)
    yy, xx = np.mgrid[:shape[0], :shape[1]]
    x[((xx // 4 + yy // 3) % 3 == 0)] *= 3
    out = (x * 300 + 7).astype(dtype)
    if np.issubdtype(dtype, np.floating):
        out[1, 2, 0] = np.nan
    return out


@pytest.mark.parametrize("keywords", [{"min_component": 4}, {"fusion": "none"}, {"fusion": "mean", "quantize": "global"},
                                      {"fusion": "vote-binary", "vote_percent": 40, "min_component": 3}])
def test_entropy_edges_tiles_equal_whole(tmp_path, keywords):
    x = _edge_cube()
    whole = cubekit.entropy_edges(x, **keywords)
    for tiles in ({"memory_limit": "4K"}, {"tile_size": (5, 3)}, {"tile_size": (1, 1)}):
        got = cubekit.entropy_edges(x, **tiles, **keywords)
        assert np.array_equal(got.edges, whole.edges), tiles
        assert got.thresholds == whole.thresholds and got.derived_thresholds == whole.derived_thresholds
        assert got.tiled["tiles"] > 1 and got.tiled["passes"] == 3
    cubekit.write(tmp_path / "c.hdr", x)
    from_file = cubekit.entropy_edges(tmp_path / "c.hdr", memory_limit="16K", **keywords)  # read by windows
    assert np.array_equal(from_file.edges, whole.edges)
    assert whole.edges.any() and whole.tiled is None


def test_entropy_edges_tiles_refusals():
    x = _edge_cube((20, 20, 3))
    with pytest.raises(ValueError, match="principal components"):
        cubekit.entropy_edges(x, fusion="pca", memory_limit="4K")
    with pytest.raises(ValueError, match="keep_binary"):
        cubekit.entropy_edges(x, keep_binary=True, tile_size=(4, 4))
    with pytest.raises(ValueError, match="'out'"):
        cubekit.entropy_edges(x, out=np.zeros((20, 20), np.uint8), memory_limit="4K")


@gpu
def test_entropy_edges_tiles_on_every_device_and_chunk_functions_on_cupy():
    """The GPU machine has no Dask: the per-chunk functions of cubekit.dask.entropy_edges on CuPy
    arrays, merged as dask merges them, give the whole map; the tiled path on every device too."""
    cp = pytest.importorskip("cupy")
    import cubekit._edges as e
    x = _edge_cube((67, 59, 6), dtype=np.uint16)
    whole = cubekit.entropy_edges(x, fusion="threshold-mean")
    devices = list(range(cp.cuda.runtime.getDeviceCount()))
    tiled = cubekit.entropy_edges(x, fusion="threshold-mean", devices=devices, tile_size=(64, 9))
    assert np.array_equal(tiled.edges, whole.edges) and tiled.thresholds == whole.thresholds
    pieces = [cp.asarray(x[r:r + 23, c:c + 31]) for r in range(0, 67, 23) for c in range(0, 59, 31)]
    ranges = [e._piece_ranges(p) for p in pieces]
    lo = np.min([r[0] for r in ranges], axis=0).tolist()
    hi = np.max([r[1] for r in ranges], axis=0).tolist()
    total = np.sum([np.asarray(e._piece_histograms(p, lo, hi, True), np.uint64) for p in pieces], axis=0, dtype=np.uint64)
    scene = cubekit._cubekit.entropy_scene_thresholds(total, lo, hi, 0.5, True)
    got = np.zeros(whole.edges.shape, np.uint8)
    for r in range(0, 67, 23):  # cores of 23 x 31 read with a 1-pixel halo
        for c in range(0, 59, 31):
            r0, c0 = max(r - 1, 0), max(c - 1, 0)
            piece = cp.asarray(x[r0:min(r + 24, 67), c0:min(c + 32, 59)])
            m = e._edges_piece(piece, scene, fusion="threshold-mean")
            assert isinstance(m, cp.ndarray)
            got[r:r + 23, c:c + 31] = cp.asnumpy(m)[r - r0:r - r0 + 23, c - c0:c - c0 + 31]
    assert np.array_equal(got, whole.edges)


@pytest.mark.parametrize("dtype", [np.int16, np.float32])
def test_pca_tiles_equal_whole(tmp_path, dtype):
    rng = np.random.default_rng(11)
    base = rng.random((37, 29, 1)) * 100
    x = (base * np.linspace(1, 3, 7) + rng.random((37, 29, 7)) * 10).astype(dtype)
    if dtype == np.float32:
        x[2, 3, 1] = np.nan
    whole = cubekit.pca(x, components=3)
    for tiles in ({"memory_limit": "8K"}, {"tile_size": (5, 3)}, {"tile_size": (1, 1)}):
        t = cubekit.pca(x, components=3, **tiles)
        assert np.array_equal(t.scores, whole.scores, equal_nan=True), tiles
        assert np.array_equal(t.components, whole.components) and np.array_equal(t.eigenvalues, whole.eigenvalues)
        assert t.tiled["tiles"] > 1 and t.tiled["passes"] == (3 if dtype == np.float32 else 2)
    cubekit.write(tmp_path / "c.hdr", x)
    f = cubekit.pca(tmp_path / "c.hdr", components=3, memory_limit="16K")
    assert np.array_equal(f.scores, whole.scores, equal_nan=True) and whole.tiled is None


def _label_image(shape, seed, values=2):
    rng = np.random.default_rng(seed)
    m = (rng.random(shape) < 0.5) * rng.integers(1, values + 1, shape)
    m[1::3] = values  # rows that cross every tile border
    return m.astype(np.uint16)


@pytest.mark.parametrize("tiles", [{"memory_limit": "4K"}, {"tile_size": (5, 3)}, {"tile_size": (1, 1)}])
def test_labels_tiles_equal_whole(tmp_path, tiles):
    x = _label_image((43, 37, 2), seed=21)
    for connectivity in (4, 8):
        whole = cubekit.label_components(x, connectivity=connectivity)
        t = cubekit.label_components(x, connectivity=connectivity, **tiles)
        assert np.array_equal(t.labels, whole.labels) and t.tiled["tiles"] > 1 and whole.tiled is None
        assert all(np.array_equal(a, b) for a, b in zip(t.stats, whole.stats))
        mask = (x[..., 0] > 0).astype(np.uint8)
        assert np.array_equal(cubekit.remove_small_objects(mask, min_size=6, connectivity=connectivity, **tiles),
                              cubekit.remove_small_objects(mask, min_size=6, connectivity=connectivity))
    cubekit.write(tmp_path / "m.npy", x)
    assert np.array_equal(cubekit.label(tmp_path / "m.npy", memory_limit="8K"), cubekit.label(x))
    b = x[..., 1] > 0
    got = cubekit.remove_small_objects(b, min_size=3, tile_size=(4, 4))
    assert got.dtype == bool and np.array_equal(got, cubekit.remove_small_objects(b, min_size=3))


def test_labels_tiles_refusals():
    with pytest.raises(ValueError, match="'out'"):
        cubekit.label(np.ones((4, 4), np.uint8), out=np.zeros((4, 4), np.int32), tile_size=(2, 2))
    with pytest.raises(ValueError, match="element type"):
        cubekit.label(np.ones((4, 4), np.float32), tile_size=(2, 2))


@gpu
def test_labels_tiles_on_every_device_and_chunk_functions_on_cupy():
    """The GPU machine has no Dask: the per-chunk functions of cubekit.dask.label_components on CuPy
    arrays, merged as dask merges them, give the whole labels; the tiled path on every device too."""
    cp = pytest.importorskip("cupy")
    import cubekit.dask as d
    x = _label_image((67, 59, 2), seed=22, values=3)
    whole = cubekit.label_components(x)
    devices = list(range(cp.cuda.runtime.getDeviceCount()))
    tiled = cubekit.label_components(x, devices=devices, tile_size=(64, 9))
    assert np.array_equal(tiled.labels, whole.labels)
    assert all(np.array_equal(a, b) for a, b in zip(tiled.stats, whole.stats))
    mask = (x[..., 0] > 0).astype(np.uint8)
    assert np.array_equal(cubekit.remove_small_objects(mask, min_size=5, devices=devices, tile_size=(20, 20)),
                          cubekit.remove_small_objects(mask, min_size=5))
    cells = [(r, c) for r in range(0, 67, 23) for c in range(0, 59, 31)]
    chunks = [cp.asarray(x[r:r + 23, c:c + 31]) for r, c in cells]
    summaries = [d._label_chunk(p, c, r, 8, {})[1] for p, (r, c) in zip(chunks, cells)]
    tables, raw = cubekit._cubekit.merge_label_pieces(summaries, 59, 67, 8)
    got = np.zeros(whole.labels.shape, np.int32)
    for p, (r, c), t in zip(chunks, cells, tables):
        local, _ = d._label_chunk(p, c, r, 8, {})
        got[r:r + 23, c:c + 31] = d._relabel(p, local, t)
    assert np.array_equal(got, whole.labels)


@pytest.mark.parametrize("keywords", [{"k": 5, "seed": 4, "init_sample": 300}, {"k": 4, "init": "random", "n_init": 2},
                                      {"k": 6, "init": "box-diagonal", "empty": "keep", "tol": 0}])
def test_kmeans_tiles_equal_whole(tmp_path, keywords):
    x = np.random.default_rng(7).integers(0, 12, (37, 29, 4)).astype(np.uint16) * 100
    x[3, 4] = 0
    mask = np.ones((37, 29), bool)
    mask[::5, ::3] = False
    whole = cubekit.kmeans(x, mask=mask, **keywords)
    for tiles in ({"memory_limit": "8K"}, {"tile_size": (5, 3)}, {"tile_size": (1, 1)}):
        got = cubekit.kmeans(x, mask=mask, **tiles, **keywords)
        assert np.array_equal(got.labels, whole.labels), tiles
        assert np.array_equal(got.centroids.view(np.uint32), whole.centroids.view(np.uint32))
        assert np.array_equal(got.counts, whole.counts) and got.iterations == whole.iterations
        assert got.inertia == pytest.approx(whole.inertia, rel=1e-12)
        assert got.tiled["tiles"] > 1 and got.tiled["passes"] > 3
    cubekit.write(tmp_path / "c.hdr", x)
    from_file = cubekit.kmeans(tmp_path / "c.hdr", mask=mask, memory_limit="16K", **keywords)  # read by windows
    assert np.array_equal(from_file.labels, whole.labels)
    assert whole.tiled is None and (whole.labels == -1).sum() == (~mask).sum()


def test_kmeans_tiles_explicit_centroids_and_refusals(tmp_path):
    x = np.random.default_rng(8).random((21, 18, 3)).astype(np.float32)
    c = x[:4, 0, :].astype(np.float64)
    whole = cubekit.kmeans(x, init_centroids=c, max_iter=5)
    got = cubekit.kmeans(x, init_centroids=c, max_iter=5, tile_size=(4, 4))
    assert np.array_equal(got.labels, whole.labels) and np.array_equal(got.centroids, whole.centroids)
    with pytest.raises(ValueError, match="mask has shape"):
        cubekit.kmeans(x, k=3, memory_limit="1M", mask=np.ones((3, 3), bool))


@pytest.mark.parametrize("shape, dtype, alpha", [((33, 27, 3), np.uint8, False), ((33, 27, 4), np.uint8, True),
                                                 ((33, 27), np.uint16, False), ((33, 27, 3), np.float32, False)])
def test_quantize_tiles_equal_whole(tmp_path, shape, dtype, alpha):
    rng = np.random.default_rng(12)
    x = rng.integers(0, 200, shape).astype(dtype) if dtype != np.float32 else rng.random(shape).astype(dtype)
    mask = np.ones(shape[:2], bool)
    mask[::4, ::3] = False
    keywords = {"k": 7, "seed": 5, "init_sample": 400, "max_iter": 20, "alpha": alpha, "mask": mask}
    whole = cubekit.quantize(x, **keywords)
    for tiles in ({"memory_limit": "8K"}, {"tile_size": (4, 5)}, {"tile_size": (1, 1)}):
        got = cubekit.quantize(x, **tiles, **keywords)
        assert got.image.shape == x.shape and got.image.dtype == x.dtype, tiles
        assert np.array_equal(got.image, whole.image) and np.array_equal(got.labels, whole.labels), tiles
        assert np.array_equal(got.palette, whole.palette) and np.array_equal(got.counts, whole.counts)
        assert got.inertia == pytest.approx(whole.inertia, rel=1e-12) and got.iterations == whole.iterations
        assert got.tiled["tiles"] > 1 and got.tiled["passes"] > 3
    assert whole.tiled is None
    if not alpha:
        cubekit.write(tmp_path / "q.npy", x)
        from_file = cubekit.quantize(tmp_path / "q.npy", memory_limit="16K", **keywords)  # read by windows
        assert np.array_equal(from_file.image.reshape(x.shape), whole.image)
        assert np.array_equal(from_file.labels, whole.labels)


def test_quantize_tiles_refusals():
    x = np.random.default_rng(13).integers(0, 255, (20, 16, 3)).astype(np.uint8)
    with pytest.raises(ValueError, match="palette needs the whole image"):
        cubekit.quantize(x, palette=[[0, 0, 0], [255, 255, 255]], tile_size=(4, 4))
    with pytest.raises(ValueError, match="dither"):
        cubekit.quantize(x, dither="floyd-steinberg", memory_limit="1M")
    with pytest.raises(ValueError, match="colorspace = lab"):
        cubekit.quantize(x, colorspace="lab", memory_limit="1M")
    with pytest.raises(ValueError, match="'out' cannot be combined"):
        cubekit.quantize(x, out=np.empty_like(x), memory_limit="1M")


def test_quantize_tiles_on_every_device():
    cp = pytest.importorskip("cupy")
    x = np.random.default_rng(14).integers(0, 255, (61, 45, 3)).astype(np.uint8)
    whole = cubekit.quantize(x, k=9, seed=3, max_iter=12, backend="cpu")
    devices = list(range(cp.cuda.runtime.getDeviceCount()))
    got = cubekit.quantize(x, k=9, seed=3, max_iter=12, devices=devices, tile_size=(20, 9))
    assert np.array_equal(got.image, whole.image) and np.array_equal(got.labels, whole.labels)
    assert np.array_equal(got.palette, whole.palette) and got.implementation.startswith("cuda")


@pytest.mark.parametrize("request_", [{"max_order": 10}, {"max_order": 0}, {"order": 7}, {"order": 1},
                                      {"moment": (5, 3)}, {"moments": [(4, 2)]}, {"moments": [(1, 1), (6, 0)]}])
def test_zernike_groups_equal_whole(request_):
    """Each request in groups of images gives the whole call's values bit for bit, and its method (a
    list of one moment stays Kintner's, a set of order 0 too)."""
    x = np.random.default_rng(15).integers(0, 255, (40, 37, 9)).astype(np.uint8)
    whole = cubekit.zernike_moments(x, **request_)
    for tiles in ({"memory_limit": "6K"}, {"tile_size": (1, 1)}, {"tile_size": (1, 4)}):
        got = cubekit.zernike_moments(x, **tiles, **request_)
        assert np.array_equal(got.values.view(np.uint64), whole.values.view(np.uint64)), tiles
        assert got.method == whole.method and got.indices == whole.indices and got.images == 9
        assert got.tiled["tiles"] > 1
    assert whole.tiled is None


def test_zernike_groups_refusals():
    x = np.random.default_rng(16).random((30, 30, 2))
    with pytest.raises(ValueError, match="less than one 30x30 image"):
        cubekit.zernike_moments(x, max_order=4, memory_limit=1000)
    with pytest.raises(ValueError, match="give an array"):
        cubekit.zernike_moments("scene.npy", max_order=4, memory_limit="1M")


def test_zernike_groups_on_every_device():
    cp = pytest.importorskip("cupy")
    x = np.random.default_rng(17).random((48, 48, 7)).astype(np.float32)
    whole = cubekit.zernike_moments(cp.asarray(x), max_order=12)
    devices = list(range(cp.cuda.runtime.getDeviceCount()))
    got = cubekit.zernike_moments(x, max_order=12, devices=devices, tile_size=(1, 2))
    assert np.array_equal(got.values.view(np.uint64), cp.asnumpy(whole.values).view(np.uint64))
    assert got.backend == "cuda" and got.tiled["tiles"] == 4


def test_quantize_paint_chunk_function_on_cupy():
    """cubekit.dask.quantize's painting of a chunk (the GPU machine has no Dask): CuPy chunks painted on
    their GPU with the fit's labels and palette give the whole call's image, excluded pixels kept."""
    cp = pytest.importorskip("cupy")
    import cubekit.dask as d
    x = np.random.default_rng(18).integers(0, 255, (41, 37, 4)).astype(np.uint8)
    mask = np.ones((41, 37), bool)
    mask[::3, ::5] = False
    whole = cubekit.quantize(x, k=7, seed=4, mask=mask, alpha=True)
    for r0, c0 in ((0, 0), (20, 11), (33, 30)):
        block = cp.asarray(x[r0:r0 + 13, c0:c0 + 17])
        labels = cp.asarray(whole.labels[r0:r0 + 13, c0:c0 + 17])[:, :, None]
        painted = d._paint_chunk(block, labels, whole.palette, 3)
        assert isinstance(painted, cp.ndarray)
        assert np.array_equal(painted.get(), whole.image[r0:r0 + 13, c0:c0 + 17])


def test_kmeans_tiles_on_every_device_and_chunk_functions_on_cupy():
    """The GPU machine has no Dask: the per-chunk functions of cubekit.dask.kmeans on CuPy chunks (each
    part computed on the GPU), driven and merged as cubekit.dask.kmeans drives them, give the whole
    CPU result bit for bit (the inertia within 1e-9); the tiled path on every device too."""
    cp = pytest.importorskip("cupy")
    import cubekit.dask as d
    from cubekit import _cubekit, _kmeans
    x = np.random.default_rng(9).integers(0, 40, (53, 47, 6)).astype(np.int16) * 7
    mask = np.ones((53, 47), bool)
    mask[::4, ::5] = False
    keywords = {"k": 6, "seed": 2, "init_sample": 900, "max_iter": 15}
    whole = cubekit.kmeans(x, mask=mask, **keywords)
    devices = list(range(cp.cuda.runtime.getDeviceCount()))
    tiled = cubekit.kmeans(x, mask=mask, devices=devices, tile_size=(20, 9), **keywords)
    assert np.array_equal(tiled.labels, whole.labels) and tiled.iterations == whole.iterations
    assert np.array_equal(tiled.centroids.view(np.uint32), whole.centroids.view(np.uint32))

    cells = [(r, c) for r in range(0, 53, 20) for c in range(0, 47, 17)]
    chunks = [cp.asarray(x[r:r + 20, c:c + 17]) for r, c in cells]
    masks = [mask[r:r + 20, c:c + 17].astype(np.uint8) for r, c in cells]
    run = _cubekit.KmeansPieces(47, 53, np.zeros((1, 1, 6), x.dtype), dict(keywords),
                                _kmeans._explicit_centroids(dict(keywords), None, 6), _kmeans._CLUSTER_K, 0)
    while (request := run.next()) is not None:
        run.feed([d._kmeans_piece(p, m, c, r, request, 0) for p, m, (r, c) in zip(chunks, masks, cells)])
    result = run.result()
    assert np.array_equal(np.asarray(result["centroids"]).view(np.uint32), whole.centroids.view(np.uint32))
    assert np.array_equal(result["counts"], whole.counts) and result["iterations"] == whole.iterations
    assert result["inertia"] == pytest.approx(whole.inertia, rel=1e-9)
    labelling = run.labelling()
    got = np.zeros((53, 47), np.int32)
    for p, m, (r, c) in zip(chunks, masks, cells):
        piece = d._kmeans_labels(p, m, c, r, labelling, 0)
        assert isinstance(piece, cp.ndarray)
        got[r:r + 20, c:c + 17] = piece.get()
    assert np.array_equal(got, whole.labels)


def test_zernike_chunk_function_on_cupy():
    """The GPU machine has no Dask: the per-chunk function of cubekit.dask.zernike_moments on CuPy chunks
    of a batch of images gives the whole CuPy call's moments bit for bit (CuPy out)."""
    cp = pytest.importorskip("cupy")
    import cubekit.dask as d
    x = cp.asarray(np.random.default_rng(33).random((64, 56, 7)).astype(np.float32))
    for request in ({"max_order": 14}, {"order": 9}, {"moments": [(6, 2), (11, 5)]}):
        whole = cubekit.zernike_moments(x, **request).values
        max_order = request.get("max_order")
        rest = {k: v for k, v in request.items() if k != "max_order"}
        parts = [d._zernike_chunk(x[:, :, b0:b0 + 3], max_order, rest) for b0 in range(0, 7, 3)]
        assert all(isinstance(p, cp.ndarray) for p in parts)
        assert cp.array_equal(cp.concatenate(parts), whole), request


def _reliefs(shape=(41, 53), seed=30):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:shape[0], 0:shape[1]]
    return {"u8 ties": rng.integers(0, 8, shape).astype(np.uint8),
            "f32": rng.random(shape).astype(np.float32),
            "staircase": (x // 9).astype(np.uint16),
            "rcmg": cubekit.rcmg(rng.integers(0, 50, shape + (4,)).astype(np.int16))}


@pytest.mark.parametrize("tiles", [{"memory_limit": "6K"}, {"tile_size": (5, 3)}, {"tile_size": (1, 1)}])
def test_watershed_tiles_equal_whole(tmp_path, tiles):
    mask = np.random.default_rng(31).random((41, 53)) > 0.1
    for name, relief in _reliefs().items():
        for connectivity in (4, 8):
            whole, n = cubekit.watershed(relief, connectivity=connectivity, return_regions=True)
            got, m = cubekit.watershed(relief, connectivity=connectivity, return_regions=True, **tiles)
            assert np.array_equal(got, whole) and m == n, (name, connectivity)
            assert np.array_equal(cubekit.watershed(relief, connectivity=connectivity, mask=mask, **tiles),
                                  cubekit.watershed(relief, connectivity=connectivity, mask=mask)), name
    relief = _reliefs()["rcmg"]
    cubekit.write(tmp_path / "g.npy", relief)
    assert np.array_equal(cubekit.watershed(tmp_path / "g.npy", memory_limit="8K"), cubekit.watershed(relief))


def test_segment_tiles_equal_whole(tmp_path):
    cube = np.random.default_rng(34).integers(0, 40, (37, 45, 6)).astype(np.int16)
    whole = cubekit.segment(cube, connectivity=4)
    for tiles in ({"tile_size": (7, 5)}, {"memory_limit": "8K"}):
        t = cubekit.segment(cube, connectivity=4, **tiles)
        assert np.array_equal(t.labels, whole.labels) and np.array_equal(t.gradient, whole.gradient)
        assert t.count == whole.count and np.array_equal(t.regions, whole.regions)
    cubekit.write(tmp_path / "c.npy", cube)
    f = cubekit.segment(tmp_path / "c.npy", connectivity=4, statistics=False, tile_size=(9, 9))
    assert np.array_equal(f.labels, whole.labels) and f.regions is None
    # The region table from the file, read a strip of rows at a time: the whole call's table.
    g = cubekit.segment(tmp_path / "c.npy", connectivity=4, memory_limit="2K")
    assert np.array_equal(g.labels, whole.labels) and g.regions.dtype == whole.regions.dtype
    assert np.array_equal(g.regions, whole.regions)


def test_region_statistics_from_a_file_in_strips(tmp_path):
    rng = np.random.default_rng(35)
    labels = rng.integers(0, 9, (23, 31)).astype(np.int32)
    # Magnitudes 1e12 apart: the f64 sums round, so only the whole table's order of additions matches.
    cube = rng.random((23, 31, 5)).astype(np.float32) * np.where(rng.random((23, 31, 5)) < 0.3, 1e12, 1).astype(np.float32)
    gradient = rng.random((23, 31)).astype(np.float32)
    whole = cubekit.region_statistics(labels, cube, gradient)
    cubekit.write(tmp_path / "c.npy", cube)
    row = 31 * 5 * 4
    for limit in (row, 3 * row, None):
        strips = cubekit.region_statistics(labels, tmp_path / "c.npy", gradient, memory_limit=limit)
        assert np.array_equal(strips, whole), limit
    assert cubekit.region_statistics(labels, str(tmp_path / "c.npy"))["mean_spectrum"].shape == (8, 5)
    with pytest.raises(ValueError, match="no row"):
        cubekit.region_statistics(labels, tmp_path / "c.npy", memory_limit=row - 1)


def test_watershed_tiles_refusals():
    relief = _reliefs()["u8 ties"]
    with pytest.raises(ValueError, match="markers"):
        cubekit.watershed(relief, markers=np.ones(relief.shape, np.int32), tile_size=(8, 8))
    with pytest.raises(ValueError, match="levels"):
        cubekit.watershed(relief, levels=8, tile_size=(8, 8))
    with pytest.raises(ValueError, match="'out'"):
        cubekit.watershed(relief, out=np.zeros(relief.shape, np.int32), tile_size=(8, 8))
    with pytest.raises(ValueError, match="volume"):
        cubekit.watershed(np.stack([relief] * 2), volume=True, tile_size=(8, 8))


@gpu
def test_watershed_tiles_on_every_device():
    cp = pytest.importorskip("cupy")
    devices = list(range(cp.cuda.runtime.getDeviceCount()))
    for name, relief in _reliefs((97, 83), seed=32).items():
        whole = cubekit.watershed(relief, backend="cpu")
        assert np.array_equal(cubekit.watershed(relief, devices=devices, tile_size=(40, 9)), whole), name
        assert np.array_equal(cubekit.watershed(relief, backend="cuda", device_memory_limit="1M"), whole), name


@gpu
def test_watershed_chunk_functions_on_cupy():
    """The GPU machine has no Dask: cubekit.dask.watershed's per-chunk function on CuPy windows, with
    the exchange and join it uses, gives the whole labels."""
    cp = pytest.importorskip("cupy")
    import cubekit.dask as d
    for name, relief in _reliefs((67, 59), seed=33).items():
        whole = cubekit.watershed(relief, backend="cpu")
        cores = [(c, r, min(17, 59 - c), min(13, 67 - r)) for r in range(0, 67, 13) for c in range(0, 59, 17)]
        ex = cubekit._cubekit.WatershedExchange(59, 67, cores)

        def window(core):
            x0, y0, w, h = core
            return cp.asarray(relief[max(0, y0 - 1):y0 + h + 1, max(0, x0 - 1):x0 + w + 1])

        for dirty in iter(ex.dirty, []):
            for k in dirty:
                ex.report(k, *d._watershed_piece(window(cores[k]), None, (59, 67), cores[k], ex.seeds(k), 8, {})[1:])
        tables, _regions = ex.join()
        got = np.zeros(whole.shape, np.int32)
        for k, (x0, y0, w, h) in enumerate(cores):
            local = d._watershed_piece(window(cores[k]), None, (59, 67), cores[k], ex.seeds(k), 8, {})[0]
            labels = np.concatenate(([0], tables[k])).astype(np.int32)[local]
            got[y0:y0 + h, x0:x0 + w] = labels[(y0 > 0):(y0 > 0) + h, (x0 > 0):(x0 > 0) + w]
        assert np.array_equal(got, whole), name
