"""Tests of sluice.torch.Loader (src/python/sluice/torch.py) against Debian's python3-torch: the
tensors it yields equal the raw sluice.Pipeline's bytes and share the batch's slot, their dtype and
layout are what a PyTorch model takes, len(), set_epoch() determinism at any thread count,
state_dict() resume mid-epoch giving exactly the remaining batches, sharding from torchrun's
RANK/WORLD_SIZE, tensors that outlive the next batches and the loader, and the copy that keeps a
loop holding every slot from stopping the loader.

Run by CTest (label python) as `/usr/bin/python3 -m unittest -v test_torch`, like test_sluice.py.
"""

import gc
import io
import os
import threading
import unittest
import warnings

import sluice

try:
    import torch
    import sluice.torch as sluice_torch
except ImportError:  # the module itself does not need torch
    torch = None

DATASETS = os.environ.get("SLUICE_DATASETS", "")
CIFAR_TEST = os.path.join(DATASETS, "cifar10", "test") if DATASETS else ""
TRUNCATED = os.path.join(DATASETS, "corrupt", "truncated.jpg") if DATASETS else ""
MEAN = [0.4914, 0.4822, 0.4465]
STD = [0.2470, 0.2435, 0.2616]
# Long enough that a loader that can deliver does, even on a loaded 2-core CI machine.
DELIVER_TIMEOUT = 120.0


def have_cifar():
    return bool(CIFAR_TEST) and os.path.isdir(CIFAR_TEST)


def cifar_items(per_class, distinct_labels=False):
    """The first `per_class` files of each class of cifar10/test as spec items; with
    distinct_labels each item's label is its own index, so labels identify samples."""
    classes = sorted(e.name for e in os.scandir(CIFAR_TEST) if e.is_dir())
    items = []
    for label, name in enumerate(classes):
        folder = os.path.join(CIFAR_TEST, name)
        for file in sorted(os.listdir(folder))[:per_class]:
            items.append({"path": os.path.join(folder, file), "label": len(items) if distinct_labels else label})
    return items


def train_spec(items, batch=32, threads=2, layout="nchw", dtype="f32", prefetch=None, seed=5):
    """CIFAR's training transform (pad-crop, flip, normalise), file order shuffled per epoch."""
    stages = [
        "read",
        "decode_jpeg",
        {"random_crop": {"size": 32, "padding": 4}},
        {"flip_horizontal": {"probability": 0.5}},
        {"normalize": {"mean": MEAN if dtype != "u8" else [], "std": STD if dtype != "u8" else [],
                       "layout": layout, "dtype": dtype}},
        {"batch": {"size": batch}},
    ]
    if prefetch is not None:
        stages.append({"prefetch": {"depth": prefetch}})
    return {"source": {"items": items}, "shuffle_files": {"seed": 9}, "stages": stages,
            "build": {"threads": threads, "seed": seed}}


def epoch_bytes(loader):
    """One epoch of `loader` as a list of (images bytes, labels list)."""
    return [(images.contiguous().numpy().tobytes(), labels.tolist()) for images, labels in loader]


def pipeline_bytes(pipeline, epoch):
    """The raw module's epoch: data bytes as delivered (the layout the spec says) and labels."""
    out = []
    for batch in pipeline.epoch(epoch):
        out.append((torch.from_dlpack(batch.data).numpy().tobytes(), torch.from_dlpack(batch.labels).tolist()))
    return out


