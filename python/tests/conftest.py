"""Shared fixtures: the CLI built beside the module (to compare with), random and real data.

Run by CTest (python_tests) with PYTHONPATH=<build>/python and CUBEKIT_CLI=<build>/cubekit; by
hand: PYTHONPATH=build/python CUBEKIT_CLI=build/cubekit /usr/bin/python3 -m pytest python/tests
"""
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import cubekit

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data"


def has_gpu() -> bool:
    return cubekit.cuda_device_count() > 0


def gpu(test):
    """Marks a GPU test: selected by `-m gpu` (scripts/gpu-check runs them, none may skip there),
    skipped where no CUDA device exists."""
    return pytest.mark.gpu(pytest.mark.skipif(not has_gpu(), reason="no CUDA device (runs in scripts/gpu-check)")(test))


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (and CuPy or PyTorch where it says)")


@pytest.fixture(scope="session")
def cli():
    """Runs the cubekit CLI: cli(args...) -> CompletedProcess (stdout/stderr text)."""
    exe = os.environ.get("CUBEKIT_CLI")
    if not exe or not Path(exe).exists():
        pytest.skip("CUBEKIT_CLI not set (CTest sets it)")

    def run(*args, check=True):
        r = subprocess.run([exe, *map(str, args)], capture_output=True, text=True)
        if check and r.returncode != 0:
            raise AssertionError(f"cubekit {' '.join(map(str, args))} exited {r.returncode}: {r.stderr}")
        return r
    return run


@pytest.fixture(scope="session")
def samson():
    cube, meta = cubekit.read(cubekit.data_path("samson"))
    return cube, meta


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def cupy_or_skip():
    cp = pytest.importorskip("cupy")
    if not has_gpu():
        pytest.skip("no CUDA device")
    return cp


def torch_cuda_or_skip():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or not has_gpu():
        pytest.skip("no CUDA device")
    return torch
