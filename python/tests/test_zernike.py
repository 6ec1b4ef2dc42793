"""cubekit.zernike_moments / zernike_reconstruct against the CLI and the C++ API, on every request
kind, dtype and non-contiguous inputs; device arrays on the GPU (bit for bit: the family promises
deterministic results, and the GPU tests of the family compare CPU and GPU exactly)."""
import json
import pickle

import numpy as np
import pytest

import cubekit
from conftest import cupy_or_skip, gpu, torch_cuda_or_skip


@pytest.fixture
def bar():
    img = np.zeros((48, 48))
    img[12:36, 20:28] = 1.0
    img[30:34, 5:40] += 0.5
    return img


def test_set_matches_cli_bit_for_bit(cli, samson, tmp_path):
    cube = samson[0]
    z = cubekit.zernike_moments(cube[:, :, 40], max_order=12)
    cli("zernike", cubekit.data_path("samson"), "--bands", "40", "--max-order", "12", "-o", tmp_path / "m.json",
        "--backend", "cpu", "--quiet")
    doc = json.loads((tmp_path / "m.json").read_text())  # shortest round-trip doubles: exact
    assert len(z.indices) == len(doc["moments"]) == 49
    for row, (n, m), a in zip(doc["moments"], z.indices, z.values[0]):
        assert (row["n"], row["m"]) == (n, m)
        assert row["re"] == a.real and row["im"] == a.imag
    assert doc["pixel_count"] == z.disk["pixel_count"] and doc["method"] == z.method


def test_every_request_kind_agrees_with_the_set(bar):
    s = cubekit.zernike_moments(bar, max_order=10)
    o = cubekit.zernike_moments(bar, order=8, method="kintner")
    one = cubekit.zernike_moments(bar, moment=(6, 2), method="kintner")
    lst = cubekit.zernike_moments(bar, moments=[(10, 4), (2, 0)], method="kintner")
    for n, m in [(8, 0), (8, 2), (8, 8)]:
        assert o.at(n, m) == s.at(n, m)
    assert one.at(6, 2) == s.at(6, 2)
    assert lst.indices == [(10, 4), (2, 0)] and lst.at(2, 0) == s.at(2, 0)
    assert s.at(4, -2) == s.at(4, 2).conjugate()
    assert s.values.shape == (1, 36) and s.values.dtype == np.complex128


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int16", "uint16", "int32", "float16", "float32"])
def test_every_dtype_equals_float64(dtype, rng):
    a = rng.integers(0, 2 if dtype == "bool" else 50, size=(31, 31)).astype(dtype)
    np.testing.assert_array_equal(cubekit.zernike_moments(a, max_order=6).values,
                                  cubekit.zernike_moments(a.astype(np.float64), max_order=6).values)


def test_bands_are_a_batch_and_views_need_no_copy(rng):
    cube = rng.normal(size=(40, 40, 5))
    z = cubekit.zernike_moments(cube, max_order=8)
    assert z.values.shape == (5, 25)
    np.testing.assert_array_equal(z.values[3], cubekit.zernike_moments(cube[:, :, 3], max_order=8).values[0])
    view = cube[::-1, :, 1:4]
    np.testing.assert_array_equal(cubekit.zernike_moments(view, max_order=8).values,
                                  cubekit.zernike_moments(np.ascontiguousarray(view), max_order=8).values)


def test_reconstruction_and_error(bar):
    z = cubekit.zernike_moments(bar, max_order=30)
    rebuilt = cubekit.zernike_reconstruct(z)
    assert rebuilt.shape == bar.shape and rebuilt.dtype == np.float64
    err = cubekit.zernike_reconstruction_error(bar, rebuilt, z)
    low = cubekit.zernike_reconstruction_error(bar, cubekit.zernike_reconstruct(z, 6), z)
    assert 0 < err[0] < low[0] < 1
    out = np.full(bar.shape, np.nan)
    assert cubekit.zernike_reconstruct(z, out=out) is out
    np.testing.assert_array_equal(out, rebuilt)