def in_thread(function, timeout):
    """Runs function() on a helper thread for at most `timeout` seconds; returns (finished, result)."""
    result = {}

    def run():
        try:
            result["value"] = function()
        except BaseException as e:  # noqa: BLE001 - reported to the test
            result["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    if "error" in result:
        raise result["error"]
    return not thread.is_alive(), result.get("value")


@unittest.skipUnless(have_cifar(), "the shared datasets (cifar10/test) are absent: set SLUICE_DATASETS")
@unittest.skipUnless(torch is not None, "torch is not importable by this interpreter (use /usr/bin/python3)")
class TensorsTest(unittest.TestCase):
    def test_values_dtype_and_layout_equal_the_pipeline(self):
        items = cifar_items(13)  # 130 images: 4 batches of 32 and one of 2
        spec = train_spec(items)
        loader = sluice_torch.Loader(spec)
        reference = pipeline_bytes(sluice.Pipeline(spec), 0)
        got = []
        for images, labels in loader:
            self.assertEqual(images.dtype, torch.float32)
            self.assertEqual(images.device.type, "cpu")
            self.assertEqual(labels.dtype, torch.int64)
            self.assertEqual(tuple(images.shape[1:]), (3, 32, 32))
            self.assertTrue(images.is_contiguous())
            got.append((images.numpy().tobytes(), labels.tolist()))
        self.assertEqual([len(labels) for _, labels in got], [32, 32, 32, 32, 2])
        self.assertTrue(got == reference, "sluice.torch's epoch differs from sluice.Pipeline's")

    def test_nhwc_is_nchw_in_channels_last_without_a_copy(self):
        spec = train_spec(cifar_items(4), layout="nhwc", dtype="u8")
        reference = pipeline_bytes(sluice.Pipeline(spec), 0)
        loader = sluice_torch.Loader(spec)
        for (images, labels), (data, _) in zip(loader, reference):
            self.assertEqual(tuple(images.shape[1:]), (3, 32, 32))
            self.assertEqual(images.dtype, torch.uint8)
            self.assertTrue(images.is_contiguous(memory_format=torch.channels_last))
            # The NHWC bytes as delivered: the permuted view of the same memory.
            self.assertEqual(images.permute(0, 2, 3, 1).numpy().tobytes(), data)
        self.assertEqual(loader.copied_batches, 0)

    def test_half_precision_dtypes(self):
        for dtype, expected in (("f16", torch.float16), ("bf16", torch.bfloat16)):
            spec = train_spec(cifar_items(2), dtype=dtype)
            images, labels = next(iter(sluice_torch.Loader(spec)))
            self.assertEqual(images.dtype, expected)
            raw = next(iter(sluice.Pipeline(spec).epoch(0)))
            self.assertTrue(torch.equal(images, torch.from_dlpack(raw.data)), dtype)

    def test_images_share_the_slot_and_labels_do_not(self):
        loader = sluice_torch.Loader(train_spec(cifar_items(4)))
        iterator = iter(loader)
        images, labels = next(iterator)
        self.assertEqual(loader.pipeline.batches_held, 1)  # held by the images tensor alone
        view = images[3]
        del images
        gc.collect()
        self.assertEqual(loader.pipeline.batches_held, 1)  # a view keeps it too
        del view
        gc.collect()
        self.assertEqual(loader.pipeline.batches_held, 0)  # the labels tensor is a copy
        self.assertEqual(len(labels), 32)

    def test_a_tiny_model_trains_on_the_batches(self):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                    torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 10))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = sluice_torch.Loader(train_spec(cifar_items(10)), drop_last=True)
        losses = []
        for images, labels in loader:
            loss = torch.nn.functional.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        self.assertEqual(len(losses), 3)
        self.assertTrue(all(l == l and l < 10 for l in losses), losses)  # finite


