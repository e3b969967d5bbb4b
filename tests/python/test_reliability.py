"""Python driven as a careless user would (docs/reliability.md): epochs past 2**63 - 1
are a sluice.Error naming the range, not pybind's TypeError; a thread count past the bound is
refused; after os.fork() a child whose parent had started a loader's workers fails at once with
a message that says to use the spawn start method (it used to hang forever). Each forked child
runs under an alarm, so a hang fails the test instead of blocking it."""

import os
import signal
import tempfile
import unittest

import sluice

try:
    from PIL import Image
except ImportError:  # pragma: no cover - Debian's python3-pil is a test dependency
    Image = None


def make_folder(root, classes=2, per_class=2):
    for c in range(classes):
        os.makedirs(os.path.join(root, f"c{c}"))
        for i in range(per_class):
            Image.new("RGB", (16, 16), (40 * c, 20 * i, 90)).save(os.path.join(root, f"c{c}", f"{i}.jpg"))


def spec(root, threads=2):
    return {"source": {"folder": root},
            "stages": ["read", "decode_jpeg", {"resize": {"size": 8}}, {"batch": {"size": 2}}],
            "build": {"threads": threads}}


@unittest.skipIf(Image is None, "PIL not installed")
class Reliability(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        make_folder(self.dir.name)

    def tearDown(self):
        self.dir.cleanup()

    def test_an_epoch_past_int64_is_a_sluice_error(self):
        pipeline = sluice.Pipeline(spec(self.dir.name))
        for epoch in (2**63, -1, "3", True):
            with self.assertRaises(sluice.Error) as caught:
                pipeline.epoch(epoch)
            self.assertIn("expected an integer from 0 to", str(caught.exception))
        self.assertEqual(sum(1 for _ in pipeline.epoch(2**63 - 1)), 2)

    def test_torch_set_epoch_past_int64_is_a_sluice_error(self):
        try:
            import sluice.torch as sluice_torch
        except ImportError:
            self.skipTest("torch not installed")
        loader = sluice_torch.Loader(spec(self.dir.name))
        with self.assertRaises(sluice.Error):
            loader.set_epoch(2**63)

    def test_threads_past_the_bound_are_refused(self):
        with self.assertRaises(sluice.Error) as caught:
            sluice.Pipeline(spec(self.dir.name, threads=100000))
        self.assertIn("threads", str(caught.exception))

    def _in_child(self, body):
        """Runs body() in a forked child under a 30 s alarm; returns its exit code."""
        pid = os.fork()
        if pid == 0:
            signal.alarm(30)
            code = 12
            try:
                code = body()
            except sluice.Error as e:
                code = 11 if "'spawn' start method" in str(e) else 13
            except BaseException:
                code = 14
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status)

    def test_a_forked_child_fails_at_once_and_says_to_use_spawn(self):
        parent = sluice.Pipeline(spec(self.dir.name))
        self.assertEqual(sum(1 for _ in parent.epoch(0)), 2)

        def build_in_child():
            child = sluice.Pipeline(spec(self.dir.name))
            sum(1 for _ in child.epoch(0))
            return 10

        def reuse_in_child():
            sum(1 for _ in parent.epoch(1))
            return 10

        self.assertEqual(self._in_child(build_in_child), 11)
        self.assertEqual(self._in_child(reuse_in_child), 11)
        self.assertEqual(sum(1 for _ in parent.epoch(2)), 2)  # the parent goes on


if __name__ == "__main__":
    unittest.main()
