"""cubekit.entropy_edges, baseline_edges, canny, edge_score, quantize_to_u8 and
entropy_band_thresholds against the CLI (edges, edges-baseline, edges-score: the same library
code, so exactly), on every dtype and non-contiguous inputs; device arrays on the GPU."""
import doctest
import json
import pickle

import numpy as np
import pytest

import cubekit
from conftest import cupy_or_skip, gpu, torch_cuda_or_skip

SAMSON = cubekit.data_path("samson")
CHELSEA = cubekit.data_path("chelsea")


def cli_edges(cli, tmp_path, src, *args, vote_count=False):
    """`cubekit edges` with .npy/.json outputs: (edges, thresholds file, --json summary, vote count)."""
    out, th, vc = tmp_path / "e.npy", tmp_path / "t.json", tmp_path / "vc.npy"
    extra = ["--vote-count-out", vc] if vote_count else []
    r = cli("edges", src, out, "--backend", "cpu", "--thresholds-out", th, "--json", "--quiet", *args, *extra)
    return np.load(out), json.loads(th.read_text()), json.loads(r.stdout), np.load(vc) if vote_count else None


def assert_edges_match_cli(r, cli_result):
    edges, thresholds, summary, vote_count = cli_result
    assert r.edges.dtype == np.uint8 and r.edges.shape == edges.shape
    np.testing.assert_array_equal(r.edges, edges)
    assert r.thresholds_file() == thresholds
    assert r.parameters == summary["parameters"]
    assert r.edge_pixels == summary["edge_pixels"] and r.edge_fraction == summary["edge_fraction"]
    for key in ("votes_needed", "pca_components_used", "explained_variance_ratio"):
        assert getattr(r, key) == summary.get(key), key
    if vote_count is not None:
        assert r.vote_count.dtype == np.uint16
        np.testing.assert_array_equal(r.vote_count, vote_count)
    assert 0 < r.edge_pixels < r.edges.size  # never a trivial map


@pytest.fixture(scope="module")
def cube():
    return cubekit.read(SAMSON)[0]


@pytest.fixture(scope="module")
def photo():
    return cubekit.imread(CHELSEA)


@pytest.mark.parametrize("args", [
    {},
    {"min_component": 5},
    {"fusion": "none", "min_component": 3, "connectivity": 4},
    {"fusion": "mean"},
    {"fusion": "pca", "pca_components": 2},
    {"fusion": "vote-binary", "vote_percent": 40.0},
    {"fusion": "threshold-mean", "q": 1.0},
    {"fusion": "pca-vote-edges", "min_component": 4, "filter_each_band": True},
    {"fusion": "pca-vote-binary", "quantize": "global"},
])
def test_entropy_edges_match_cli_on_samson(cli, tmp_path, cube, args):
    flags = []
    for k, v in args.items():
        flag = "--" + k.replace("_", "-")
        flags += [flag] if v is True else [flag, v]
    vote = args.get("fusion", "vote-edges") in ("vote-edges", "vote-binary", "pca-vote-edges", "pca-vote-binary")
    r = cubekit.entropy_edges(cube, **args)
    assert_edges_match_cli(r, cli_edges(cli, tmp_path, SAMSON, *flags, vote_count=vote))
    assert (r.vote_count is not None) == vote


def test_entropy_edges_match_cli_on_the_photo(cli, tmp_path, photo):
    r = cubekit.entropy_edges(photo, min_component=8)
    assert r.edges.shape == (300, 451) and r.parameters["fusion"] == "vote-edges"
    assert_edges_match_cli(r, cli_edges(cli, tmp_path, CHELSEA, "--min-component", 8, vote_count=True))


def test_per_band_maps_match_cli_per_band_out(cli, tmp_path, cube):
    r = cubekit.entropy_edges(cube[:, :, :10], keep_band_edges=True, keep_binary=True)
    cli("edges", SAMSON, "--bands", "0-9", "--per-band-out", tmp_path / "maps", "--backend", "cpu", "--quiet")
    assert r.band_edges.shape == (95, 95, 10) and r.binary.shape == (95, 95, 10)
    for b in range(10):
        png = cubekit.imread(tmp_path / "maps" / f"band_{b:03d}.png")
        np.testing.assert_array_equal(r.band_edges[:, :, b] * 255, png)
    # fusion none gives the same per-band maps, and each one follows the 3x3 rule on its binary image
    none = cubekit.entropy_edges(cube[:, :, :10], fusion="none", keep_binary=True)
    np.testing.assert_array_equal(none.edges, r.band_edges)
    np.testing.assert_array_equal(none.binary, r.binary)
    f = none.binary.astype(np.int32)
    same = sum((np.roll(np.roll(f, dy, 0), dx, 1) == f) for dy in (-1, 0, 1) for dx in (-1, 0, 1))
    rule = (same <= 6).astype(np.uint8)
    rule[0, :], rule[-1, :], rule[:, 0], rule[:, -1] = 0, 0, 0, 0
    np.testing.assert_array_equal(none.edges, rule)


