"""cubekit.dask (issue 17, item 4): chunked results equal the whole-array call bit for bit, on the
threaded scheduler and on a distributed LocalCluster (Debian's dask/distributed). The per-chunk
function on CuPy chunks, for the GPU machine that has no Dask: test_tiles.py."""
import numpy as np
import pytest

import cubekit

da = pytest.importorskip("dask.array", reason="python3-dask not installed")
import cubekit.dask  # noqa: E402  (after the skip: the module imports dask lazily, the test needs it)


def _random(shape, seed=0, dtype=np.float32):
    return (np.random.default_rng(seed).random(shape) * 1000).astype(dtype)


@pytest.mark.parametrize("chunks", [(17, 13, -1), (7, 7, 2), (1, 3, -1), (-1, -1, -1), (2, 2, 1)])
def test_rcmg_chunks_equal_whole(chunks):
    x = _random((61, 47, 5))
    whole = cubekit.rcmg(x)
    g = cubekit.dask.rcmg(da.from_array(x, chunks=chunks))
    assert g.shape == (61, 47) and g.dtype == np.float32
    got = g.compute()
    assert np.array_equal(got.view(np.uint32), whole.view(np.uint32))


@pytest.mark.parametrize("keywords", [{"connectivity": 4}, {"reject": 0}, {"reject": 3, "out_type": "f64"}])
def test_rcmg_options_and_types(keywords):
    x = _random((40, 33, 3), seed=1, dtype=np.uint16)
    whole = cubekit.rcmg(x, **keywords)
    got = cubekit.dask.rcmg(da.from_array(x, chunks=(9, 11, 3)), **keywords).compute()
    assert got.dtype == whole.dtype and np.array_equal(got, whole)
    assert np.array_equal(cubekit.dask.rcmg(da.from_array(x[..., 0], chunks=(5, 6)), **keywords).compute(),
                          cubekit.rcmg(x[..., 0], **keywords))


def test_rcmg_refuses_out_and_bad_shapes():
    with pytest.raises(ValueError, match="'out'"):
        cubekit.dask.rcmg(da.zeros((4, 4, 2), chunks=2), out=np.zeros((4, 4), np.float32))
    with pytest.raises(ValueError, match="dimensions"):
        cubekit.dask.rcmg(da.zeros((2, 4, 4, 2), chunks=2))


def test_rcmg_on_a_distributed_local_cluster():
    distributed = pytest.importorskip("distributed", reason="python3-distributed not installed")
    x = _random((120, 90, 6), seed=2)
    whole = cubekit.rcmg(x)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        got = client.compute(cubekit.dask.rcmg(da.from_array(x, chunks=(32, 32, 6)))).result()
    assert np.array_equal(got.view(np.uint32), whole.view(np.uint32))


def _model(bands, hidden, seed):
    rng = np.random.default_rng(seed)
    return {"type": "rbfn", "bands": bands, "hidden": hidden, "centres": (rng.random((hidden, bands)) * 1000).tolist(),
            "sigma": (300 + 200 * rng.random(hidden)).tolist(), "weights": (rng.random(hidden) - 0.3).tolist(),
            "bias": 0.01, "threshold": 0.2}


@pytest.mark.parametrize("chunks", [(17, 13, -1), (5, 7, 2)])
def test_rbfn_scores_chunks_equal_whole(chunks):
    x = _random((40, 31, 6), seed=4)
    one, two = _model(6, 3, 1), _model(6, 5, 2)
    got = cubekit.dask.rbfn_scores(da.from_array(x, chunks=chunks), one).compute()
    assert got.shape == (40, 31) and np.array_equal(got, cubekit.rbfn_scores(x, one))
    both = cubekit.dask.rbfn_scores(da.from_array(x, chunks=chunks), [one, two])
    assert both.shape == (40, 31, 2)
    assert np.array_equal(both.compute(), cubekit.rbfn_scores(x, [one, two]))


def _step_multires(bands, c1, c2):
    def step(c):  # positive iff the first band's window std > c
        w1 = [[1000.0] + [0.0] * (bands - 1)]
        return {"type": "mlp", "inputs": bands, "hidden": 1, "W1": w1, "b1": [-1000.0 * c], "w2": [1.0], "b2": 0.0,
                "in_min": [-1.0] * bands, "in_max": [1.0] * bands}
    return {"type": "multires", "block": 8, "min_window": 8, "ann1": step(c1), "ann2": step(c2)}


def _same_windows(a, b):
    def key(w):
        return {k: (None if v is None or (isinstance(v, float) and np.isnan(v)) else v) for k, v in w.items()}
    assert [key(w) for w in a] == [key(w) for w in b]


