"""`pip install --no-build-isolation .` into a virtual environment with the system's packages,
reusing this build folder (CUBEKIT_BUILD_DIR): the installed package imports and computes."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import cubekit
from conftest import REPO


def test_pip_install_into_a_venv(tmp_path):
    pytest.importorskip("setuptools")
    pytest.importorskip("wheel")
    build = Path(cubekit.__file__).resolve().parents[2]  # <build>/python/cubekit/__init__.py
    if not (build / "CMakeCache.txt").exists():
        pytest.skip("cubekit is not imported from a CMake build folder")
    venv = tmp_path / "venv"
    r = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], capture_output=True,
                       text=True)
    if r.returncode != 0:
        pytest.skip(f"no venv module: {r.stderr.strip()[:200]}")
    if subprocess.run([str(venv / "bin" / "python"), "-c", "import numpy"], capture_output=True).returncode != 0:
        # e.g. an interpreter that is itself a virtual environment: its base has no NumPy
        pytest.skip("the virtual environment's system packages have no NumPy")
    # A copy of the sources, so that pip's own build folders stay out of the repository.
    src = tmp_path / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns("build*", ".git", ".gpu-pack", "out", "__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["CUBEKIT_BUILD_DIR"] = str(build)
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-build-isolation", "--no-deps", "--no-index",
                        str(src)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    check = "import cubekit, numpy as np; print(cubekit.__file__, cubekit.__version__, cubekit.rcmg(np.eye(6)).max())"
    r = subprocess.run([str(venv / "bin" / "python"), "-c", check], capture_output=True, text=True, env=env,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    path, version, peak = r.stdout.split()
    assert str(venv) in path and version == cubekit.__version__ and float(peak) > 0
