"""cubekit.watershed, watershed_boundary, segment and region_statistics: equal to the CLI
(`cubekit watershed` / `cubekit segment`, the same library code) and to small known cases;
scikit-image's argument names; dtypes, strides, volumes, errors; device arrays on the GPU."""
import doctest
import functools
import inspect
import json
import pickle

import numpy as np
import pytest

import cubekit
from conftest import cupy_or_skip, gpu, torch_cuda_or_skip

SAMSON = cubekit.data_path("samson")


def ties(rng, shape=(37, 23), levels=8):
    return rng.integers(0, levels, size=shape).astype(np.uint8)


def cones(shape=(30, 40), centres=((8, 9), (20, 31))):
    y, x = np.mgrid[:shape[0], :shape[1]]
    return functools.reduce(np.minimum, [np.hypot(y - cy, x - cx) for cy, cx in centres]).astype(np.float32)


# ---- against the CLI ------------------------------------------------------------------------------

@pytest.mark.parametrize("connectivity", [4, 8])
def test_watershed_matches_cli(cli, tmp_path, rng, connectivity):
    relief = ties(rng)
    np.save(tmp_path / "r.npy", relief)
    cli("watershed", tmp_path / "r.npy", tmp_path / "l.npy", "--connectivity", connectivity, "--backend", "cpu", "-q")
    labels, n = cubekit.watershed(relief, connectivity=connectivity, return_regions=True)
    assert labels.dtype == np.int32 and labels.shape == relief.shape
    np.testing.assert_array_equal(labels, np.load(tmp_path / "l.npy"))
    assert n == labels.max() > 5 and labels.min() == 1


def test_markers_mask_levels_match_cli(cli, tmp_path, rng):
    relief = rng.random((30, 40)).astype(np.float32) * 100
    markers = np.zeros((30, 40), np.int64)  # NumPy's default integers, as scikit-image users make them
    markers[4, 3], markers[20, 30:32] = 9, 3
    mask = np.ones((30, 40), bool)
    mask[:2], mask[:, 35:] = False, False
    np.save(tmp_path / "r.npy", relief)
    np.save(tmp_path / "m.npy", markers.astype(np.int32))
    np.save(tmp_path / "k.npy", mask.astype(np.uint8))
    cli("watershed", tmp_path / "r.npy", tmp_path / "l.npy", "--markers", tmp_path / "m.npy", "--mask",
        tmp_path / "k.npy", "--levels", 16, "--backend", "cpu", "-q")
    labels, n = cubekit.watershed(relief, markers, mask=mask, levels=16, return_regions=True)
    np.testing.assert_array_equal(labels, np.load(tmp_path / "l.npy"))
    assert n == 2 and set(np.unique(labels)) == {0, 3, 9}
    assert (labels[~mask] == 0).all()


def test_volume_matches_cli(cli, tmp_path, rng):
    volume = ties(rng, shape=(7, 9, 11), levels=5)  # (D, H, W)
    np.save(tmp_path / "v.npy", volume)
    for connectivity in (6, 26):
        cli("watershed", tmp_path / "v.npy", tmp_path / "l.npy", "--volume", "--connectivity", connectivity, "-q",
            "--backend", "cpu")
        labels = cubekit.watershed(volume, connectivity=connectivity, volume=True)
        assert labels.shape == volume.shape and labels.flags.c_contiguous
        np.testing.assert_array_equal(labels, np.load(tmp_path / "l.npy"))
    np.testing.assert_array_equal(cubekit.watershed(volume, volume=True), cubekit.watershed(volume, None, 26, volume=True))
    six = cubekit.watershed(volume, connectivity=6, volume=True)
    assert six.max() > 10 and labels.max() == 1  # 26 neighbours join the random level-0 plateaus into one
    b = cubekit.watershed_boundary(six, connectivity=6, volume=True)
    assert b.shape == volume.shape and b.dtype == np.uint8 and 0 < b.sum() < b.size