@pytest.mark.parametrize("chunks", [(24, 16, -1), (17, 13, 2), (64, 64, -1)])
def test_detect_multires_from_chunk_sums_equals_whole(chunks):
    """Chunks not cut at block edges are rechunked; the windows, outcomes and counts are the whole call's."""
    x = _random((61, 83, 4), seed=8) / 1000.0  # uniform in [0, 1): sigma ~0.2887, so windows split and stop
    x[40, 9, 2] = np.nan
    model = _step_multires(4, 0.2, 0.295)
    whole = cubekit.detect_multires(x, model, trace=True)
    got = cubekit.dask.detect_multires(da.from_array(x, chunks=chunks), model, trace=True)
    assert len(whole["trace"]) > 5
    _same_windows(got["detections"], whole["detections"])
    _same_windows(got["trace"], whole["trace"])
    assert got["levels"] == whole["levels"] and got["skipped_samples"] == whole["skipped_samples"] == 1
    with pytest.raises(ValueError, match="out"):
        cubekit.dask.detect_multires(da.from_array(x, chunks=chunks), model, out=np.empty(1))


@pytest.mark.parametrize("method", ["canny", "sobel", "log"])
def test_baseline_edges_band_chunks_equal_whole(method):
    x = _random((37, 45, 5), seed=9)
    x[10:25, 12:30] += 400
    whole = cubekit.baseline_edges(x, method=method).edges
    assert whole.any()
    got = cubekit.dask.baseline_edges(da.from_array(x, chunks=(16, 20, 2)), method=method).compute()
    assert got.dtype == np.uint8 and np.array_equal(got, whole)
    band = cubekit.dask.baseline_edges(da.from_array(x[:, :, 3], chunks=(10, 10)), method=method).compute()
    assert np.array_equal(band, cubekit.baseline_edges(x[:, :, 3], method=method).edges)
    with pytest.raises(TypeError, match="unknown keyword"):
        cubekit.dask.baseline_edges(da.from_array(x), methd="sobel")


@pytest.mark.parametrize("name", ["rx", "matched_filter", "ace", "cem"])
def test_classical_chunks_equal_whole_with_given_statistics(name):
    x = _random((36, 29, 5), seed=5)
    stats = cubekit.background_stats(x)
    function = getattr(cubekit, name)
    target = None if name == "rx" else x[3, 4].astype(np.float64)
    whole = function(x, background=stats) if target is None else function(x, target, background=stats)
    lazy = getattr(cubekit.dask, name)
    arr = da.from_array(x, chunks=(10, 8, 2))
    got = (lazy(arr, background=stats) if target is None else lazy(arr, target, background=stats)).compute()
    assert got.dtype == whole.dtype and np.array_equal(got, whole)
    # Without a background the statistics are fitted over the whole array (cubekit.dask.background_stats).
    fitted = (lazy(arr) if target is None else lazy(arr, target)).compute()
    assert np.array_equal(fitted, whole)


