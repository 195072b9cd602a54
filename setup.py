"""Builds the extension kmeans_gpu._core with the project's CMake build, for pip and `pip wheel`.

The build directory is $KMEANS_BUILD_DIR, else build/ in the source tree: the one scripts/setup.sh
builds, so that an installed copy is the tested build and a second install compiles nothing.
"""
import os
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = os.environ.get("KMEANS_BUILD_DIR", os.path.join(ROOT, "build"))
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):  # a new build, for this interpreter
            configure = ["cmake", "-S", ROOT, "-B", build, f"-DPython_EXECUTABLE={sys.executable}"]
            subprocess.run(configure + (["-G", "Ninja"] if shutil.which("ninja") else []), check=True,
                           stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", build, "--target", "kmeans_gpu_core", "-j", str(os.cpu_count() or 2)],
                       check=True)
        name = "_core" + sysconfig.get_config_var("EXT_SUFFIX")
        built = os.path.join(build, "python", "kmeans_gpu", name)
        if not os.path.exists(built):
            raise RuntimeError(f"the CMake build made no {built} (is pybind11-dev installed?)")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built, target)


setup(ext_modules=[CMakeExtension("kmeans_gpu._core")], cmdclass={"build_ext": CMakeBuild})
