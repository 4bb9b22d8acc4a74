"""Builds tessera._tessera and tessera-worker with CMake and puts both into the package.

pip runs this through setuptools (pyproject.toml). The CMake build lives in build/pip (reused by
the next install), configured like scripts/build.sh (RelWithDebInfo) without tests or
benchmarks, for the interpreter running pip. CMAKE_BUILD_PARALLEL_LEVEL sets the jobs (default:
all CPUs). The worker goes to tessera/bin/tessera-worker, where Cluster.up() finds it.
"""

import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeExtension(Extension):
    def __init__(self, name: str):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        build_dir = os.path.join(ROOT, "build", "pip")
        configure = [
            "cmake", "-S", ROOT, "-B", build_dir,
            "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
            "-DTESSERA_BUILD_TESTS=OFF",
            "-DTESSERA_BUILD_BENCHMARKS=OFF",
            f"-DPython3_EXECUTABLE={sys.executable}",
        ]
        subprocess.run(configure, check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        subprocess.run(["cmake", "--build", build_dir, "--target", "_tessera", "tessera-worker", "-j", jobs],
                       check=True)
        module_dir = os.path.join(build_dir, "python", "tessera")
        built = [name for name in os.listdir(module_dir) if name.startswith("_tessera") and name.endswith(".so")]
        if len(built) != 1:
            raise RuntimeError(f"expected one _tessera*.so in {module_dir}, found {built}")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(os.path.join(module_dir, built[0]), target)
        worker_dir = os.path.join(os.path.dirname(target), "bin")
        os.makedirs(worker_dir, exist_ok=True)
        shutil.copy2(os.path.join(build_dir, "bin", "tessera-worker"), os.path.join(worker_dir, "tessera-worker"))


setup(ext_modules=[CMakeExtension("tessera._tessera")], cmdclass={"build_ext": CMakeBuild})