@unittest.skipUnless(have_cifar(), "the shared datasets (cifar10/test) are absent: set SLUICE_DATASETS")
@unittest.skipUnless(torch is not None, "torch is not importable by this interpreter (use /usr/bin/python3)")
class EpochsTest(unittest.TestCase):
    def test_len_batch_size_and_drop_last(self):
        items = cifar_items(13)  # 130
        self.assertEqual(len(sluice_torch.Loader(train_spec(items))), 5)
        self.assertEqual(len(sluice_torch.Loader(train_spec(items), drop_last=True)), 4)
        loader = sluice_torch.Loader(train_spec(items), batch_size=50)
        self.assertEqual((len(loader), loader.batch_size, loader.drop_last), (3, 50, False))
        self.assertEqual([len(labels) for _, labels in loader], [50, 50, 30])
        # A spec without a batch stage takes batch_size (and needs it).
        spec = train_spec(items)
        del spec["stages"][5]
        self.assertEqual(len(sluice_torch.Loader(spec, batch_size=64, drop_last=True)), 2)
        with self.assertRaises(ValueError) as caught:
            sluice_torch.Loader(spec)
        self.assertIn("batch_size", str(caught.exception))
        with self.assertRaises(ValueError) as caught:
            sluice_torch.Loader(train_spec(items), batch_size=0)
        self.assertIn("batch_size", str(caught.exception))

    def test_set_epoch_is_deterministic_at_any_thread_count(self):
        items = cifar_items(8)
        one = sluice_torch.Loader(train_spec(items, threads=1))
        two = sluice_torch.Loader(train_spec(items, threads=2))
        one.set_epoch(3)
        first = epoch_bytes(one)
        one.set_epoch(3)
        self.assertTrue(epoch_bytes(one) == first, "epoch 3 twice differs")
        two.set_epoch(3)
        self.assertTrue(epoch_bytes(two) == first, "epoch 3 differs between 1 and 2 threads")
        four = epoch_bytes(two)  # without set_epoch: the next epoch, 4
        self.assertNotEqual(four, first)
        one.set_epoch(4)
        self.assertTrue(epoch_bytes(one) == four)
        # The seed keyword changes every random choice.
        reseeded = sluice_torch.Loader(train_spec(items, threads=1), seed=6)
        reseeded.set_epoch(3)
        self.assertNotEqual(epoch_bytes(reseeded), first)

    def test_iteration_walks_epochs_from_zero(self):
        items = cifar_items(4)
        loader = sluice_torch.Loader(train_spec(items))
        raw = sluice.Pipeline(train_spec(items))
        for epoch in range(3):
            self.assertTrue(epoch_bytes(loader) == pipeline_bytes(raw, epoch), f"epoch {epoch}")

    def test_state_dict_resumes_mid_epoch_with_exactly_the_remaining_batches(self):
        items = cifar_items(16)  # 160 images: 5 batches of 32
        spec = train_spec(items)
        whole = sluice_torch.Loader(spec)
        whole.set_epoch(2)
        expected = epoch_bytes(whole) + epoch_bytes(whole)  # epochs 2 and 3

        interrupted = sluice_torch.Loader(spec)
        interrupted.set_epoch(2)
        seen = []
        for images, labels in interrupted:
            seen.append((images.numpy().tobytes(), labels.tolist()))
            if len(seen) == 2:
                state = interrupted.state_dict()
                break
        self.assertEqual((state["epoch"], state["batch"]), (2, 2))
        buffer = io.BytesIO()  # through torch.save, as a checkpoint keeps it
        torch.save({"loader": state}, buffer)
        buffer.seek(0)
        state = torch.load(buffer)["loader"]

        resumed = sluice_torch.Loader(spec)
        resumed.load_state_dict(state)
        again = resumed.state_dict()  # before iterating: still where it was saved
        self.assertEqual((again["epoch"], again["batch"]), (2, 2))
        rest = epoch_bytes(resumed)
        self.assertEqual(len(rest), 3)
        self.assertTrue(seen + rest == expected[:5], "the resumed epoch is not the remaining batches")
        self.assertTrue(epoch_bytes(resumed) == expected[5:], "the epoch after the resumed one differs")
        end = resumed.state_dict()
        self.assertEqual((end["epoch"], end["batch"]), (4, 0))

    def test_state_dict_between_epochs_and_bad_states(self):
        items = cifar_items(4)
        spec = train_spec(items)
        loader = sluice_torch.Loader(spec)
        loader.set_epoch(7)
        state = loader.state_dict()
        self.assertEqual((state["epoch"], state["batch"]), (7, 0))
        other = sluice_torch.Loader(spec)
        other.load_state_dict(state)
        loader.set_epoch(7)
        self.assertTrue(epoch_bytes(other) == epoch_bytes(loader))
        with self.assertRaises(ValueError):
            other.load_state_dict({"version": 1, "epoch": 0, "batch": 0, "pipeline": b"not a state"})
        with self.assertRaises(ValueError):
            other.load_state_dict({"epoch": 0})
        different = sluice_torch.Loader(spec, seed=99)  # another pipeline's state is refused
        with self.assertRaises(ValueError) as caught:
            different.load_state_dict(state)
        self.assertIn("different pipeline", str(caught.exception))

    def test_bad_file_raises_from_the_loop(self):
        if not os.path.exists(TRUNCATED):
            self.skipTest("corrupt/truncated.jpg is absent")
        spec = train_spec(cifar_items(3) + [{"path": TRUNCATED, "label": 0}], batch=8)
        spec["stages"][2] = {"resize": {"size": 32}}  # the truncated file is 100x100
        loader = sluice_torch.Loader(spec)
        with self.assertRaises(sluice.Error) as caught:
            for _ in loader:
                pass
        self.assertIn("truncated.jpg", str(caught.exception))
        self.assertEqual(loader.state_dict()["batch"], 0)  # nothing of the failed epoch to resume


