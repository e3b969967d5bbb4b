"""The install test: README's one command, `pip install --no-build-isolation .`, run from
the checkout in a fresh virtual environment (`python3 -m venv --system-site-packages`, so Debian's
torch and numpy are visible, as they are to a user's venv), then, from a folder outside the
checkout and without PYTHONPATH: `import sluice` finds the installed package and the libsluice
installed beside it, one batch goes into torch, and its checksums (first batch, a whole epoch of
sluice.torch, a whole epoch of sluice.Pipeline) equal those of the build tree's package for the
same spec and seed.

Run by CTest (tests/python/CMakeLists.txt) as `/usr/bin/python3 -m unittest -v test_install`, with
SLUICE_SOURCE_DIR (the checkout), PYTHONPATH (the build tree's package, the reference),
SLUICE_DATASETS, and setup.py's variables, which reach pip unchanged: SLUICE_BUILD_DIR (its build
folder) and SLUICE_CMAKE_BUILD_DIR. For python.install that is the tree CTest runs in, whose
module and libsluice are up to date: the install builds nothing. For python.install_fresh it is a
new folder that setup.py configures and builds libsluice in, as for a user (kept between runs:
the first builds all of libsluice, from ccache where it can; later ones only what changed).
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import unittest

SOURCE_DIR = os.environ.get("SLUICE_SOURCE_DIR", "")
PIP_BUILD_DIR = os.environ.get("SLUICE_BUILD_DIR", "")
IN_TREE = os.environ.get("PYTHONPATH", "")
DATASETS = os.environ.get("SLUICE_DATASETS", "")
CIFAR_TEST = os.path.join(DATASETS, "cifar10", "test") if DATASETS else ""

# Run in each interpreter: prints what it imported and the checksums, as one JSON line.
PROBE = r"""
import hashlib, json, sys
import sluice, sluice.torch, torch
spec = json.loads(sys.argv[1])
loaded = sorted({line.split()[-1] for line in open("/proc/self/maps") if "libsluice" in line})
loader = sluice.torch.Loader(spec)
images, labels = next(iter(loader))
first = hashlib.sha256(images.contiguous().numpy().tobytes() + labels.numpy().tobytes()).hexdigest()
shape = list(images.shape)
loader.set_epoch(1)
epoch = hashlib.sha256()
for images, labels in loader:
    epoch.update(images.contiguous().numpy().tobytes() + labels.numpy().tobytes())
raw = hashlib.sha256()
for batch in sluice.Pipeline(spec).epoch(1):
    raw.update(torch.from_dlpack(batch.data).numpy().tobytes() + torch.from_dlpack(batch.labels).numpy().tobytes())
print(json.dumps({"package": sluice.__file__, "module": sluice._sluice.__file__, "libsluice": loaded,
                  "version": sluice.__version__, "shape": shape, "first": first,
                  "epoch": epoch.hexdigest(), "pipeline_epoch": raw.hexdigest()}))
"""


def probe_spec():
    """CIFAR's training transform over 200 test images, file order shuffled: random crops and flips
    make the checksums depend on the seed and the epoch."""
    items = []
    for label, name in enumerate(sorted(e.name for e in os.scandir(CIFAR_TEST) if e.is_dir())):
        folder = os.path.join(CIFAR_TEST, name)
        items += [{"path": os.path.join(folder, f), "label": label} for f in sorted(os.listdir(folder))[:20]]
    return {
        "source": {"items": items},
        "shuffle_files": {"seed": 4},
        "stages": ["read", "decode_jpeg", {"random_crop": {"size": 32, "padding": 4}},
                   {"flip_horizontal": {"probability": 0.5}},
                   {"normalize": {"mean": [0.49, 0.48, 0.45], "std": [0.25, 0.24, 0.26], "dtype": "f32"}},
                   {"batch": {"size": 64}}],
        "build": {"threads": 2, "seed": 11},
    }


def clean_environment():
    """This process's environment without what would let the venv import the build tree."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


@unittest.skipUnless(SOURCE_DIR and PIP_BUILD_DIR, "SLUICE_SOURCE_DIR and SLUICE_BUILD_DIR are set by CTest")
@unittest.skipUnless(bool(CIFAR_TEST) and os.path.isdir(CIFAR_TEST),
                     "the shared datasets (cifar10/test) are absent: set SLUICE_DATASETS")
class PipInstallTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="sluice-install-test-")
        self.assertFalse(os.path.realpath(self.tmp).startswith(os.path.realpath(SOURCE_DIR) + os.sep))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_logged(self, command, **kwargs):
        run = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)
        self.assertEqual(run.returncode, 0, f"{' '.join(command)} failed:\n{run.stdout[-6000:]}\n{run.stderr[-6000:]}")
        return run

    def test_pip_install_into_a_fresh_venv_then_import_from_outside_the_checkout(self):
        venv = os.path.join(self.tmp, "venv")
        self.run_logged([sys.executable, "-m", "venv", "--system-site-packages", venv])
        python = os.path.join(venv, "bin", "python")

        env = clean_environment()
        env.update({
            "VIRTUAL_ENV": venv,
            "PATH": os.path.join(venv, "bin") + os.pathsep + env.get("PATH", ""),
            "PIP_NO_INDEX": "1",  # there is no package index here; nothing may be fetched
            "PIP_NO_CACHE_DIR": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        })
        start = time.monotonic()
        # README's command, from the checkout, with the venv active.
        self.run_logged(["pip", "install", "--no-build-isolation", "."], cwd=SOURCE_DIR, env=env)
        print(f"\npip install --no-build-isolation . took {time.monotonic() - start:.0f} s", flush=True)

        site = self.run_logged([python, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
                               env=env, cwd=self.tmp).stdout.strip()
        package = os.path.join(site, "sluice")
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        # One libsluice (a wheel turns symlinks into copies), beside the module.
        self.assertEqual(sorted(f for f in os.listdir(package) if f != "__pycache__"),
                         sorted(["__init__.py", "torch.py", "transforms.py", "datasets.py", f"_sluice{suffix}",
                                 "libsluice.so.0"]))
        if shutil.which("readelf"):
            dynamic = self.run_logged(["readelf", "-d", os.path.join(package, f"_sluice{suffix}")]).stdout
            self.assertIn("[$ORIGIN]", dynamic)

        spec = json.dumps(probe_spec())
        installed = json.loads(self.run_logged([python, "-c", PROBE, spec], env=env, cwd=self.tmp).stdout)
        self.assertEqual(os.path.dirname(installed["package"]), package)
        self.assertEqual(os.path.dirname(installed["module"]), package)
        self.assertEqual(installed["libsluice"], [os.path.join(package, "libsluice.so.0")])
        self.assertEqual(installed["shape"], [64, 3, 32, 32])

        # The build tree's package, the reference, from the same folder outside the checkout.
        reference_env = clean_environment()
        reference_env["PYTHONPATH"] = IN_TREE
        reference = json.loads(self.run_logged([sys.executable, "-c", PROBE, spec], env=reference_env,
                                               cwd=self.tmp).stdout)
        self.assertTrue(reference["package"].startswith(IN_TREE), reference["package"])
        self.assertNotEqual(reference["libsluice"], installed["libsluice"])
        for key in ("version", "first", "epoch", "pipeline_epoch"):
            self.assertEqual(installed[key], reference[key], key)


if __name__ == "__main__":
    unittest.main(verbosity=2)
