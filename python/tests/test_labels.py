"""cubekit.label, label_components and remove_small_objects: against SciPy's labelling (where
installed), the CLI's noise removal (`cubekit edges --min-component`), every dtype and
non-contiguous inputs; device arrays and a device-resident chain on the GPU."""
import doctest
import pickle

import numpy as np
import pytest

import cubekit
from conftest import cupy_or_skip, gpu, torch_cuda_or_skip

SAMSON = cubekit.data_path("samson")


def blobs(rng, shape=(60, 50), p=0.45):
    return (rng.random(shape) < p).astype(np.uint8)


@pytest.fixture(scope="module")
def edges():
    """Per-band entropy edge maps of the first bands of Samson (many small components)."""
    cube = cubekit.read(SAMSON)[0]
    return cubekit.entropy_edges(cube[:, :, :6], fusion="none").edges


@pytest.mark.parametrize("connectivity", [4, 8])
def test_label_matches_scipy(rng, connectivity):
    ndimage = pytest.importorskip("scipy.ndimage")
    m = blobs(rng)
    structure = ndimage.generate_binary_structure(2, 1 if connectivity == 4 else 2)
    expected, n = ndimage.label(m, structure=structure)  # also numbered in raster order
    labels, num = cubekit.label(m, connectivity=connectivity, return_num=True)
    assert labels.dtype == np.int32 and labels.shape == m.shape
    assert num == n > 20
    np.testing.assert_array_equal(labels, expected)


def test_label_equal_value_rule_and_bands_are_independent(rng):
    img = np.array([[1, 1, 2, 2], [0, 0, 2, 0], [3, 0, 0, 1]], np.uint16)
    labels, n = cubekit.label(img, connectivity=8, return_num=True)
    assert n == 4
    assert labels.tolist() == [[1, 1, 2, 2], [0, 0, 2, 0], [3, 0, 0, 4]]
    stack = np.stack([blobs(rng), blobs(rng), blobs(rng)], axis=2)
    labels3, counts = cubekit.label(stack, return_num=True)
    assert labels3.shape == stack.shape and len(counts) == 3
    for b in range(3):
        single, n = cubekit.label(stack[:, :, b], return_num=True)
        np.testing.assert_array_equal(labels3[:, :, b], single)
        assert counts[b] == n