@unittest.skipUnless(have_cifar(), "the shared datasets (cifar10/test) are absent: set SLUICE_DATASETS")
@unittest.skipUnless(torch is not None, "torch is not importable by this interpreter (use /usr/bin/python3)")
class LauncherShardTest(unittest.TestCase):
    NAMES = ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
             "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS")

    def setUp(self):
        self.saved = {name: os.environ.pop(name) for name in self.NAMES if name in os.environ}

    def tearDown(self):
        for name in self.NAMES:
            os.environ.pop(name, None)
        os.environ.update(self.saved)

    def test_torchrun_ranks_split_the_epoch(self):
        items = cifar_items(5, distinct_labels=True)  # 50 images, labels 0..49
        spec = train_spec(items, batch=8)
        spec["stages"][2] = {"center_crop": {"size": 32}}
        labels = []
        for rank in range(3):
            os.environ["RANK"] = str(rank)
            os.environ["WORLD_SIZE"] = "3"
            loader = sluice_torch.Loader(spec, shard="launcher")
            self.assertEqual(loader.pipeline.spec["shard"], {"rank": rank, "world": 3})
            mine = []
            for _, batch_labels in loader:
                kept = batch_labels.tolist()
                mine += kept[:len(kept) - loader.last_padding]  # rank 2 repeats one of its 16
            self.assertEqual(len(loader), 3)  # 17 positions of 8 on every rank
            self.assertEqual(len(mine), 17 if rank < 2 else 16)
            labels.append(mine)
        union = [label for mine in labels for label in mine]
        self.assertEqual(sorted(union), list(range(50)))  # disjoint, and together the whole epoch


