"""cubekit.pca / pca_transform against `cubekit pca` (bit for bit: exact sums, one shared
eigensolve, float64 projection), every dtype, non-contiguous inputs, named errors, pickling;
device arrays on the GPU (CPU and CUDA results are bit-identical)."""
import json
import pickle

import numpy as np
import pytest

import cubekit
from conftest import cupy_or_skip, gpu, torch_cuda_or_skip


def _correlated(rng, shape=(23, 19, 6), dtype=np.float32):
    """Bands mixed from 3 random sources plus noise: a spread of eigenvalues, never constant."""
    sources = rng.normal(size=shape[:2] + (3,))
    mix = rng.normal(size=(3, shape[2]))
    a = sources @ mix * 20 + rng.normal(size=shape) + 100
    return a.astype(dtype)


def _pca_cli(cli, tmp_path, path, *args):
    j = json.loads(cli("pca", path, tmp_path / "p.npy", "--backend", "cpu", "--json", "--quiet", *args).stdout)
    return j, np.load(tmp_path / "p.npy"), json.loads((tmp_path / "p.pca.json").read_text())


def _assert_same_as_cli(r, j, scores, model):
    np.testing.assert_array_equal(r.scores, scores.reshape(r.scores.shape))
    assert r.scores.dtype == np.float64
    for key in ("mean", "eigenvalues", "explained_variance_ratio", "components"):
        np.testing.assert_array_equal(getattr(r, key), np.array(model[key]), err_msg=key)
    for key in ("bands", "samples", "num_components"):
        assert getattr(r, key) == model[key], key
    assert r.parameters == j["parameters"]
    assert r.explained_variance_ratio.tolist() == j["explained_variance_ratio"]


def test_pca_matches_cli_on_samson(cli, tmp_path, samson):
    r = cubekit.pca(samson[0], components=4)
    _assert_same_as_cli(r, *_pca_cli(cli, tmp_path, cubekit.data_path("samson"), "--components", "4"))
    assert r.scores.shape == (95, 95, 4) and r.components.shape == (4, 156) and r.covariance.shape == (156, 156)
    assert r.eigenvalues[0] > r.eigenvalues[1] > 0 and (r.components.sum(axis=1) >= 0).all()
    np.testing.assert_allclose(np.linalg.norm(r.components, axis=1), 1, rtol=1e-12)


def test_components_beyond_the_bands_are_clamped_as_in_the_cli(cli, tmp_path, rng):
    a = _correlated(rng, shape=(10, 12, 3))
    np.save(tmp_path / "a.npy", a)
    r = cubekit.pca(a, components=5)
    _assert_same_as_cli(r, *_pca_cli(cli, tmp_path, tmp_path / "a.npy", "--components", "5"))
    assert r.num_components == 3 and r.parameters == {"components": 3, "components_requested": 5}


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "int16", "uint32", "int32", "float32", "float64"])
def test_every_cube_dtype_matches_cli(cli, tmp_path, rng, dtype):
    a = _correlated(rng)
    a = np.clip(a, 0, 255) if dtype == "uint8" else a
    a = a.astype(dtype)
    np.save(tmp_path / "a.npy", a)
    _assert_same_as_cli(cubekit.pca(a), *_pca_cli(cli, tmp_path, tmp_path / "a.npy"))


@pytest.mark.parametrize("dtype,same", [("bool", "uint8"), ("int8", "int16"), ("float16", "float32")])
def test_converted_dtypes_match_their_conversion(rng, dtype, same):
    a = _correlated(rng)
    a = (a > 100) if dtype == "bool" else (a - 100) if dtype == "int8" else a
    a = a.astype(dtype)
    r, e = cubekit.pca(a), cubekit.pca(a.astype(same))
    np.testing.assert_array_equal(r.scores, e.scores)
    np.testing.assert_array_equal(r.components, e.components)


def test_non_contiguous_views_give_the_copy_result(rng):
    a = _correlated(rng, shape=(30, 26, 8))
    for view in (a[3:25, 2:20, 1:7], a[::2, ::-1, ::2], np.asfortranarray(a), a.transpose(1, 0, 2)):
        r, e = cubekit.pca(view), cubekit.pca(np.ascontiguousarray(view))
        np.testing.assert_array_equal(r.scores, e.scores)
        np.testing.assert_array_equal(r.components, e.components)
        np.testing.assert_array_equal(r.mean, e.mean)