def test_band_thresholds_match_cli(cli, tmp_path, cube):
    t = cubekit.entropy_band_thresholds(cube, q=0.7)
    _, thresholds, _, _ = cli_edges(cli, tmp_path, SAMSON, "--q", 0.7)
    assert t == thresholds["bands"] and len(t) == 156
    assert t == cubekit.entropy_edges(cube, q=0.7).thresholds


def test_quantize_to_u8_is_the_e1_formula(rng):
    a = rng.normal(size=(30, 20, 4)) * 100
    a[3, 4, 1] = np.nan
    lo, hi = np.nanmin(a, axis=(0, 1)), np.nanmax(a, axis=(0, 1))
    expected = np.floor((a - lo) * 255 / (hi - lo) + 0.5)
    expected = np.where(np.isnan(a), 0, expected).astype(np.uint8)
    q = cubekit.quantize_to_u8(a)
    assert q.shape == a.shape and q.dtype == np.uint8
    np.testing.assert_array_equal(q, expected)
    g = cubekit.quantize_to_u8(a, quantize="global")
    glo, ghi = np.nanmin(a), np.nanmax(a)
    np.testing.assert_array_equal(g, np.where(np.isnan(a), 0, np.floor((a - glo) * 255 / (ghi - glo) + 0.5)))
    u8 = rng.integers(0, 256, size=(5, 6), dtype=np.uint8)
    np.testing.assert_array_equal(cubekit.quantize_to_u8(u8), u8)  # uint8 as it is
    out = np.zeros(a.shape, np.uint8)
    assert cubekit.quantize_to_u8(a, out=out) is out
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("method", ["canny", "sobel", "prewitt", "roberts", "log"])
def test_baseline_edges_match_cli_on_the_photo(cli, tmp_path, photo, method):
    r = cubekit.baseline_edges(photo, method=method)
    out = tmp_path / "b.npy"
    summary = json.loads(cli("edges-baseline", CHELSEA, out, "--method", method, "--backend", "cpu", "--json",
                             "--quiet").stdout)
    assert r.edges.shape == (300, 451, 3) and r.edges.dtype == np.uint8
    np.testing.assert_array_equal(r.edges, np.load(out))
    assert r.bands == summary["bands"]
    assert r.parameters == summary["parameters"]
    assert r.edge_pixels == summary["edge_pixels"] > 0


def test_baseline_options_match_cli_on_samson(cli, tmp_path, cube):
    r = cubekit.baseline_edges(cube[:, :, 40:43], method="sobel", threshold=0.05, thinning=False)
    out = tmp_path / "b.npy"
    summary = json.loads(cli("edges-baseline", SAMSON, out, "--bands", "40-42", "--method", "sobel",
                             "--threshold", 0.05, "--no-thinning", "--backend", "cpu", "--json", "--quiet").stdout)
    np.testing.assert_array_equal(r.edges, np.load(out))
    assert r.parameters == summary["parameters"] and r.parameters["thinning"] is False
    assert [b["threshold"] for b in r.bands] == [b["threshold"] for b in summary["bands"]]
    c = cubekit.baseline_edges(cube[:, :, 40], sigma=2.0, threshold=0.3, low_ratio=0.5)
    summary = json.loads(cli("edges-baseline", SAMSON, out, "--bands", "40", "--sigma", 2, "--threshold", 0.3,
                             "--low-ratio", 0.5, "--backend", "cpu", "--json", "--quiet").stdout)
    assert c.edges.shape == (95, 95)
    np.testing.assert_array_equal(c.edges, np.load(out))
    assert c.bands == summary["bands"] and c.parameters == summary["parameters"]
    np.testing.assert_array_equal(cubekit.canny(cube[:, :, 40], sigma=2.0, threshold=0.3, low_ratio=0.5), c.edges)


