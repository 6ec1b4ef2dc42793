"""cubekit.last_timings(): where the last call of a thread spent its time (issue 14, item 5)."""
import threading

import numpy as np

import cubekit
from conftest import gpu


def _cube(h=64, w=48, b=8, seed=3):
    return np.random.default_rng(seed).random((h, w, b), dtype=np.float32)


def test_cpu_call_has_no_copies_and_adds_up():
    g = cubekit.rcmg(_cube())
    t = cubekit.last_timings()
    assert g.shape == (64, 48)
    assert t["backend"] == "cpu"
    assert t["upload_bytes"] == 0 and t["download_bytes"] == 0
    assert t["upload_ms"] == 0 and t["download_ms"] == 0
    assert t["total_ms"] > 0
    assert t["compute_ms"] == t["total_ms"]


def test_each_thread_sees_its_own_last_call():
    cubekit.rcmg(_cube(16, 16, 3))
    mine = cubekit.last_timings()
    seen = {}

    def other():
        seen["before"] = cubekit.last_timings()
        cubekit.entropy_edges(_cube(32, 32, 4).astype(np.uint8))
        seen["after"] = cubekit.last_timings()

    th = threading.Thread(target=other)
    th.start()
    th.join()
    assert seen["before"] == {}
    assert seen["after"]["total_ms"] > 0
    assert cubekit.last_timings() == mine


@gpu
def test_numpy_on_cuda_counts_the_copies_both_ways():
    cube = _cube(512, 640, 24)  # 31 MB: through the pinned ring
    g = cubekit.rcmg(cube, backend="cuda")
    t = cubekit.last_timings()
    assert t["backend"] == "cuda"
    assert t["upload_bytes"] == cube.nbytes
    assert t["download_bytes"] == g.nbytes
    assert t["upload_ms"] > 0 and t["download_ms"] > 0
    assert t["upload_ms"] + t["download_ms"] <= t["total_ms"]
    np.testing.assert_array_equal(g, cubekit.rcmg(cube))  # and the same result as the CPU
