"""cubekit.rcmg against the CLI and the C++ API (bit for bit: the same library code), on every
dtype and non-contiguous inputs; device arrays on the GPU."""
import numpy as np
import pytest

import cubekit
from conftest import cupy_or_skip, gpu, torch_cuda_or_skip


def test_rcmg_matches_cli_on_samson(cli, tmp_path):
    g = cubekit.rcmg(cubekit.read(cubekit.data_path("samson"))[0])
    cli("rcmg", cubekit.data_path("samson"), tmp_path / "g.npy", "--backend", "cpu", "--quiet")
    expected = np.load(tmp_path / "g.npy")
    assert g.shape == (95, 95) and g.dtype == np.float32
    np.testing.assert_array_equal(g, expected)
    assert g.max() > 0


@pytest.mark.parametrize("dtype", ["bool", "uint8", "uint16", "uint32", "int8", "int16", "int32", "float16",
                                   "float32", "float64"])
def test_every_dtype_matches_float64_input(dtype, rng):
    a = rng.integers(0, 2 if dtype == "bool" else 100, size=(20, 17, 4)).astype(dtype)
    expected = cubekit.rcmg(a.astype(np.float64))
    np.testing.assert_array_equal(cubekit.rcmg(a), expected)


def test_non_contiguous_views_give_the_copy_result(rng):
    a = rng.normal(size=(40, 30, 8)).astype(np.float32)
    for view in (a[5:30, 3:25, 1:7], a[::2, ::-1, ::3], np.asfortranarray(a), a.transpose(1, 0, 2)):
        np.testing.assert_array_equal(cubekit.rcmg(view), cubekit.rcmg(np.ascontiguousarray(view)))


def test_two_dimensional_is_one_band(rng):
    a = rng.normal(size=(16, 16))
    np.testing.assert_array_equal(cubekit.rcmg(a), cubekit.rcmg(a[:, :, None]))


def test_options_and_out(rng):
    a = rng.normal(size=(12, 9, 3))
    out = np.full((12, 9), np.nan, np.float64)
    r = cubekit.rcmg(a, connectivity=4, reject=0, out_type="f64", out=out)
    assert r is out
    np.testing.assert_array_equal(out, cubekit.rcmg(a, connectivity=4, reject=0, out_type="f64"))
    assert np.isfinite(out).all() and out.max() > 0


def test_bad_input_raises_named_errors(rng):
    a = rng.normal(size=(8, 8, 2))
    with pytest.raises(ValueError, match="connectivity = 6; expected 4 or 8"):
        cubekit.rcmg(a, connectivity=6)
    with pytest.raises(ValueError, match="reject"):
        cubekit.rcmg(a, reject=-1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'radius'"):
        cubekit.rcmg(a, radius=2)
    with pytest.raises(ValueError, match="int64"):
        cubekit.rcmg(a.astype(np.int64))
    with pytest.raises(ValueError, match="dimensions"):
        cubekit.rcmg(np.zeros(5))
    with pytest.raises(ValueError, match="out is"):
        cubekit.rcmg(a, out=np.zeros((8, 7), np.float32))
    with pytest.raises(ValueError, match="precision"):
        cubekit.rcmg(a, precision="f16")


def test_progress_is_called_and_can_stop(rng):
    a = rng.normal(size=(64, 64, 3))
    seen = []
    cubekit.rcmg(a, progress=lambda done, total: seen.append((done, total)))
    assert seen and seen[-1][0] == seen[-1][1]

    def stop(done, total):
        raise RuntimeError("stop here")
    with pytest.raises(RuntimeError, match="stop here"):
        cubekit.rcmg(a, progress=stop)


@gpu
def test_numpy_with_backend_cuda_matches_cpu(samson):
    cube = samson[0]
    np.testing.assert_array_equal(cubekit.rcmg(cube, backend="cuda"), cubekit.rcmg(cube))


@gpu
def test_cupy_in_cupy_out_zero_copy(samson):
    cp = cupy_or_skip()
    cube = samson[0]
    d = cp.asarray(cube)
    g = cubekit.rcmg(d)
    assert isinstance(g, cp.ndarray) and g.shape == (95, 95)
    np.testing.assert_array_equal(cp.asnumpy(g), cubekit.rcmg(cube))
    out = cp.full((95, 95), cp.nan, cp.float32)
    assert cubekit.rcmg(d, out=out) is out
    np.testing.assert_array_equal(cp.asnumpy(out), cubekit.rcmg(cube))
    # a window of a device cube, read in place
    np.testing.assert_array_equal(cp.asnumpy(cubekit.rcmg(d[10:70, 5:90])), cubekit.rcmg(cube[10:70, 5:90]))


@gpu
def test_torch_in_torch_out_on_its_stream(samson):
    torch = torch_cuda_or_skip()
    cube = samson[0]
    t = torch.as_tensor(cube.astype(np.float32), device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        g = cubekit.rcmg(t)
    s.synchronize()
    assert isinstance(g, torch.Tensor) and g.is_cuda
    np.testing.assert_array_equal(g.cpu().numpy(), cubekit.rcmg(cube.astype(np.float32)))


def test_ctrl_c_cancels_and_raises_keyboard_interrupt(rng):
    import signal
    a = rng.normal(size=(256, 256, 8))
    calls = []

    def press_ctrl_c(done, total):
        calls.append(done)
        if len(calls) == 1:
            signal.raise_signal(signal.SIGINT)  # what Ctrl-C does; seen at the next progress check
    with pytest.raises(KeyboardInterrupt):
        cubekit.rcmg(a, progress=press_ctrl_c, threads=1)
    assert calls and calls[-1] < 256 * 256  # stopped before the end
    assert cubekit.rcmg(a[:8, :8]).shape == (8, 8)  # the cached context works again


def test_the_gil_is_released_while_computing(rng):
    import threading
    import time
    a = rng.normal(size=(512, 512, 32))
    ticks = []
    done = threading.Event()

    def count():
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)
    t = threading.Thread(target=count)
    t.start()
    time.sleep(0.01)
    start = time.perf_counter()
    cubekit.rcmg(a, threads=1)
    end = time.perf_counter()
    done.set()
    t.join()
    during = [x for x in ticks if start < x < end]
    assert end - start > 0.05  # long enough to see the other thread run
    assert len(during) >= 5, f"{len(during)} ticks during {end - start:.3f} s"
