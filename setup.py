"""Builds and installs the Python package sluice with CMake, for the interpreter that runs pip:

    pip install --no-build-isolation .          # from the checkout, in the environment to install into

Debian 12 has no scikit-build, so setuptools drives CMake itself: build_ext configures a build
folder (the first time), builds the module's target (libsluice with it), and `cmake --install
--component python` puts sluice/ (the compiled module, its pure-Python modules and libsluice,
which the module finds through its $ORIGIN RPATH) into the wheel. Nothing is downloaded:
--no-build-isolation uses the setuptools and wheel already installed (python3-setuptools,
python3-wheel), and CMake finds what scripts/setup installed.

Environment:
  SLUICE_BUILD_DIR        where the build lives (default: build-pip/ in the checkout): CMake's
                          build folder in cmake/, setuptools' in setuptools/. Kept between
                          installs, so a second install rebuilds only what changed.
  SLUICE_CMAKE_BUILD_DIR  CMake's build folder elsewhere. setup.py configures it when it is new
                          (or was configured by setup.py with other arguments); a build folder of
                          this checkout configured by hand (e.g. build/, with the Python module)
                          is used as it is: its module and libsluice brought up to date and
                          installed, its configuration left alone.
  SLUICE_CMAKE_ARGS       extra CMake configure arguments, e.g. "-DSLUICE_WITH_CUDA=OFF"; a change
                          reconfigures.
  CMAKE_BUILD_PARALLEL_LEVEL   build jobs (default: all cores).
ccache is used when it is on PATH. `pip install -v` shows CMake's output.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
WORK = Path(os.environ.get("SLUICE_BUILD_DIR") or ROOT / "build-pip").resolve()
CMAKE_DIR = Path(os.environ.get("SLUICE_CMAKE_BUILD_DIR") or WORK / "cmake").resolve()
# Written by configure(): a CMake folder without it was configured by someone else.
STAMP = CMAKE_DIR / "setup-py-configure.txt"
# What a build of the package needs, and nothing the package does not ship (tests, benchmarks,
# examples, the command line).
CONFIGURE_OPTIONS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DSLUICE_BUILD_PYTHON=ON",
    "-DSLUICE_BUILD_TESTS=OFF",
    "-DSLUICE_BUILD_BENCH=OFF",
    "-DSLUICE_BUILD_EXAMPLES=OFF",
    "-DSLUICE_BUILD_CLI=OFF",
    "-DSLUICE_SHARED=ON",
]


def project_version():
    """The version in CMakeLists.txt's project(), so the wheel and the module agree."""
    text = (ROOT / "CMakeLists.txt").read_text(encoding="utf-8")
    match = re.search(r"project\(\s*sluice\s+VERSION\s+([0-9][0-9.]*)", text)
    if not match:
        raise RuntimeError("setup.py: no project(sluice VERSION x.y.z) in CMakeLists.txt")
    return match.group(1)


def run(command, **kwargs):
    print("setup.py: " + shlex.join(str(c) for c in command), flush=True)
    subprocess.run([str(c) for c in command], check=True, **kwargs)


class CMakeExtension(Extension):
    """The compiled module sluice._sluice, built by CMake rather than by setuptools."""

    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        cmake = shutil.which("cmake")
        if cmake is None:
            raise RuntimeError("setup.py: cmake not found (scripts/setup installs it)")
        if (CMAKE_DIR / "CMakeCache.txt").exists() and not STAMP.exists():
            self.check_existing_build()
        else:
            self.configure(cmake)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        run([cmake, "--build", CMAKE_DIR, "--target", "sluice_python", "--parallel", jobs])
        # The folder that holds the package: build_lib for a wheel.
        prefix = Path(self.get_ext_fullpath(ext.name)).resolve().parent.parent
        run([cmake, "--install", CMAKE_DIR, "--component", "python", "--prefix", prefix])
        self.check_module(prefix / "sluice")
        self.resolve_library_links(prefix / "sluice")

    def configure(self, cmake):
        """Configures CMAKE_DIR the first time, and again when the interpreter or the extra
        arguments change; otherwise the build reconfigures itself when CMake files change."""
        extra = shlex.split(os.environ.get("SLUICE_CMAKE_ARGS", ""))
        # The interpreter behind a venv's python symlink: the same headers and ABI, and one
        # configuration for every venv made from it.
        options = CONFIGURE_OPTIONS + [f"-DPython3_EXECUTABLE={os.path.realpath(sys.executable)}"] + extra
        if shutil.which("ninja"):
            options = ["-G", "Ninja"] + options
        if shutil.which("ccache"):
            options += [f"-DCMAKE_{lang}_COMPILER_LAUNCHER=ccache" for lang in ("C", "CXX", "CUDA")]
        wanted = "\n".join(options)
        if (CMAKE_DIR / "CMakeCache.txt").exists() and STAMP.read_text() == wanted:
            return
        CMAKE_DIR.mkdir(parents=True, exist_ok=True)
        run([cmake, "-S", ROOT, "-B", CMAKE_DIR] + options)
        STAMP.write_text(wanted)

    @staticmethod
    def check_existing_build():
        """A CMake folder configured by hand must be this checkout's, with the Python module."""
        cache = CMAKE_DIR / "CMakeCache.txt"
        entries = dict(re.findall(r"^([A-Za-z_0-9]+):[A-Z]+=(.*)$", cache.read_text(encoding="utf-8"), re.M))
        source = entries.get("CMAKE_HOME_DIRECTORY", "")
        if not source or Path(source).resolve() != ROOT:
            raise RuntimeError(f"setup.py: {CMAKE_DIR} is a build folder of {source or 'another project'}, not of {ROOT}")
        if entries.get("SLUICE_BUILD_PYTHON", "AUTO").upper() in ("OFF", "0", "FALSE", "NO"):
            raise RuntimeError(f"setup.py: {CMAKE_DIR} is configured with SLUICE_BUILD_PYTHON=OFF")

    @staticmethod
    def check_module(package):
        """The module must be built for this interpreter: its file name carries the ABI tag."""
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        if not (package / f"_sluice{suffix}").exists():
            found = sorted(p.name for p in package.glob("_sluice*"))
            raise RuntimeError(f"setup.py: expected {package / ('_sluice' + suffix)} for {sys.executable}, "
                               f"found {found}: the build folder {CMAKE_DIR} was configured for another "
                               "Python; remove it or set SLUICE_BUILD_DIR")

    @staticmethod
    def resolve_library_links(package):
        """A wheel stores a symlink as a second copy of its target: keep libsluice once, as the
        real file under the name the module asks for (its SONAME, libsluice.so.0)."""
        for link in list(package.glob("libsluice.so*")):
            if link.is_symlink():
                target = link.resolve()
                link.unlink()
                os.replace(target, link)


WORK.mkdir(parents=True, exist_ok=True)
setup(
    version=project_version(),
    packages=["sluice"],
    package_dir={"": "src/python"},
    ext_modules=[CMakeExtension("sluice._sluice")],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
    # Everything setuptools writes goes under the build folder, none into the checkout.
    options={"build": {"build_base": str(WORK / "setuptools")}, "egg_info": {"egg_base": str(WORK)}},
)