def test_boundary_matches_cli(cli, tmp_path, rng):
    relief = ties(rng, levels=6).astype(np.uint16)
    np.save(tmp_path / "r.npy", relief)
    cli("watershed", tmp_path / "r.npy", tmp_path / "l.npy", "--connectivity", 4, "--boundary-out", tmp_path / "b.npy",
        "-q")
    labels = cubekit.watershed(relief, connectivity=4)
    np.testing.assert_array_equal(cubekit.watershed_boundary(labels, connectivity=4), np.load(tmp_path / "b.npy"))


def test_segment_matches_cli(cli, tmp_path, samson):
    cube = samson[0]
    cli("segment", SAMSON, tmp_path / "s.npy", "--levels", 32, "--gradient-out", tmp_path / "g.npy", "--regions-out",
        tmp_path / "r.json", "--backend", "cpu", "-q")
    s = cubekit.segment(cube, levels=32)
    np.testing.assert_array_equal(s.labels, np.load(tmp_path / "s.npy"))
    np.testing.assert_array_equal(s.gradient, np.load(tmp_path / "g.npy"))
    np.testing.assert_array_equal(s.gradient, cubekit.rcmg(cube))
    np.testing.assert_array_equal(s.labels, cubekit.watershed(s.gradient, levels=32))
    table = json.loads((tmp_path / "r.json").read_text())
    assert s.count == table["count"] == len(s.regions) > 20
    assert s.regions.dtype == cubekit.region_dtype(156)
    np.testing.assert_array_equal(s.regions["area"], [r["area"] for r in table["regions"]])
    np.testing.assert_array_equal(s.regions["mean_spectrum"], [r["mean_spectrum"] for r in table["regions"]])
    np.testing.assert_array_equal(s.regions["mean_gradient"], [r["mean_gradient"] for r in table["regions"]])
    assert s.regions["area"].sum() == 95 * 95


def test_segment_connectivity_sets_both_unless_rcmg_connectivity(samson):
    cube = samson[0][:40, :50]
    s4 = cubekit.segment(cube, connectivity=4, statistics=False)
    assert s4.regions is None
    np.testing.assert_array_equal(s4.gradient, cubekit.rcmg(cube, connectivity=4))
    np.testing.assert_array_equal(s4.labels, cubekit.watershed(s4.gradient, connectivity=4))
    mixed = cubekit.segment(cube, connectivity=4, rcmg_connectivity=8, reject=2)
    np.testing.assert_array_equal(mixed.gradient, cubekit.rcmg(cube, connectivity=8, reject=2))
    np.testing.assert_array_equal(mixed.labels, cubekit.watershed(mixed.gradient, connectivity=4))


# ---- known cases and semantics --------------------------------------------------------------------------

def test_two_cones_constant_and_strictly_increasing_transforms():
    relief = cones()
    labels, n = cubekit.watershed(relief, return_regions=True)
    assert n == 2
    assert labels[8, 9] == 1 and labels[20, 31] == 2
    np.testing.assert_array_equal(cubekit.watershed(np.float64(relief) ** 2 + 3), labels)  # only the order counts
    assert cubekit.watershed(np.full((5, 7), 3.0), return_regions=True)[1] == 1
    assert cubekit.watershed(np.zeros((1, 9), np.uint8)).tolist() == [[1] * 9]


@pytest.mark.parametrize("dtype", ["bool", "uint8", "uint16", "uint32", "int8", "int16", "int32", "float16", "float32",
                                   "float64"])
def test_every_relief_dtype(dtype, rng):
    a = rng.integers(0, 2 if dtype == "bool" else 6, size=(21, 17)).astype(dtype)
    np.testing.assert_array_equal(cubekit.watershed(a), cubekit.watershed(a.astype(np.float64)))


