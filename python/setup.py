"""Builds the optstate Python package from this repository:

    pip install --no-build-isolation ./python

with Debian's setuptools and pybind11 (python3-pybind11, pybind11-dev) and the
C++ dependencies README.md lists. The native module is the CMake target
optstate_native of the enclosing tree, configured and built under
python/build/cmake (or in OPTSTATE_BUILD_DIR, an existing build directory of
this tree, whose objects it then reuses; a relative one is taken from the
repository's top). torch is optional: only
optstate.safe_load imports it.
"""

import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = os.environ.get("OPTSTATE_BUILD_DIR") or os.path.join(HERE, "build", "cmake")
        build_dir = os.path.join(REPO, build_dir)  # an absolute one stays as it is
        if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
            os.makedirs(build_dir, exist_ok=True)
            subprocess.check_call(["cmake", "-S", REPO, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                                   "-DBUILD_TESTING=OFF", f"-DPython_EXECUTABLE={sys.executable}"])
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "optstate_native",
                               "-j", str(os.cpu_count() or 1)])
        built_dir = os.path.join(build_dir, "python", "optstate")
        module = [f for f in os.listdir(built_dir) if f.startswith("_native") and f.endswith(".so")]
        if len(module) != 1:
            raise RuntimeError(f"expected one _native*.so in {built_dir}, found {module}")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(built_dir, module[0]), target)


def version():
    with open(os.path.join(REPO, "CMakeLists.txt")) as f:
        for line in f:
            if line.startswith("project(optstate VERSION "):
                return line.split()[2]
    raise RuntimeError("no version in CMakeLists.txt")


setup(
    name="optstate",
    version=version(),
    description="Read, check and repair PyTorch optimizer checkpoints without running pickle code",
    packages=["optstate"],
    package_data={"optstate": ["py.typed", "_native.pyi"]},
    ext_modules=[CMakeExtension("optstate._native")],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    extras_require={"torch": ["torch>=1.13"]},
    zip_safe=False,
)