@pytest.mark.parametrize("tolerance", [0.0, 1.0, 2.5])
def test_edge_score_matches_cli(cli, tmp_path, photo, tolerance):
    pred = cubekit.canny(photo[:, :, 1])
    ref = cubekit.baseline_edges(photo[:, :, 1], method="sobel").edges
    np.save(tmp_path / "p.npy", pred)
    np.save(tmp_path / "r.npy", ref)
    expected = json.loads(cli("edges-score", tmp_path / "p.npy", tmp_path / "r.npy", "--tolerance", tolerance).stdout)
    expected.pop("timings_ms")  # the process's own timings, not a score
    s = cubekit.edge_score(pred, ref, tolerance=tolerance)
    assert vars(s) == expected
    assert 0 < s.precision < 1 and s.predicted == int(pred.sum())
    # any dtype and strides: nonzero = edge
    assert cubekit.edge_score(np.asfortranarray(pred * 7).astype(np.float32), ref.astype(bool),
                              tolerance=tolerance) == s


def test_edge_score_empty_maps():
    z = np.zeros((5, 5), np.uint8)
    one = z.copy()
    one[2, 2] = 1
    assert cubekit.edge_score(z, z).f == 1.0
    assert cubekit.edge_score(one, z).fom == 0.0


DTYPES = ["bool", "uint8", "uint16", "uint32", "int8", "int16", "int32", "float16", "float32", "float64"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype(dtype, rng):
    a = rng.integers(0, 2 if dtype == "bool" else 100, size=(24, 21, 3)).astype(dtype)
    # E2 is invariant to strictly increasing grey maps, so u8 "as it is" equals the min-max scaling
    expected = cubekit.entropy_edges(a.astype(np.float64), fusion="none", min_component=2)
    r = cubekit.entropy_edges(a, fusion="none", min_component=2)
    np.testing.assert_array_equal(r.edges, expected.edges)
    assert r.edges.any()
    # the baselines start from E1, so they equal the baseline of the quantised bytes
    np.testing.assert_array_equal(cubekit.baseline_edges(a, method="sobel").edges,
                                  cubekit.baseline_edges(cubekit.quantize_to_u8(a), method="sobel").edges)


def test_non_contiguous_views_give_the_copy_result(cube):
    a = cube[:, :, :12].astype(np.float32)
    views = (a[5:80, 3:90, 1:9], a[::2, ::-1, ::3], np.asfortranarray(a), a.transpose(1, 0, 2))
    for view in views:
        copy = np.ascontiguousarray(view)
        for fusion in ("none", "vote-edges", "pca"):
            r, c = cubekit.entropy_edges(view, fusion=fusion), cubekit.entropy_edges(copy, fusion=fusion)
            np.testing.assert_array_equal(r.edges, c.edges)
            assert r.thresholds == c.thresholds
        np.testing.assert_array_equal(cubekit.baseline_edges(view).edges, cubekit.baseline_edges(copy).edges)
        np.testing.assert_array_equal(cubekit.quantize_to_u8(view), cubekit.quantize_to_u8(copy))


@pytest.mark.parametrize("fusion", ["none", "mean", "pca", "vote-edges", "vote-binary", "threshold-mean",
                                    "pca-vote-edges", "pca-vote-binary"])
def test_out_and_kept_outputs_match_the_host_result(cube, fusion):
    """The into path (a caller's out; the same allocation as for device input) = the host path."""
    a = cube[:, :, :20]
    kw = dict(fusion=fusion, keep_band_edges=True, keep_binary=True, min_component=3)
    r = cubekit.entropy_edges(a, **kw)
    out = np.full(r.edges.shape, 7, np.uint8)
    o = cubekit.entropy_edges(a, out=out, **kw)
    assert o.edges is out
    for name in ("edges", "vote_count", "band_edges", "binary"):
        mine, host = getattr(o, name), getattr(r, name)
        assert (mine is None) == (host is None), name
        if host is not None:
            assert mine.shape == host.shape, name
            np.testing.assert_array_equal(mine, host, err_msg=name)
    assert o.thresholds_file() == r.thresholds_file() and o.votes_needed == r.votes_needed
    assert r.binary is not None and (r.band_edges is not None) == ("vote" in fusion)


def test_strided_outputs(cube):
    a = cube[:, :, :20]
    window = np.zeros((100, 100, 20), np.uint8)[2:97, 3:98]  # a strided output
    np.testing.assert_array_equal(cubekit.entropy_edges(a, fusion="none", out=window).edges,
                                  cubekit.entropy_edges(a, fusion="none").edges)
    b = np.zeros((95, 95, 20), np.uint8)
    assert cubekit.baseline_edges(a, out=b).edges is b
    np.testing.assert_array_equal(b, cubekit.baseline_edges(a).edges)


def test_fusion_none_keeps_the_input_shape(cube):
    assert cubekit.entropy_edges(cube[:, :, 7]).edges.shape == (95, 95)
    assert cubekit.entropy_edges(cube[:, :, 7:8]).edges.shape == (95, 95, 1)
    assert cubekit.entropy_edges(cube[:, :, 7:8], fusion="mean").edges.shape == (95, 95)


def test_bad_input_raises_named_errors(cube):
    a = cube[:, :, :4]
    with pytest.raises(ValueError, match="fusion"):
        cubekit.entropy_edges(a, fusion="median")
    with pytest.raises(ValueError, match="vote_percent"):
        cubekit.entropy_edges(a, vote_percent=100)
    with pytest.raises(ValueError, match="connectivity = 6; expected 4 or 8"):
        cubekit.entropy_edges(a, connectivity=6)
    with pytest.raises(ValueError, match="min_component"):
        cubekit.entropy_edges(a, min_component=-1)
    with pytest.raises(ValueError, match="q = 0"):
        cubekit.entropy_edges(a, q=0)
    with pytest.raises(ValueError, match="keep_binary"):
        cubekit.entropy_edges(a, keep_binary="yes")
    with pytest.raises(TypeError, match="unexpected keyword argument 'threshold'"):
        cubekit.entropy_edges(a, threshold=3)
    with pytest.raises(TypeError, match="unexpected keyword argument 'fusion'"):
        cubekit.entropy_band_thresholds(a, fusion="mean")
    with pytest.raises(ValueError, match="int64"):
        cubekit.entropy_edges(a.astype(np.int64))
    with pytest.raises(ValueError, match="dimensions"):
        cubekit.entropy_edges(np.ones(5))
    with pytest.raises(ValueError, match="out is"):
        cubekit.entropy_edges(a, out=np.zeros((95, 95, 4), np.uint8))
    with pytest.raises(ValueError, match="method"):
        cubekit.baseline_edges(a, method="frei-chen")
    with pytest.raises(ValueError, match="sigma"):
        cubekit.baseline_edges(a, method="sobel", sigma=2)
    with pytest.raises(ValueError, match="low_ratio"):
        cubekit.baseline_edges(a, low_ratio=1.5)
    with pytest.raises(TypeError, match="method"):
        cubekit.canny(a, method="sobel")
    m = np.zeros((8, 8), np.uint8)
    with pytest.raises(ValueError, match="tolerance"):
        cubekit.edge_score(m, m, tolerance=-1)
    with pytest.raises(ValueError, match="same size"):
        cubekit.edge_score(m, np.zeros((8, 9), np.uint8))
    with pytest.raises(ValueError, match="reference has 3 bands"):
        cubekit.edge_score(m, np.zeros((8, 8, 3), np.uint8))


def test_results_pickle(cube, photo):
    r = cubekit.entropy_edges(cube, fusion="pca-vote-edges", keep_band_edges=True)
    back = pickle.loads(pickle.dumps(r))
    np.testing.assert_array_equal(back.edges, r.edges)
    np.testing.assert_array_equal(back.band_edges, r.band_edges)
    assert back.thresholds_file() == r.thresholds_file() and back.explained_variance_ratio == r.explained_variance_ratio
    b = cubekit.baseline_edges(photo)
    bb = pickle.loads(pickle.dumps(b))
    assert bb.bands == b.bands and bb.parameters == b.parameters
    s = cubekit.edge_score(b.edges[:, :, 0], b.edges[:, :, 1])
    assert pickle.loads(pickle.dumps(s)) == s


def test_docstring_examples_run():
    for f in (cubekit.entropy_edges, cubekit.entropy_band_thresholds, cubekit.quantize_to_u8, cubekit.baseline_edges,
              cubekit.canny, cubekit.edge_score):
        for t in doctest.DocTestFinder().find(f, globs={"cubekit": cubekit}):
            runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
            runner.run(t)
            assert runner.summarize(verbose=False).failed == 0, f.__name__


# ---- GPU ------------------------------------------------------------------------------------------

FUSIONS = ["none", "mean", "pca", "vote-edges", "vote-binary", "threshold-mean", "pca-vote-edges", "pca-vote-binary"]


def assert_same_edges(device_result, host_result, to_numpy):
    for name in ("edges", "vote_count", "band_edges", "binary"):
        d, h = getattr(device_result, name), getattr(host_result, name)
        assert (d is None) == (h is None), name
        if h is not None:
            np.testing.assert_array_equal(to_numpy(d), h, err_msg=name)
    assert device_result.thresholds_file() == host_result.thresholds_file()
    assert device_result.votes_needed == host_result.votes_needed


@gpu
@pytest.mark.parametrize("fusion", FUSIONS)
def test_numpy_with_backend_cuda_matches_cpu(cube, fusion):
    kw = dict(fusion=fusion, min_component=3, keep_band_edges=True, keep_binary=True)
    assert_same_edges(cubekit.entropy_edges(cube, backend="cuda", **kw), cubekit.entropy_edges(cube, **kw), np.asarray)


@gpu
@pytest.mark.parametrize("fusion", FUSIONS)
def test_cupy_in_cupy_out(cube, fusion):
    cp = cupy_or_skip()
    kw = dict(fusion=fusion, min_component=3, keep_band_edges=True, keep_binary=True)
    d = cubekit.entropy_edges(cp.asarray(cube), **kw)
    assert isinstance(d.edges, cp.ndarray)
    assert_same_edges(d, cubekit.entropy_edges(cube, **kw), cp.asnumpy)
    out = cp.full((95, 95), 9, cp.uint8)
    assert cubekit.entropy_edges(cp.asarray(cube), out=out).edges is out
    np.testing.assert_array_equal(cp.asnumpy(out), cubekit.entropy_edges(cube).edges)
    q = cubekit.quantize_to_u8(cp.asarray(cube)[5:60, ::2])
    assert isinstance(q, cp.ndarray)
    np.testing.assert_array_equal(cp.asnumpy(q), cubekit.quantize_to_u8(cube[5:60, ::2]))
    t = cubekit.entropy_band_thresholds(cp.asarray(cube))
    assert t == cubekit.entropy_band_thresholds(cube)


@gpu
@pytest.mark.parametrize("method", ["canny", "sobel", "prewitt", "roberts", "log"])
def test_cupy_baselines_match_cpu_up_to_near_threshold_pixels(photo, method):
    cp = cupy_or_skip()
    h = cubekit.baseline_edges(photo, method=method)
    d = cubekit.baseline_edges(cp.asarray(photo), method=method)
    assert isinstance(d.edges, cp.ndarray)
    np.testing.assert_allclose(d.thresholds, h.thresholds, rtol=1e-12)
    differing = int((cp.asnumpy(d.edges) != h.edges).sum())
    assert differing <= 1e-4 * h.edges.size, differing
    s = cubekit.edge_score(d.edges[:, :, 0], h.edges[:, :, 0])  # device maps are brought to the host
    assert s.f > 0.999


@gpu
def test_torch_in_torch_out_on_its_stream(cube):
    torch = torch_cuda_or_skip()
    t = torch.as_tensor(cube.astype(np.float32), device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        r = cubekit.entropy_edges(t, min_component=2)
        b = cubekit.baseline_edges(t[:, :, 10], method="log")
    s.synchronize()
    assert isinstance(r.edges, torch.Tensor) and r.edges.is_cuda and r.vote_count.dtype == torch.uint16
    assert_same_edges(r, cubekit.entropy_edges(cube.astype(np.float32), min_component=2), lambda x: x.cpu().numpy())
    h = cubekit.baseline_edges(cube[:, :, 10].astype(np.float32), method="log")
    assert int((b.edges.cpu().numpy() != h.edges).sum()) <= 2


def test_entropy_edges_reports_progress_by_stage(cube):
    seen = []
    cubekit.entropy_edges(cube, min_component=3, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]
    seen.clear()
    cubekit.entropy_edges(cube[:, :, 10], progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 3), (2, 3), (3, 3)]