def test_non_contiguous_views_and_out(rng):
    a = rng.random((40, 36)).astype(np.float32)
    for view in (a[5:30, 3:25], a[::2, ::-1], np.asfortranarray(a), a.T):
        np.testing.assert_array_equal(cubekit.watershed(view), cubekit.watershed(np.ascontiguousarray(view)))
    out = np.full((50, 50), -7, np.int32)[3:43, 5:41]
    assert cubekit.watershed(a, out=out) is out
    np.testing.assert_array_equal(out, cubekit.watershed(a))


def test_scikit_image_argument_names():
    params = list(inspect.signature(cubekit.watershed).parameters)
    assert params[:4] == ["image", "markers", "connectivity", "mask"]
    relief, markers = cones(), np.zeros((30, 40), np.int32)
    markers[8, 9], markers[20, 31] = 1, 2
    mask = np.ones((30, 40), bool)
    expected = cubekit.watershed(relief, markers, 8, mask)
    np.testing.assert_array_equal(cubekit.watershed(image=relief, markers=markers, connectivity=8, mask=mask, offset=None,
                                                    compactness=0, watershed_line=False), expected)
    with pytest.raises(ValueError, match="watershed_line"):
        cubekit.watershed(relief, markers, watershed_line=True)
    with pytest.raises(ValueError, match="compactness"):
        cubekit.watershed(relief, markers, compactness=0.1)
    with pytest.raises(ValueError, match="4 or 8"):
        cubekit.watershed(relief, markers, connectivity=1)  # scikit-image's spelling
    with pytest.raises(ValueError, match="number of markers"):
        cubekit.watershed(relief, 5)


def test_peer_sanity_against_scikit_image(rng):
    segmentation = pytest.importorskip("skimage.segmentation")
    measure = pytest.importorskip("skimage.measure")
    relief = cones(shape=(60, 80), centres=((10, 12), (45, 30), (20, 66)))
    relief += rng.random(relief.shape).astype(np.float32) * 1e-3  # no exact ties between the basins
    ours, n = cubekit.watershed(relief, connectivity=8, return_regions=True)
    minima = (ours * 0).astype(np.int32)
    for k, (cy, cx) in enumerate(((10, 12), (45, 30), (20, 66)), start=1):
        minima[cy, cx] = k
    theirs = segmentation.watershed(relief, minima, connectivity=2)
    assert n == 3
    same = np.mean(measure.label(ours) == measure.label(theirs))
    assert same > 0.97, same  # the two differ only next to crests


def test_peer_sanity_on_samson_gradient(samson):
    """scikit-image's flooding watershed from the regional minima as markers (numbered in raster order,
    as ours are): the same regions, and the same labels but near crests and on plateaus (99.6 %)."""
    segmentation = pytest.importorskip("skimage.segmentation")
    morphology = pytest.importorskip("skimage.morphology")
    measure = pytest.importorskip("skimage.measure")
    g = cubekit.rcmg(samson[0])
    ours, n = cubekit.watershed(g, return_regions=True)
    minima = measure.label(morphology.local_minima(g, connectivity=2), connectivity=2)
    theirs = segmentation.watershed(g, minima, connectivity=2)
    assert n == minima.max() > 500
    assert np.mean(ours == theirs) > 0.99


def test_region_statistics_known_case():
    labels = np.array([[1, 1, 2], [1, 4, 2]], np.int64)
    cube = np.arange(12.0).reshape(2, 3, 2)
    gradient = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    r = cubekit.region_statistics(labels, cube, gradient)
    assert r.dtype == cubekit.region_dtype(2)
    assert r["label"].tolist() == [1, 2, 4] and r["area"].tolist() == [3, 2, 1]
    assert (r["x0"].tolist(), r["y0"].tolist(), r["x1"].tolist(), r["y1"].tolist()) == ([0, 2, 1], [0, 0, 1], [1, 2, 1],
                                                                                       [1, 1, 1])
    np.testing.assert_allclose(r["centroid_x"], [1 / 3, 2, 1])
    np.testing.assert_allclose(r["mean_gradient"], [7 / 3, 4.5, 5])
    np.testing.assert_allclose(r["mean_spectrum"], [[(0 + 2 + 6) / 3, (1 + 3 + 7) / 3], [(4 + 10) / 2, (5 + 11) / 2],
                                                    [8, 9]])
    bare = cubekit.region_statistics(labels.astype(np.int32))
    assert bare["mean_spectrum"].shape == (3, 0) and np.isnan(bare["mean_gradient"]).all()