def test_label_components_statistics(rng):
    m = blobs(rng)
    c = cubekit.label_components(m, connectivity=4)
    np.testing.assert_array_equal(c.labels, cubekit.label(m, connectivity=4))
    stats = c.stats[0]
    assert stats.dtype == cubekit.COMPONENT_DTYPE and c.counts == [len(stats)] and len(stats) > 20
    np.testing.assert_array_equal(stats["size"], np.bincount(c.labels.ravel())[1:])
    for k in (0, len(stats) // 2, len(stats) - 1):
        ys, xs = np.nonzero(c.labels == k + 1)
        assert (stats[k]["x0"], stats[k]["y0"], stats[k]["x1"], stats[k]["y1"]) == (xs.min(), ys.min(),
                                                                                    xs.max(), ys.max())


@pytest.mark.parametrize("min_size", [2, 5, 12])
@pytest.mark.parametrize("connectivity", [4, 8])
def test_remove_small_objects_is_the_cli_noise_removal(cli, tmp_path, edges, min_size, connectivity):
    """`cubekit edges --fusion none --min-component L` = remove_small_objects of the unfiltered maps."""
    cli("edges", SAMSON, tmp_path / "e.npy", "--bands", "0-5", "--fusion", "none", "--min-component", min_size,
        "--connectivity", connectivity, "--backend", "cpu", "--quiet")
    expected = np.load(tmp_path / "e.npy")
    cleaned = cubekit.remove_small_objects(edges, min_size=min_size, connectivity=connectivity)
    assert cleaned.dtype == np.uint8 and cleaned.shape == edges.shape
    np.testing.assert_array_equal(cleaned, expected)
    assert 0 < cleaned.sum() < edges.sum()


def test_remove_small_objects_semantics(rng):
    m = blobs(rng, p=0.3)
    labels = cubekit.label(m, connectivity=8)
    sizes = np.bincount(labels.ravel())
    min_size = 3
    keep = sizes >= min_size  # scikit-image's rule: smaller than min_size goes
    keep[0] = False
    expected = keep[labels].astype(np.uint8)
    np.testing.assert_array_equal(cubekit.remove_small_objects(m, min_size=min_size), expected)
    assert (sizes[1:] == min_size).any() and (sizes[1:] < min_size).any()  # both sides of the rule occur
    np.testing.assert_array_equal(cubekit.remove_small_objects(m, min_size=1), m)
    # values are kept; bool in, bool out; in place
    np.testing.assert_array_equal(cubekit.remove_small_objects(m * 9, min_size=min_size), expected * 9)
    b = cubekit.remove_small_objects(m.astype(bool), min_size=min_size)
    assert b.dtype == np.bool_
    np.testing.assert_array_equal(b, expected.astype(bool))
    inplace = m.astype(bool)
    assert cubekit.remove_small_objects(inplace, min_size=min_size, out=inplace) is inplace
    np.testing.assert_array_equal(inplace, expected.astype(bool))


@pytest.mark.parametrize("dtype", ["bool", "uint8", "uint16", "uint32", "int8", "int16", "int32"])
def test_every_integer_dtype(dtype, rng):
    values = rng.integers(0, 3, size=(30, 25)) * 40
    a = (values == 40).astype(dtype) if dtype == "bool" else values.astype(dtype)
    expected = cubekit.label(a.astype(np.int32))
    np.testing.assert_array_equal(cubekit.label(a), expected)
    assert expected.max() > 5


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_float_images_are_refused(dtype):
    with pytest.raises(ValueError, match="element type"):
        cubekit.label(np.ones((4, 4), dtype))


def test_non_contiguous_views_give_the_copy_result(rng):
    a = blobs(rng, shape=(40, 36, 4))
    for view in (a[5:30, 3:25, 1:3], a[::2, ::-1, ::3], np.asfortranarray(a), a.transpose(1, 0, 2)):
        copy = np.ascontiguousarray(view)
        np.testing.assert_array_equal(cubekit.label(view), cubekit.label(copy))
        np.testing.assert_array_equal(cubekit.remove_small_objects(view, min_size=4),
                                      cubekit.remove_small_objects(copy, min_size=4))
    out = np.zeros((50, 50, 4), np.int32)[3:43, 5:41]
    assert cubekit.label(a, out=out) is out
    np.testing.assert_array_equal(out, cubekit.label(a))


def test_bad_input_raises_named_errors(rng):
    m = blobs(rng)
    with pytest.raises(ValueError, match="connectivity = 2; expected 4 or 8"):
        cubekit.label(m, connectivity=2)
    with pytest.raises(ValueError, match="connectivity"):
        cubekit.remove_small_objects(m, connectivity=6)
    with pytest.raises(ValueError, match="min_size"):
        cubekit.remove_small_objects(m, min_size=-1)
    with pytest.raises(ValueError, match="min_size"):
        cubekit.remove_small_objects(m, min_size=2.5)
    with pytest.raises(ValueError, match="mask element type is u16"):
        cubekit.remove_small_objects(m.astype(np.uint16))
    with pytest.raises(ValueError, match="return_num"):
        cubekit.label(m, return_num="yes")
    with pytest.raises(TypeError, match="unexpected keyword argument 'background'"):
        cubekit.label(m, background=0)
    with pytest.raises(ValueError, match="int64"):
        cubekit.label(m.astype(np.int64))
    with pytest.raises(ValueError, match="out is"):
        cubekit.label(m, out=np.zeros(m.shape, np.uint8))


def test_results_pickle(rng):
    c = cubekit.label_components(blobs(rng))
    back = pickle.loads(pickle.dumps(c))
    np.testing.assert_array_equal(back.labels, c.labels)
    np.testing.assert_array_equal(back.stats[0], c.stats[0])
    assert back.counts == c.counts


def test_docstring_examples_run():
    for f in (cubekit.label, cubekit.label_components, cubekit.remove_small_objects):
        for t in doctest.DocTestFinder().find(f, globs={"cubekit": cubekit}):
            runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
            runner.run(t)
            assert runner.summarize(verbose=False).failed == 0, f.__name__


# ---- GPU ------------------------------------------------------------------------------------------

@gpu
def test_numpy_with_backend_cuda_matches_cpu(edges):
    for connectivity in (4, 8):
        d, h = (cubekit.label_components(edges, connectivity=connectivity, backend=b) for b in ("cuda", "cpu"))
        np.testing.assert_array_equal(d.labels, h.labels)
        assert all((x == y).all() for x, y in zip(d.stats, h.stats))
        np.testing.assert_array_equal(cubekit.remove_small_objects(edges, min_size=5, backend="cuda"),
                                      cubekit.remove_small_objects(edges, min_size=5))


@gpu
def test_cupy_in_cupy_out(edges):
    cp = cupy_or_skip()
    d = cp.asarray(edges)
    labels = cubekit.label(d)
    assert isinstance(labels, cp.ndarray) and labels.dtype == cp.int32
    np.testing.assert_array_equal(cp.asnumpy(labels), cubekit.label(edges))
    np.testing.assert_array_equal(cp.asnumpy(cubekit.label(d[10:80, ::2])), cubekit.label(edges[10:80, ::2]))
    expected = cubekit.remove_small_objects(edges, min_size=6)
    np.testing.assert_array_equal(cp.asnumpy(cubekit.remove_small_objects(d, min_size=6)), expected)
    assert cubekit.remove_small_objects(d, min_size=6, out=d) is d  # in place on the device
    np.testing.assert_array_equal(cp.asnumpy(d), expected)
    b = cubekit.remove_small_objects(cp.asarray(edges).astype(bool), min_size=6)
    assert b.dtype == cp.bool_
    np.testing.assert_array_equal(cp.asnumpy(b), expected.astype(bool))


@gpu
def test_torch_in_torch_out(edges):
    torch = torch_cuda_or_skip()
    t = torch.as_tensor(edges, device="cuda")
    labels = cubekit.label(t, connectivity=4)
    assert isinstance(labels, torch.Tensor) and labels.is_cuda and labels.dtype == torch.int32
    torch.cuda.current_stream().synchronize()
    np.testing.assert_array_equal(labels.cpu().numpy(), cubekit.label(edges, connectivity=4))
    cleaned = cubekit.remove_small_objects(t.bool(), min_size=4)
    assert cleaned.dtype == torch.bool
    np.testing.assert_array_equal(cleaned.cpu().numpy(), cubekit.remove_small_objects(edges, min_size=4) != 0)


@gpu
def test_device_resident_chain_rcmg_edges_labels():
    """CuPy cube -> rcmg -> entropy_edges (of the gradient) -> label, every output CuPy, equal to
    the NumPy chain."""
    cp = cupy_or_skip()
    cube = cubekit.read(SAMSON)[0]
    g = cubekit.rcmg(cp.asarray(cube))
    e = cubekit.entropy_edges(g, min_component=3)
    labels, n = cubekit.label(e.edges, return_num=True)
    assert all(isinstance(x, cp.ndarray) for x in (g, e.edges, labels))
    hg = cubekit.rcmg(cube)
    he = cubekit.entropy_edges(hg, min_component=3)
    hl, hn = cubekit.label(he.edges, return_num=True)
    np.testing.assert_array_equal(cp.asnumpy(g), hg)
    np.testing.assert_array_equal(cp.asnumpy(e.edges), he.edges)
    np.testing.assert_array_equal(cp.asnumpy(labels), hl)
    assert n == hn > 0 and e.thresholds == he.thresholds