def test_options_round_trip_through_the_result(bar):
    z = cubekit.zernike_moments(bar, max_order=6, mapping="custom", center=(20.0, 22.5), radius=15.0,
                                symmetry=False, precision="f32")
    assert z.disk["mapping"] == "custom" and z.disk["radius"] == 15.0 and z.precision == "f32"
    assert z.parameters["center"] == [20.0, 22.5]
    r = pickle.loads(pickle.dumps(z))
    assert r.indices == z.indices and (r.values == z.values).all()
    np.testing.assert_array_equal(cubekit.zernike_reconstruct(r), cubekit.zernike_reconstruct(z))


def test_bad_requests_raise_named_errors(bar):
    with pytest.raises(ValueError, match="exactly one"):
        cubekit.zernike_moments(bar)
    with pytest.raises(ValueError, match="exactly one"):
        cubekit.zernike_moments(bar, max_order=4, order=2)
    with pytest.raises(ValueError, match="n - m odd"):
        cubekit.zernike_moments(bar, moment=(4, 1))
    with pytest.raises(ValueError, match="requested twice"):
        cubekit.zernike_moments(bar, moments=[(2, 0), (2, 0)])
    with pytest.raises(ValueError, match="mapping"):
        cubekit.zernike_moments(bar, max_order=4, mapping="square")
    with pytest.raises(TypeError, match="unexpected keyword argument 'nmax'"):
        cubekit.zernike_moments(bar, max_order=4, nmax=3)
    z = cubekit.zernike_moments(bar, order=4)
    with pytest.raises(ValueError):
        cubekit.zernike_reconstruct(z)  # orders below 4 are missing


def assert_moments_agree(gpu_values, cpu, images):
    """The family's GPU promise (spec zernike.md §5.3, tests/zernike_gpu_test_helpers.hpp): the
    normalised error |A_gpu - A_cpu| / ((n + 1) mean|f| inside the disk) <= 1e-12, not bit for bit
    (the GPU adds the sums in another order, and its f64 Kintner kernel contracts products)."""
    images = images.reshape(images.shape[0], images.shape[1], -1).astype(np.float64)
    h, w = images.shape[:2]
    cx, cy = cpu.disk["center"]
    y, x = np.mgrid[0:h, 0:w]
    inside = (x - cx) ** 2 + (y - cy) ** 2 <= cpu.disk["radius"] ** 2
    mean = np.abs(images[inside]).mean(axis=0)  # per image
    n = np.array([i[0] for i in cpu.indices], dtype=np.float64)
    error = np.abs(gpu_values - cpu.values) / ((n[None, :] + 1) * mean[:, None])
    assert error.max() <= 1e-12, error.max()
    assert error.max() > 0 or np.array_equal(gpu_values, cpu.values)


@gpu
def test_cupy_moments_match_the_cpu(samson):
    cp = cupy_or_skip()
    cube = samson[0][:, :, 30:34]
    z = cubekit.zernike_moments(cp.asarray(cube), max_order=20)
    assert isinstance(z.values, cp.ndarray) and z.values.shape == (4, 121)
    assert_moments_agree(cp.asnumpy(z.values), cubekit.zernike_moments(cube, max_order=20), cube)
    # the reconstruction from the same moments is bitwise the CPU's (ZernikeGpuExact)
    np.testing.assert_array_equal(cubekit.zernike_reconstruct(z, backend="cuda"), cubekit.zernike_reconstruct(z))


@gpu
def test_torch_moments_match_the_cpu(samson):
    torch = torch_cuda_or_skip()
    img = samson[0][:, :, 50].astype(np.float32)
    z = cubekit.zernike_moments(torch.as_tensor(img, device="cuda"), order=10)
    assert isinstance(z.values, torch.Tensor) and z.values.is_cuda
    assert_moments_agree(z.values.cpu().numpy(), cubekit.zernike_moments(img, order=10), img)