def test_results_pickle_and_docstrings_run(samson):
    s = cubekit.segment(samson[0][:30, :30])
    back = pickle.loads(pickle.dumps(s))
    np.testing.assert_array_equal(back.labels, s.labels)
    np.testing.assert_array_equal(back.regions, s.regions)
    for f in (cubekit.watershed, cubekit.watershed_boundary, cubekit.segment, cubekit.region_statistics):
        for t in doctest.DocTestFinder().find(f, globs={"cubekit": cubekit}):
            runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
            runner.run(t)
            assert runner.summarize(verbose=False).failed == 0, f.__name__


def test_bad_input_raises_named_errors(rng):
    a = rng.random((8, 9)).astype(np.float32)
    with pytest.raises(ValueError, match="connectivity = 6"):
        cubekit.watershed(a, connectivity=6)
    with pytest.raises(ValueError, match="levels"):
        cubekit.watershed(a, levels=1)
    with pytest.raises(ValueError, match="h_min"):
        cubekit.watershed(a, h_min=-1)
    with pytest.raises(ValueError, match="schedule"):
        cubekit.watershed(a, schedule="fast")
    nan = a.copy()
    nan[3, 4] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        cubekit.watershed(nan)
    with pytest.raises(ValueError, match="markers has shape"):
        cubekit.watershed(a, np.zeros((8, 8), np.int32))
    with pytest.raises(ValueError, match="integer"):
        cubekit.watershed(a, np.zeros((8, 9), np.float32))
    with pytest.raises(ValueError, match=r"expected \(H, W\)"):
        cubekit.watershed(np.zeros((8, 9, 3), np.float32))
    with pytest.raises(ValueError, match=r"\(D, H, W\)"):
        cubekit.watershed(a, volume=True)
    with pytest.raises(TypeError, match="unexpected keyword argument 'background'"):
        cubekit.watershed(a, background=0)
    with pytest.raises(ValueError, match="out is"):
        cubekit.watershed(a, out=np.zeros((8, 9), np.uint8))
    with pytest.raises(TypeError, match="unexpected keyword argument 'volume'"):
        cubekit.segment(a, volume=True)
    with pytest.raises(ValueError, match="connectivity = 6"):
        cubekit.segment(a, connectivity=6)
    with pytest.raises(ValueError, match="reject"):
        cubekit.segment(a, reject=7)


def test_min_area_keyword_matches_cli(cli, tmp_path, rng):
    relief = ties(rng, shape=(41, 33))
    np.save(tmp_path / "r.npy", relief)
    cli("watershed", tmp_path / "r.npy", tmp_path / "l.npy", "--min-area", 6, "--backend", "cpu", "-q")
    labels, n = cubekit.watershed(relief, min_area=6, return_regions=True)
    np.testing.assert_array_equal(labels, np.load(tmp_path / "l.npy"))
    assert labels.dtype == np.int32 and labels.shape == relief.shape
    assert 0 < n == labels.max() < cubekit.watershed(relief, return_regions=True)[1]
    assert np.bincount(labels.ravel())[1:].min() >= 6  # one connected relief: no region is alone
    np.testing.assert_array_equal(cubekit.watershed(relief, min_area=1), cubekit.watershed(relief))
    assert inspect.signature(cubekit.watershed).parameters["min_area"].default == 0
    assert "min_area" in cubekit.watershed.__doc__ and "min_area" in cubekit.segment.__doc__