@unittest.skipUnless(have_cifar(), "the shared datasets (cifar10/test) are absent: set SLUICE_DATASETS")
@unittest.skipUnless(torch is not None, "torch is not importable by this interpreter (use /usr/bin/python3)")
class ResizeTest(unittest.TestCase):
    """A job of 4 ranks (shard=(rank, 4), in one process) stopped mid-epoch and resumed at 2 and
    at 3 ranks from rank 0's state_dict(): every label of the epoch once, equal len() per rank."""

    def run_ranks(self, spec, world, global_batch, state=None, stop=None):
        labels, states, lengths = [], [], []
        for rank in range(world):
            loader = sluice_torch.Loader(spec, shard=(rank, world), batch_size=global_batch // world)
            if state is not None:
                loader.load_state_dict(state)
            lengths.append(len(loader))
            for step, (_, batch_labels) in enumerate(loader):
                kept = batch_labels.tolist()
                labels += kept[:len(kept) - loader.last_padding]
                if stop is not None and step + 1 == stop:
                    break
            states.append(loader.state_dict())
        self.assertEqual(len(set(lengths)), 1, f"len() differs across {world} ranks: {lengths}")
        self.assertTrue(all(s["pipeline"] == states[0]["pipeline"] for s in states), "ranks saved other states")
        return labels, states[0]

    def test_resume_at_another_world_size_delivers_every_sample_once(self):
        items = cifar_items(5, distinct_labels=True)  # 50 images, labels 0..49
        spec = train_spec(items, batch=12)
        spec["stages"][2] = {"center_crop": {"size": 32}}
        spec.setdefault("build", {})["threads"] = 1
        before, state = self.run_ranks(spec, 4, 12, stop=2)
        self.assertEqual(len(before), 24)
        for world in (2, 3):
            after, end = self.run_ranks(spec, world, 12, state=state)
            self.assertEqual(sorted(before + after), list(range(50)), f"4 -> {world} ranks")
            self.assertEqual(end["epoch"], 1)
        with self.assertRaises(ValueError) as caught:  # 12 does not split over 5 ranks
            sluice_torch.Loader(spec, shard=(0, 5), batch_size=2).load_state_dict(state)
        self.assertIn("1, 2, 3, 4, 6, 12", str(caught.exception))


@unittest.skipUnless(have_cifar(), "the shared datasets (cifar10/test) are absent: set SLUICE_DATASETS")
@unittest.skipUnless(torch is not None, "torch is not importable by this interpreter (use /usr/bin/python3)")
class LifetimeTest(unittest.TestCase):
    def test_a_kept_tensor_outlives_the_next_batches_and_the_loader(self):
        spec = train_spec(cifar_items(20), prefetch=2)  # a ring of 4 slots, reused every 4 batches
        loader = sluice_torch.Loader(spec)
        self.assertEqual(loader.pipeline.batch_slots, 4)
        iterator = iter(loader)
        kept, _ = next(iterator)
        values = kept.clone()
        pointer = kept.data_ptr()
        for _ in range(6):  # more batches than the ring has slots: none may be written into `kept`
            images, _ = next(iterator)
            self.assertNotEqual(images.data_ptr(), pointer)
        del images
        gc.collect()
        self.assertEqual(loader.copied_batches, 0)
        self.assertEqual(loader.pipeline.batches_held, 1)  # `kept` is the batch's own memory, not a copy
        self.assertTrue(torch.equal(kept, values))
        del iterator, loader
        gc.collect()
        self.assertTrue(torch.equal(kept, values))  # the slot outlives the loader that made it

    def test_holding_every_slot_copies_instead_of_stopping(self):
        spec = train_spec(cifar_items(20), batch=16, prefetch=1)  # 200 images: 13 batches, 3 slots
        reference = epoch_bytes(sluice_torch.Loader(spec))
        loader = sluice_torch.Loader(spec)
        self.assertEqual(loader.pipeline.batch_slots, 3)

        def keep_all():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                kept = [(images, labels) for images, labels in loader]
            return kept, caught

        finished, result = in_thread(keep_all, DELIVER_TIMEOUT)
        self.assertTrue(finished, "the loader stopped while the loop held its batches")
        kept, caught = result
        self.assertEqual(len(kept), 13)
        # The first two batches stay shared; each later one would have taken the last free slot.
        self.assertEqual(loader.copied_batches, 11)
        self.assertTrue(any(issubclass(w.category, RuntimeWarning) and "copied" in str(w.message) for w in caught))
        self.assertTrue([(i.numpy().tobytes(), l.tolist()) for i, l in kept] == reference)
        self.assertEqual(loader.pipeline.batches_held, 2)


@unittest.skipUnless(torch is not None, "torch is not importable by this interpreter (use /usr/bin/python3)")
class DeviceAndSpecTest(unittest.TestCase):
    def spec(self):
        return {"source": {"folder": CIFAR_TEST or "/nonexistent"}, "stages": ["read", "decode_jpeg",
                {"normalize": {"dtype": "f32"}}, {"batch": {"size": 8}}]}

    def test_cuda_without_a_device_is_a_clear_error(self):
        if torch.cuda.is_available():
            self.skipTest("a CUDA device is present")
        if not have_cifar():
            self.skipTest("the shared datasets (cifar10/test) are absent: set SLUICE_DATASETS")
        with self.assertRaises(sluice.Error) as caught:
            sluice_torch.Loader(self.spec(), device="cuda")
        self.assertIn("cuda", str(caught.exception).lower())
        spec = self.spec()  # the spec's own to_device stage (names are case-insensitive there)
        spec["stages"].append({"to_device": {"device": "CUDA:0"}})
        with self.assertRaises(sluice.Error) as caught:
            sluice_torch.Loader(spec)
        self.assertIn("cuda", str(caught.exception).lower())

    @unittest.skipUnless(torch is not None and torch.cuda.is_available(), "no CUDA device")
    def test_cuda_batches_equal_the_cpu_ones(self):
        spec = train_spec(cifar_items(4))
        on_gpu = sluice_torch.Loader(spec, device="cuda")
        self.assertEqual(on_gpu.device.type, "cuda")
        got = [(i.cpu().numpy().tobytes(), l.tolist()) for i, l in on_gpu]
        self.assertTrue(got == epoch_bytes(sluice_torch.Loader(spec)))

    def test_bad_keywords(self):
        spec = self.spec()
        spec["stages"].append({"to_device": {"device": "cuda:0"}})
        with self.assertRaises(ValueError) as caught:
            sluice_torch.Loader(spec, device="cpu")
        self.assertIn("to_device", str(caught.exception))
        for keywords, word in (({"device": "mps"}, "device"), ({"device": "nonsense"}, "device"),
                               ({"drop_last": 1}, "drop_last"), ({"seed": -1}, "seed")):
            with self.assertRaises(ValueError) as caught:
                sluice_torch.Loader(self.spec(), **keywords)
            self.assertIn(word, str(caught.exception))
            self.assertIsInstance(caught.exception, sluice.InvalidArgumentError)
        with self.assertRaises(TypeError):
            sluice_torch.Loader(42)
        with self.assertRaises(FileNotFoundError):
            sluice_torch.Loader("/nonexistent-sluice-spec.json")

    @unittest.skipUnless(have_cifar(), "the shared datasets (cifar10/test) are absent: set SLUICE_DATASETS")
    def test_spec_file_paths_resolve_against_its_folder(self):
        import json
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            os.symlink(CIFAR_TEST, os.path.join(tmp, "data"))
            spec = self.spec()
            spec["source"] = {"folder": "data"}
            path = os.path.join(tmp, "spec.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(spec, f)
            loader = sluice_torch.Loader(path, batch_size=1000)
            self.assertEqual(len(loader), 10)
            self.assertEqual(loader.pipeline.spec["source"]["folder"], os.path.join(tmp, "data"))


@unittest.skipUnless(have_cifar(), "the shared datasets (cifar10/test) are absent: set SLUICE_DATASETS")
@unittest.skipUnless(torch is not None, "torch is not importable by this interpreter (use /usr/bin/python3)")
class ExampleTest(unittest.TestCase):
    """examples/torch_loader.py stays runnable: both loaders, and a resume from its checkpoint."""

    EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "torch_loader.py")

    def run_example(self, *args):
        import subprocess
        import sys

        run = subprocess.run([sys.executable, self.EXAMPLE, "--data", CIFAR_TEST, "--steps", "3", "--batch", "32",
                              "--device", "cpu", *args], capture_output=True, text=True, check=False, timeout=300)
        self.assertEqual(run.returncode, 0, run.stderr[-4000:])
        return run.stdout.splitlines()

    def test_sluice_then_resume_then_torch(self):
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            checkpoint = os.path.join(tmp, "checkpoint.pt")
            lines = self.run_example("--epochs", "1", "--checkpoint", checkpoint)
            self.assertEqual(len(lines), 1)
            self.assertTrue(lines[0].startswith("epoch 0: 96 images"), lines)
            lines = self.run_example("--epochs", "2", "--checkpoint", checkpoint)
            self.assertEqual(lines[0], "resumed at epoch 0, batch 3")  # the loop stopped after 3 steps
            self.assertTrue(lines[1].startswith("epoch 0: 96 images") and lines[2].startswith("epoch 1: 96 images"), lines)
        lines = self.run_example("--loader", "torch", "--workers", "0")
        self.assertTrue(lines[0].startswith("epoch 0: 96 images") and "(torch," in lines[0], lines)


if __name__ == "__main__":
    unittest.main(verbosity=2)
