"""pip install . — builds the Python module with the project's CMake and packages what it laid out
in <build>/python/cubekit (the compiled _cubekit module, the pure-Python files, the shipped data).

CUBEKIT_BUILD_DIR=<dir> reuses an existing build folder (e.g. the README's `build`: nothing is
compiled twice); by default a folder `build-pip` next to this file is configured and built.
CUBEKIT_CMAKE_ARGS adds CMake arguments (e.g. "-DCUBEKIT_CUDA=OFF").
"""
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = Path(os.environ.get("CUBEKIT_BUILD_DIR", ROOT / "build-pip")).resolve()
        if not (build / "CMakeCache.txt").exists():
            args = ["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                    f"-DPython_EXECUTABLE={sys.executable}", "-DCUBEKIT_TESTS=OFF", "-DCUBEKIT_BENCH=OFF"]
            if shutil.which("ninja"):
                args += ["-G", "Ninja"]
            subprocess.run(args + shlex.split(os.environ.get("CUBEKIT_CMAKE_ARGS", "")), check=True)
        subprocess.run(["cmake", "--build", str(build), "--target", "cubekit_python", "-j", str(os.cpu_count() or 2)],
                       check=True)
        package = build / "python" / "cubekit"
        target = Path(self.get_ext_fullpath(ext.name)).parent  # <wheel>/cubekit
        shutil.copytree(package, target, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))


setup(
    packages=[],
    ext_modules=[Extension("cubekit._cubekit", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
    options={"build": {"build_base": "build-setuptools"}},  # not CMake's build/
)