def test_nan_pixels_are_left_out_and_get_nan_scores(cli, tmp_path, rng):
    a = _correlated(rng, dtype=np.float64)
    a[2, 3, 1] = np.nan
    a[7, 0, :] = np.inf
    np.save(tmp_path / "a.npy", a)
    r = cubekit.pca(a, components=2)
    _assert_same_as_cli(r, *_pca_cli(cli, tmp_path, tmp_path / "a.npy", "--components", "2"))
    assert r.samples == a.shape[0] * a.shape[1] - 2
    assert np.isnan(r.scores[2, 3]).all() and np.isnan(r.scores[7, 0]).all()
    assert np.isfinite(r.scores).sum() == 2 * r.samples


def test_out_transform_and_two_dimensional(rng):
    a = _correlated(rng)
    r = cubekit.pca(a)
    out = np.full((23, 19, 3), np.nan)
    assert cubekit.pca(a, out=out).scores is out
    np.testing.assert_array_equal(out, r.scores)
    np.testing.assert_array_equal(cubekit.pca_transform(a, r), r.scores)
    b = _correlated(rng, shape=(7, 9, 6))
    s = r.transform(b[::-1])
    expected = (b[::-1].astype(np.float64) - r.mean) @ r.components.T
    np.testing.assert_allclose(s, expected, rtol=1e-9, atol=1e-9)
    assert not np.array_equal(s, np.zeros_like(s))
    g = a[:, :, 0]
    r1 = cubekit.pca(g)  # one band: one component
    assert r1.scores.shape == (23, 19, 1) and r1.components.tolist() == [[1.0]]
    np.testing.assert_array_equal(r1.scores[:, :, 0], g.astype(np.float64) - r1.mean[0])


def test_bad_input_raises_named_errors(rng):
    a = _correlated(rng, shape=(8, 9, 4))
    with pytest.raises(ValueError, match="components = 0"):
        cubekit.pca(a, components=0)
    with pytest.raises(ValueError, match="components"):
        cubekit.pca(a, components=1.5)
    with pytest.raises(TypeError, match="unexpected keyword argument 'n_components'"):
        cubekit.pca(a, n_components=2)
    with pytest.raises(ValueError, match="int64"):
        cubekit.pca(a.astype(np.int64))
    with pytest.raises(ValueError, match="dimensions"):
        cubekit.pca(np.ones(4))
    with pytest.raises(ValueError, match="out is"):
        cubekit.pca(a, out=np.zeros((8, 9, 2)))
    with pytest.raises(ValueError, match="finite"):
        cubekit.pca(np.full((4, 4, 2), np.nan))
    model = cubekit.pca(a)
    with pytest.raises(ValueError, match="bands"):
        cubekit.pca_transform(a[:, :, :3], model)
    with pytest.raises(TypeError, match="PCAResult"):
        cubekit.pca_transform(a, {"mean": 0})


def test_result_pickles(rng):
    r = cubekit.pca(_correlated(rng), components=2)
    back = pickle.loads(pickle.dumps(r))
    assert type(back) is cubekit.PCAResult and repr(back) == repr(r)
    for name in ("scores", "mean", "eigenvalues", "explained_variance_ratio", "components", "covariance"):
        np.testing.assert_array_equal(getattr(back, name), getattr(r, name))
    assert back.parameters == r.parameters and back.samples == r.samples
    assert "Example" in cubekit.pca.__doc__ and "Example" in cubekit.pca_transform.__doc__


@gpu
def test_numpy_with_backend_cuda_matches_cpu(samson):
    cube = samson[0]
    r, e = cubekit.pca(cube, backend="cuda"), cubekit.pca(cube)
    np.testing.assert_array_equal(r.scores, e.scores)
    np.testing.assert_array_equal(r.components, e.components)


@gpu
def test_cupy_in_cupy_out(samson):
    cp = cupy_or_skip()
    cube = samson[0]
    d = cp.asarray(cube)
    r, e = cubekit.pca(d, components=4), cubekit.pca(cube, components=4)
    assert isinstance(r.scores, cp.ndarray) and r.scores.shape == (95, 95, 4)
    np.testing.assert_array_equal(cp.asnumpy(r.scores), e.scores)
    np.testing.assert_array_equal(r.eigenvalues, e.eigenvalues)
    out = cp.full((95, 95, 4), cp.nan)
    assert cubekit.pca(d, components=4, out=out).scores is out
    np.testing.assert_array_equal(cp.asnumpy(cubekit.pca_transform(d[::2], e)), cubekit.pca_transform(cube[::2], e))


@gpu
def test_torch_in_torch_out(samson):
    torch = torch_cuda_or_skip()
    cube = samson[0]
    t = torch.as_tensor(cube, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        r = cubekit.pca(t)
    s.synchronize()
    assert isinstance(r.scores, torch.Tensor) and r.scores.is_cuda
    np.testing.assert_array_equal(r.scores.cpu().numpy(), cubekit.pca(cube).scores)