def _blobs(shape, seed, dtype):
    """Few levels in blobs (edges that are not everywhere), the scale of the dtype."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 9, shape).astype(np.float64)
    yy, xx = np.mgrid[:shape[0], :shape[1]]
    x[((xx // 4 + yy // 3) % 3 == 0)] *= 3
    x = x * (20 if dtype == np.uint8 else 300) + 7
    out = x.astype(dtype)
    if np.issubdtype(dtype, np.floating):
        out[1, 2, ...] = np.nan
        out[-1, -1, ...] = np.inf
    return out


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32])
@pytest.mark.parametrize("keywords", [{}, {"fusion": "none"}, {"fusion": "mean", "quantize": "global"},
                                      {"fusion": "vote-binary", "vote_percent": 40}, {"fusion": "threshold-mean"}])
def test_entropy_edges_chunks_equal_whole(dtype, keywords):
    x = _blobs((53, 41, 5), seed=3, dtype=dtype)
    whole = cubekit.entropy_edges(x, **keywords).edges
    for chunks in [(17, 13, -1), (5, 7, 2), (1, 4, -1)]:
        got = cubekit.dask.entropy_edges(da.from_array(x, chunks=chunks), **keywords)
        assert got.shape == whole.shape and got.dtype == np.uint8
        assert np.array_equal(got.compute(), whole), chunks
    assert whole.any() and not whole.all()


def test_entropy_edges_2d_and_small_components():
    x = _blobs((64, 48, 1), seed=4, dtype=np.float32)[..., 0]
    for connectivity in (4, 8):
        whole = cubekit.entropy_edges(x, min_component=4, connectivity=connectivity)
        got = cubekit.dask.entropy_edges(da.from_array(x, chunks=(10, 9)), min_component=4, connectivity=connectivity)
        assert np.array_equal(got.compute(), whole.edges)
    per_band = _blobs((40, 30, 3), seed=5, dtype=np.uint16)
    whole = cubekit.entropy_edges(per_band, fusion="none", min_component=3).edges
    got = cubekit.dask.entropy_edges(da.from_array(per_band, chunks=(9, 11, 3)), fusion="none", min_component=3)
    assert np.array_equal(got.compute(), whole)


def test_entropy_edges_refusals():
    x = da.from_array(_blobs((20, 20, 3), 5, np.float32), chunks=(10, 10, 3))
    with pytest.raises(ValueError, match="filter_each_band"):
        cubekit.dask.entropy_edges(x, min_component=5, filter_each_band=True)
    with pytest.raises(ValueError, match="principal components"):
        cubekit.dask.entropy_edges(x, fusion="pca")
    with pytest.raises(ValueError, match="'out'"):
        cubekit.dask.entropy_edges(x, out=np.zeros((20, 20), np.uint8))


def test_entropy_edges_on_a_distributed_local_cluster():
    distributed = pytest.importorskip("distributed", reason="python3-distributed not installed")
    x = _blobs((90, 70, 6), seed=6, dtype=np.int16)
    whole = cubekit.entropy_edges(x).edges
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        lazy = cubekit.dask.entropy_edges(da.from_array(x, chunks=(32, 32, 6)))
        got = client.compute(lazy).result()
    assert np.array_equal(got, whole)


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32, np.float64])
def test_pca_chunks_equal_whole(dtype):
    rng = np.random.default_rng(8)
    x = (rng.random((47, 38, 1)) * 100 * np.linspace(1, 2, 6) + rng.random((47, 38, 6)) * 20).astype(dtype)
    if np.issubdtype(dtype, np.floating):
        x[5, 6, 2] = np.nan
        x[40, 1, 0] = -np.inf
    whole = cubekit.pca(x, components=4)
    for chunks in [(16, 13, -1), (5, 7, 2), (1, 38, -1)]:
        r = cubekit.dask.pca(da.from_array(x, chunks=chunks), components=4)
        assert r.samples == whole.samples and np.array_equal(r.components, whole.components)
        assert np.array_equal(r.eigenvalues, whole.eigenvalues) and np.array_equal(r.mean, whole.mean)
        assert np.array_equal(r.scores.compute(), whole.scores, equal_nan=True), chunks


def test_pca_refusals_and_2d():
    x = da.from_array(_random((20, 16, 3), 9), chunks=(8, 8, 3))
    with pytest.raises(ValueError, match="unknown keyword"):
        cubekit.dask.pca(x, components=2, whiten=True)
    g = _random((20, 16), 10)
    r = cubekit.dask.pca(da.from_array(g, chunks=7), components=1)
    assert np.array_equal(r.scores.compute(), cubekit.pca(g, components=1).scores)


def test_pca_on_a_distributed_local_cluster():
    distributed = pytest.importorskip("distributed", reason="python3-distributed not installed")
    x = _random((90, 70, 5), seed=12)
    whole = cubekit.pca(x, components=3)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        r = cubekit.dask.pca(da.from_array(x, chunks=(32, 32, 5)), components=3)
        got = r.scores.compute()
    assert np.array_equal(r.components, whole.components) and np.array_equal(got, whole.scores)


@pytest.mark.parametrize("dtype, keywords", [(np.uint8, {"k": 5, "seed": 2, "init_sample": 500}),
                                             (np.float32, {"k": 4, "init": "random", "n_init": 2, "max_iter": 15}),
                                             (np.int16, {"k": 6, "init": "box-diagonal", "empty": "keep", "tol": 0})])
@pytest.mark.parametrize("chunks", [(17, 13, -1), (7, 9, 1), (-1, -1, -1)])
def test_kmeans_chunks_equal_whole(dtype, keywords, chunks):
    x = (np.random.default_rng(4).integers(0, 11, (47, 39, 3)) * 20).astype(dtype)
    if dtype == np.float32:
        x[5, 6, 1] = np.nan  # excluded, as in the whole call
    mask = np.ones((47, 39), bool)
    mask[::6, ::4] = False
    whole = cubekit.kmeans(x, mask=mask, **keywords)
    r = cubekit.dask.kmeans(da.from_array(x, chunks=chunks), mask=da.from_array(mask, chunks=(11, 8)), **keywords)
    assert np.array_equal(r.labels.compute(), whole.labels)
    assert np.array_equal(r.centroids.view(np.uint32), whole.centroids.view(np.uint32))
    assert np.array_equal(r.counts, whole.counts) and r.iterations == whole.iterations
    assert r.k_effective == whole.k_effective and r.winner == whole.winner
    assert r.inertia == pytest.approx(whole.inertia, rel=1e-12)


def test_kmeans_2d_explicit_and_refusals():
    x = _random((30, 26), seed=5)
    c = np.array([[100.0], [500.0], [900.0]])
    whole = cubekit.kmeans(x, init_centroids=c, max_iter=6)
    r = cubekit.dask.kmeans(da.from_array(x, chunks=(8, 8)), init_centroids=c, max_iter=6)
    assert np.array_equal(r.labels.compute(), whole.labels) and np.array_equal(r.centroids, whole.centroids)
    for bad in ({"backend": "cuda"}, {"memory_limit": "1M"}, {"device": 0}):
        with pytest.raises(ValueError, match="not taken here"):
            cubekit.dask.kmeans(da.from_array(x, chunks=(8, 8)), k=3, **bad)
    with pytest.raises(ValueError, match="mask has shape"):
        cubekit.dask.kmeans(da.from_array(x, chunks=(8, 8)), k=3, mask=np.ones((3, 3)))
    with pytest.raises(ValueError, match="k = 900"):
        cubekit.dask.kmeans(da.from_array(x, chunks=(8, 8)), k=900)


def test_kmeans_on_a_distributed_local_cluster():
    distributed = pytest.importorskip("distributed", reason="python3-distributed not installed")
    x = (np.random.default_rng(9).integers(0, 30, (80, 64, 4)) * 7).astype(np.uint16)
    whole = cubekit.kmeans(x, k=6, seed=1, max_iter=20)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        r = cubekit.dask.kmeans(da.from_array(x, chunks=(32, 32, 4)), k=6, seed=1, max_iter=20)
        got = r.labels.compute()
    assert np.array_equal(got, whole.labels) and np.array_equal(r.centroids, whole.centroids)


@pytest.mark.parametrize("shape, dtype, alpha", [((47, 39, 3), np.uint8, False), ((47, 39, 4), np.uint8, True),
                                                 ((47, 39), np.uint16, False), ((47, 39, 3), np.float32, False)])
@pytest.mark.parametrize("chunks", [(17, 13), (7, 9), (-1, -1)])
def test_quantize_chunks_equal_whole(shape, dtype, alpha, chunks):
    """The painted image, labels, palette, centroids and counts of cubekit.quantize, bit for bit, with a
    mask (excluded pixels keep their values) and alpha copied."""
    rng = np.random.default_rng(11)
    x = rng.integers(0, 250, shape).astype(dtype) if dtype != np.float32 else rng.random(shape).astype(dtype)
    mask = np.ones(shape[:2], bool)
    mask[::5, ::4] = False
    keywords = {"k": 6, "seed": 3, "init_sample": 500, "max_iter": 25, "alpha": alpha}
    whole = cubekit.quantize(x, mask=mask, **keywords)
    got = cubekit.dask.quantize(da.from_array(x, chunks=chunks + (-1,) * (len(shape) - 2)), mask=mask, **keywords)
    image = got.image.compute()
    assert image.shape == x.shape and image.dtype == x.dtype
    assert np.array_equal(image, whole.image) and np.array_equal(got.labels.compute(), whole.labels)
    assert np.array_equal(got.palette, whole.palette) and np.array_equal(got.counts, whole.counts)
    assert (got.centroids is None) == (whole.centroids is None)
    if whole.centroids is not None:
        assert np.array_equal(got.centroids, whole.centroids)
    assert got.palette_size == whole.palette_size and got.iterations == whole.iterations
    assert got.inertia == pytest.approx(whole.inertia, rel=1e-12)
    assert np.array_equal(got.fractions, whole.fractions) and got.channels == whole.channels


def test_quantize_refusals():
    x = da.from_array(np.zeros((10, 12, 3), np.uint8) + 3, chunks=(5, 6, 3))
    for bad in ({"palette": [[0, 0, 0]]}, {"dither": "floyd-steinberg"}, {"colorspace": "lab"}, {"legacy": True}):
        with pytest.raises(ValueError, match="needs the whole image"):
            cubekit.dask.quantize(x, **bad)
    with pytest.raises(ValueError, match="at least 2 channels"):
        cubekit.dask.quantize(x[:, :, :1], alpha=True)


@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.float64])
@pytest.mark.parametrize("chunks", [(13, 11, 2), (-1, -1, 1), (5, 40, 3)])
def test_zernike_chunks_equal_whole(dtype, chunks):
    x = _random((37, 41, 5), seed=30, dtype=dtype)
    for request in ({"max_order": 9}, {"order": 6, "method": "kintner"}, {"moments": [(4, 2), (7, 1)], "mapping": "circumscribed"}):
        whole = cubekit.zernike_moments(x, **request)
        got = cubekit.dask.zernike_moments(da.from_array(x, chunks=chunks), **request)
        assert got.values.shape == whole.values.shape and got.indices == whole.indices
        assert np.array_equal(got.values.compute(), whole.values), request
        assert (got.images, got.width, got.height, got.method, got.disk) == \
            (whole.images, whole.width, whole.height, whole.method, whole.disk)


def test_zernike_2d_and_refusals():
    x = _random((30, 30), seed=31, dtype=np.float64)
    got = cubekit.dask.zernike_moments(da.from_array(x, chunks=(8, 8)), moment=(5, 3))
    whole = cubekit.zernike_moments(x, moment=(5, 3))
    assert got.ndim == 2 and np.array_equal(got.values.compute(), whole.values)
    with pytest.raises(ValueError, match="'out' cannot be given"):
        cubekit.dask.zernike_moments(da.from_array(x), max_order=3, out=np.empty((1, 10), np.complex128))
    with pytest.raises(ValueError, match="expected \\(H, W\\) or \\(H, W, B\\)"):
        cubekit.dask.zernike_moments(da.zeros((2, 3, 4, 5)), max_order=3)
    with pytest.raises(ValueError):
        cubekit.dask.zernike_moments(da.from_array(x), max_order=-2)


def test_zernike_on_a_distributed_local_cluster():
    distributed = pytest.importorskip("distributed", reason="python3-distributed not installed")
    x = _random((40, 36, 4), seed=32, dtype=np.float32)
    whole = cubekit.zernike_moments(x, max_order=12)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        got = cubekit.dask.zernike_moments(da.from_array(x, chunks=(20, 36, 1)), max_order=12).values.compute()
    assert np.array_equal(got, whole.values)


def _label_image(shape, seed, values=2):
    rng = np.random.default_rng(seed)
    m = (rng.random(shape) < 0.5) * rng.integers(1, values + 1, shape)
    m[1::3] = values  # rows that cross every chunk border
    return m.astype(np.uint8)


@pytest.mark.parametrize("shape", [(53, 41), (53, 41, 3)])
def test_labels_chunks_equal_whole(shape):
    x = _label_image(shape, seed=31)
    for connectivity in (4, 8):
        whole = cubekit.label_components(x, connectivity=connectivity)
        for chunks in [(17, 13), (5, 7), (1, 41), (53, 1)]:
            c = cubekit.dask.label_components(da.from_array(x, chunks=chunks + ((2,) if len(shape) == 3 else ())),
                                              connectivity=connectivity)
            assert c.labels.dtype == np.int32 and c.labels.shape == x.shape
            assert np.array_equal(c.labels.compute(), whole.labels), chunks
            assert all(np.array_equal(a, b) for a, b in zip(c.stats, whole.stats))
        n = cubekit.dask.label(da.from_array(x, chunks=9), connectivity=connectivity, return_num=True)[1]
        assert n == (whole.counts[0] if len(shape) == 2 else whole.counts)


def test_remove_small_objects_chunks_equal_whole_and_edges_e3():
    x = _label_image((47, 39, 2), seed=32, values=1)
    for min_size in (0, 2, 7, 60):
        whole = cubekit.remove_small_objects(x, min_size=min_size)
        got = cubekit.dask.remove_small_objects(da.from_array(x, chunks=(10, 9, 2)), min_size=min_size)
        assert got.dtype == np.uint8 and np.array_equal(got.compute(), whole), min_size
    b = x[..., 0] > 0
    assert cubekit.dask.remove_small_objects(da.from_array(b, chunks=8), min_size=4).compute().dtype == bool
    # The edge detector's E3 on a chunked map: the whole detector's result.
    cube = _blobs((64, 48, 3), seed=33, dtype=np.float32)
    edges = cubekit.dask.entropy_edges(da.from_array(cube, chunks=(20, 20, 3)))
    cleaned = cubekit.dask.remove_small_objects(edges, min_size=4, connectivity=8)
    assert np.array_equal(cleaned.compute(), cubekit.entropy_edges(cube, min_component=4).edges)
    with pytest.raises(ValueError, match="min_size"):
        cubekit.dask.remove_small_objects(da.from_array(b, chunks=8), min_size=-1)
    with pytest.raises(ValueError, match="unknown keyword"):
        cubekit.dask.label(da.from_array(b, chunks=8), min_size=3)


def test_labels_on_a_distributed_local_cluster():
    distributed = pytest.importorskip("distributed", reason="python3-distributed not installed")
    x = _label_image((90, 70), seed=34)
    whole = cubekit.label_components(x)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        c = cubekit.dask.label_components(da.from_array(x, chunks=(32, 32)))
        got = client.compute(c.labels).result()
    assert np.array_equal(got, whole.labels)


def _reliefs(shape, seed):
    rng = np.random.default_rng(seed)
    x = np.mgrid[0:shape[0], 0:shape[1]][1]
    return {"u8 ties": rng.integers(0, 8, shape).astype(np.uint8), "f32": rng.random(shape).astype(np.float32),
            "staircase": (x // 9).astype(np.uint16), "constant": np.full(shape, 3, np.int16)}


@pytest.mark.parametrize("chunks", [(16, 16), (7, 5), (9, 2), (61, 47)])
def test_watershed_chunks_equal_whole(chunks):
    mask = np.random.default_rng(40).random((61, 47)) > 0.15
    for name, x in _reliefs((61, 47), seed=41).items():
        for connectivity in (4, 8):
            whole, n = cubekit.watershed(x, connectivity=connectivity, return_regions=True)
            labels, m = cubekit.dask.watershed(da.from_array(x, chunks=chunks), connectivity=connectivity, return_regions=True)
            assert labels.dtype == np.int32 and labels.chunks == da.from_array(x, chunks=chunks).chunks
            assert np.array_equal(labels.compute(), whole) and m == n, (name, connectivity)
            got = cubekit.dask.watershed(da.from_array(x, chunks=chunks), connectivity=connectivity,
                                         mask=da.from_array(mask.astype(np.float32), chunks=(20, 20)))
            assert np.array_equal(got.compute(), cubekit.watershed(x, connectivity=connectivity, mask=mask)), (name, "mask")


def test_watershed_real_gradient_2d_views_and_refusals():
    g = cubekit.rcmg(cubekit.read(cubekit.data_path("samson"))[0])
    assert np.array_equal(cubekit.dask.watershed(da.from_array(g[..., None], chunks=(30, 20, 1))).compute(),
                          cubekit.watershed(g))
    with pytest.raises(ValueError, match="unknown keyword"):
        cubekit.dask.watershed(da.from_array(g, chunks=20), levels=4)
    with pytest.raises(ValueError, match="connectivity"):
        cubekit.dask.watershed(da.from_array(g, chunks=20), connectivity=6)
    with pytest.raises(ValueError, match="mask has shape"):
        cubekit.dask.watershed(da.from_array(g, chunks=20), mask=np.ones((3, 3)))
    with pytest.raises(ValueError, match="expected \\(H, W\\)"):
        cubekit.dask.watershed(da.from_array(np.zeros((4, 4, 2), np.float32), chunks=2))


def test_watershed_on_a_distributed_local_cluster():
    distributed = pytest.importorskip("distributed", reason="python3-distributed not installed")
    x = _reliefs((80, 70), seed=42)["u8 ties"]
    whole = cubekit.watershed(x)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        labels = cubekit.dask.watershed(da.from_array(x, chunks=(25, 30)))
        got = client.compute(labels).result()
    assert np.array_equal(got, whole)


@pytest.mark.parametrize("keywords", [{}, {"connectivity": 4}, {"rcmg_connectivity": 4, "reject": 0},
                                      {"out_type": "f64"}])
def test_segment_chunks_equal_whole(keywords):
    x = (np.random.default_rng(21).integers(0, 6, (53, 47, 3)) * 10).astype(np.uint16)  # plateaus across chunks
    whole = cubekit.segment(x, statistics=False, **keywords)
    mask = np.ones((53, 47), bool)
    mask[20:24, :] = False
    masked = cubekit.segment(x, statistics=False, mask=mask, **keywords)
    for chunks in ((17, 13, 3), (9, 47, 2)):
        got = cubekit.dask.segment(da.from_array(x, chunks=chunks), **keywords)
        assert np.array_equal(got.gradient.compute(), whole.gradient)
        assert np.array_equal(got.labels.compute(), whole.labels) and got.count == whole.count
        with_mask = cubekit.dask.segment(da.from_array(x, chunks=chunks), mask=mask, **keywords)
        assert np.array_equal(with_mask.labels.compute(), masked.labels) and with_mask.count == masked.count
    table = cubekit.dask.segment(da.from_array(x, chunks=(17, 13, 3)), statistics=True, **keywords).regions
    assert np.array_equal(table, cubekit.segment(x, **keywords).regions)


def _same_table(a, b):
    """Region tables equal field by field, bit for bit (NaN mean gradients in the same rows)."""
    return a.dtype == b.dtype and all(np.array_equal(a[n], b[n], equal_nan=a[n].dtype.kind == "f") for n in a.dtype.names)


def test_region_statistics_chunks_equal_whole():
    rng = np.random.default_rng(22)
    labels = rng.integers(0, 12, (41, 37)).astype(np.int32)
    labels[5:9, :] = 0
    # Magnitudes 1e12 apart: the float64 sums round, so only the whole call's order of additions matches.
    cube = (rng.random((41, 37, 4)) * np.where(rng.random((41, 37, 4)) < 0.3, 1e12, 1)).astype(np.float32)
    gradient = rng.random((41, 37)).astype(np.float32)
    whole = cubekit.region_statistics(labels, cube, gradient)
    for lc, cc in (((7, 37), (41, 11, 4)), ((13, 10), (5, 37, 2)), ((41, 37), (41, 37, 4))):
        got = cubekit.dask.region_statistics(da.from_array(labels, chunks=lc), da.from_array(cube, chunks=cc),
                                             da.from_array(gradient, chunks=(9, 9)))
        assert got.dtype == whole.dtype and np.array_equal(got, whole), lc
    alone = cubekit.dask.region_statistics(da.from_array(labels, chunks=(7, 9)))
    assert _same_table(alone, cubekit.region_statistics(labels))  # integer columns; NaN mean gradient
    two_d = cubekit.dask.region_statistics(da.from_array(labels, chunks=(7, 9)), da.from_array(gradient, chunks=(4, 37)))
    assert _same_table(two_d, cubekit.region_statistics(labels, gradient))
    with pytest.raises(ValueError, match="shape"):
        cubekit.dask.region_statistics(da.from_array(labels), da.from_array(cube[:40]))


@pytest.mark.parametrize("classifier", ["svm", "sam", "mindist"])
def test_predict_chunks_equal_whole(classifier):
    rng = np.random.default_rng(23)
    k = (np.arange(30)[None, :] >= 15).astype(int) + 2 * (np.arange(26)[:, None] >= 13)
    cube = (np.array([[10, 20, 30], [30, 20, 10], [25, 60, 25], [60, 10, 60]])[k] + 3 * rng.standard_normal((26, 30, 3)))
    cube = cube.astype(np.float32)
    cube[4, 5, 1] = np.nan  # a non-finite band: class 0 in every chunk layout
    train = np.where((np.arange(26)[:, None] + np.arange(30)[None, :]) % 5 == 0, np.array([1, 2, 4, 9])[k], 0)
    model = cubekit.train_classifier(cube, train, classifier=classifier, svm_c=10, svm_gamma=0.5)
    whole = model.predict(cube)
    assert whole[4, 5] == 0 and len(np.unique(whole)) == 5
    for chunks in ((7, 9, 3), (26, 4, 1), (5, 30, 2)):
        got = cubekit.dask.predict(model, da.from_array(cube, chunks=chunks))
        assert got.dtype == np.int32 and got.shape == (26, 30)
        assert np.array_equal(got.compute(), whole), chunks
    with pytest.raises(ValueError, match="bands"):
        cubekit.dask.predict(model, da.from_array(cube[:, :, :2]))
    with pytest.raises(TypeError, match="unexpected"):
        cubekit.dask.predict(model, da.from_array(cube), tau=1)


def test_region_vote_chunks_equal_whole():
    rng = np.random.default_rng(25)
    regions = rng.integers(0, 40, (33, 29)).astype(np.int32)   # region 0: kept as it is
    classes = rng.integers(0, 4, (33, 29)).astype(np.int32)    # ties, no voters and thin winners occur
    classes[regions == 7] = 0                                  # a region without voters
    for tau in (0.0, 0.3, 0.6):
        whole, stats = cubekit.region_vote(regions, classes, tau=tau, return_stats=True)
        assert stats["ties"] > 0 and stats["no_voters"] > 0
        assert stats["relabelled"] > 0 if tau < 0.5 else stats["below_tau"] > 0
        for rc, cc in (((8, 7), (8, 7)), ((33, 5), (4, 29)), ((33, 29), (11, 13))):
            got, got_stats = cubekit.dask.region_vote(da.from_array(regions, chunks=rc), da.from_array(classes, chunks=cc),
                                                      tau=tau, return_stats=True)
            assert got.dtype == np.int32 and np.array_equal(got.compute(), whole), (tau, rc)
            assert got_stats == stats, (tau, rc)
    with pytest.raises(ValueError, match="tau"):
        cubekit.dask.region_vote(da.from_array(regions), da.from_array(classes), tau=2)
    with pytest.raises(ValueError, match="shape"):
        cubekit.dask.region_vote(da.from_array(regions), da.from_array(classes[:5]))


@pytest.mark.parametrize("classifier", ["svm", "sam"])
def test_classify_chunks_equal_whole(classifier):
    x = (np.random.default_rng(26).integers(0, 6, (37, 41, 3)) * 10).astype(np.float32)
    x[:, 20:] += 40
    train = np.zeros((37, 41), np.int32)
    train[::6, 3:15:4] = 1
    train[::6, 25:38:4] = 2
    keywords = {"svm_c": 10, "svm_gamma": 0.5} if classifier == "svm" else {}
    model = cubekit.train_classifier(x, train, classifier=classifier, **keywords)
    for segment in (None, "watershed"):
        whole = cubekit.classify(x, train, classifier=classifier, segment=segment, tau=0.2, **keywords)
        got = cubekit.dask.classify(model, da.from_array(x, chunks=(13, 11, 3)), segment=segment, tau=0.2)
        assert np.array_equal(got["pixelwise"].compute(), whole["pixelwise"])
        assert np.array_equal(got["classes"].compute(), whole["classes"]), segment
        if segment:
            assert np.array_equal(got["regions"].compute(), whole["regions"]) and got["vote"] == whole["vote"]
        else:
            assert got["regions"] is None and got["vote"] is None


def _screening_cube(seed):
    """Bands that test the screening: band 1 constant everywhere (dropped), band 3 constant over the
    first rows only (kept: a chunk screened on its own would drop it)."""
    x = np.random.default_rng(seed).random((31, 27, 6))
    x[:, :, 1] = 2.5
    x[:12, :, 3] = 7.0
    return x


def test_background_stats_and_global_detectors_chunks_equal_whole():
    rng = np.random.default_rng(28)
    # Bands 1e6 apart (the scene's fixed point matters), an all-zero band, a NaN: screening and sums
    # decided over the whole array.
    x = (rng.normal(size=(40, 30, 6)) * np.array([1, 1e6, 1, 1, 3, 1])).astype(np.float32)
    x[:, :, 3] = 0
    x[5, 7, 2] = np.nan
    mask = rng.random((40, 30)) > 0.3
    t = x[9, 9].astype(np.float64) + 0.5
    for chunks in ((7, 9, 6), (40, 30, 6), (13, 4, 2)):
        cube = da.from_array(x, chunks=chunks)
        for ddof in (0, 1):
            for m in (None, mask):
                got = cubekit.dask.background_stats(cube, None if m is None else da.from_array(m, chunks=(11, 11)), ddof=ddof)
                want = cubekit.background_stats(x, m, ddof=ddof)
                assert got["dropped"] == want["dropped"] and got["samples"] == want["samples"], chunks
                for key in ("kept_bands", "mean", "covariance", "eigenvalues", "eigenvectors"):
                    assert np.array_equal(got[key], want[key]), (key, chunks, ddof)
        # Without a background the global detectors fit over the whole array: the whole call's scores.
        assert np.array_equal(cubekit.dask.rx(cube).compute(), cubekit.rx(x), equal_nan=True), chunks
        assert np.array_equal(cubekit.dask.ace(cube, t, ddof=1).compute(), cubekit.ace(x, t, ddof=1), equal_nan=True)
    with pytest.raises(ValueError, match="mask"):
        cubekit.dask.background_stats(da.from_array(x), da.from_array(mask[:5]))


def test_local_rx_and_sam_chunks_equal_whole():
    x = _screening_cube(27)
    whole = cubekit.rx(x, window=(3, 7))
    for chunks in ((8, 9, 6), (31, 5, 3), (11, 27, 6)):
        got = cubekit.dask.rx(da.from_array(x, chunks=chunks), window=(3, 7))
        assert got.dtype == np.float64 and np.array_equal(got.compute(), whole, equal_nan=True), chunks
    assert np.array_equal(cubekit.dask.rx(da.from_array(x, chunks=(8, 9, 6)), window=(3, 9), keep_all_bands=True).compute(),
                          cubekit.rx(x, window=(3, 9), keep_all_bands=True), equal_nan=True)
    x[5, 6, 0] = np.nan  # band 0 dropped everywhere
    t = x[20, 20]
    for chunks in ((8, 9, 6), (31, 5, 3)):
        assert np.array_equal(cubekit.dask.rx(da.from_array(x, chunks=chunks), window=(3, 7)).compute(),
                              cubekit.rx(x, window=(3, 7)), equal_nan=True), chunks
        got = cubekit.dask.sam(da.from_array(x, chunks=chunks), t)
        assert np.array_equal(got.compute(), cubekit.sam(x, t), equal_nan=True), chunks
    with pytest.raises(ValueError, match="background"):
        cubekit.dask.rx(da.from_array(x), window=(3, 7), background=cubekit.background_stats(x))
    with pytest.raises(ValueError, match="target"):
        cubekit.dask.sam(da.from_array(x), t[:4])


def test_predict_on_a_distributed_cluster():
    """The model travels to the workers pickled: the same map from a LocalCluster."""
    distributed = pytest.importorskip("distributed")
    rng = np.random.default_rng(24)
    cube = rng.random((20, 16, 4)).astype(np.float32)
    train = np.zeros((20, 16), np.int32)
    train[:10, :] = 1
    train[10:, :] = 2
    cube[10:] += 1
    model = cubekit.train_classifier(cube, train, classifier="svm", svm_c=10, svm_gamma=1)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        got = client.compute(cubekit.dask.predict(model, da.from_array(cube, chunks=(6, 7, 4)))).result()
    assert np.array_equal(got, model.predict(cube))


def test_segment_refusals():
    x = da.from_array(np.ones((10, 12, 2), np.float32), chunks=(5, 6, 2))
    for bad in ({"levels": 8}, {"h_min": 2.0}, {"min_area": 5}, {"markers": np.ones((10, 12), np.int32)}):
        with pytest.raises(ValueError, match="needs the whole cube"):
            cubekit.dask.segment(x, **bad)


def test_docstring_examples_run():
    import doctest
    for f in (cubekit.dask, cubekit.dask.label_components, cubekit.dask.zernike_moments, cubekit.dask.watershed,
              cubekit.dask.quantize, cubekit.dask.kmeans, cubekit.dask.segment, cubekit.dask.detect_multires, cubekit.dask.baseline_edges,
              cubekit.dask.region_statistics, cubekit.dask.predict, cubekit.dask.region_vote, cubekit.dask.classify,
              cubekit.dask.rx, cubekit.dask.sam):
        for t in doctest.DocTestFinder(recurse=False).find(f, globs={"cubekit": cubekit}):
            runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
            runner.run(t)
            assert runner.summarize(verbose=False).failed == 0, getattr(f, "__name__", f)