def test_segment_min_area_keyword(cli, tmp_path, samson):
    cli("segment", SAMSON, tmp_path / "s.npy", "--min-area", 20, "--backend", "cpu", "-q")
    s = cubekit.segment(samson[0], min_area=20)
    np.testing.assert_array_equal(s.labels, np.load(tmp_path / "s.npy"))
    np.testing.assert_array_equal(s.labels, cubekit.watershed(s.gradient, min_area=20))
    assert s.count == len(s.regions) < cubekit.segment(samson[0], statistics=False).count
    assert s.regions["area"].min() >= 20


def test_min_area_errors_name_the_keyword(rng):
    a = rng.random((8, 9)).astype(np.float32)
    with pytest.raises(ValueError, match="min_area"):
        cubekit.watershed(a, min_area=-1)
    markers = np.zeros((8, 9), np.int32)
    markers[2, 2] = 5
    with pytest.raises(ValueError, match="min_area = 3 with markers"):
        cubekit.watershed(a, markers, min_area=3)
    with pytest.raises(ValueError, match="min_area"):
        cubekit.segment(a, min_area=-2)


# ---- GPU ------------------------------------------------------------------------------------------

@gpu
def test_numpy_with_backend_cuda_matches_cpu(rng, samson):
    relief = ties(rng, shape=(61, 47))
    for connectivity in (4, 8):
        np.testing.assert_array_equal(cubekit.watershed(relief, connectivity=connectivity, backend="cuda"),
                                      cubekit.watershed(relief, connectivity=connectivity))
    d, h = (cubekit.segment(samson[0], levels=32, backend=b) for b in ("cuda", "cpu"))
    np.testing.assert_array_equal(d.labels, h.labels)
    np.testing.assert_array_equal(d.regions["area"], h.regions["area"])


@gpu
def test_min_area_with_backend_cuda_matches_cpu(rng):
    relief = ties(rng, shape=(61, 47))
    mask = np.ones(relief.shape, bool)
    mask[:, 20] = False
    for keywords in ({"min_area": 5}, {"min_area": 12, "levels": 4, "mask": mask}):
        np.testing.assert_array_equal(cubekit.watershed(relief, backend="cuda", **keywords),
                                      cubekit.watershed(relief, **keywords))


@gpu
def test_cupy_in_cupy_out(rng, samson):
    cp = cupy_or_skip()
    relief = rng.random((50, 40)).astype(np.float32)
    markers = np.zeros((50, 40), np.int32)
    markers[5, 5], markers[40, 30] = 4, 8
    labels = cubekit.watershed(cp.asarray(relief), cp.asarray(markers), mask=cp.asarray(relief < 0.9))
    assert isinstance(labels, cp.ndarray) and labels.dtype == cp.int32
    np.testing.assert_array_equal(cp.asnumpy(labels), cubekit.watershed(relief, markers, mask=relief < 0.9))
    volume = ties(rng, shape=(5, 12, 9))
    np.testing.assert_array_equal(cp.asnumpy(cubekit.watershed(cp.asarray(volume), volume=True)),
                                  cubekit.watershed(volume, volume=True))
    s = cubekit.segment(cp.asarray(samson[0]))
    assert isinstance(s.labels, cp.ndarray) and isinstance(s.gradient, cp.ndarray)
    h = cubekit.segment(samson[0])
    np.testing.assert_array_equal(cp.asnumpy(s.labels), h.labels)
    np.testing.assert_array_equal(s.regions["label"], h.regions["label"])


@gpu
def test_torch_in_torch_out(rng):
    torch = torch_cuda_or_skip()
    relief = ties(rng, shape=(33, 29))
    labels = cubekit.watershed(torch.as_tensor(relief, device="cuda"), connectivity=4)
    assert isinstance(labels, torch.Tensor) and labels.is_cuda and labels.dtype == torch.int32
    torch.cuda.current_stream().synchronize()
    np.testing.assert_array_equal(labels.cpu().numpy(), cubekit.watershed(relief, connectivity=4))
