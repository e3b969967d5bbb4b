"""Tests of the Python module `sluice` (src/python) against Debian's python3-torch: DLPack tensors
share the batch's memory, their values equal the C++ iterator's byte for byte, a batch's slot
returns to the ring when its last tensor is dropped, and bad specs raise the right exception
naming the field.

Run by CTest (label python) as `/usr/bin/python3 -m unittest -v test_sluice` with PYTHONPATH at
the built module, SLUICE_DATASETS at the shared datasets and SLUICE_REFERENCE_DUMP at
python_reference_dump (tests/python/CMakeLists.txt). Tests that need the datasets, torch or the
dump program skip, saying so, when they are absent.
"""

import gc
import json
import os
import tempfile
import threading
import unittest
import urllib.request

import sluice

try:
    import torch
except ImportError:  # the module itself does not need torch
    torch = None
try:
    import numpy as np
except ImportError:
    np = None

DATASETS = os.environ.get("SLUICE_DATASETS", "")
CIFAR_TEST = os.path.join(DATASETS, "cifar10", "test") if DATASETS else ""
TRUNCATED = os.path.join(DATASETS, "corrupt", "truncated.jpg") if DATASETS else ""
REFERENCE_DUMP = os.environ.get("SLUICE_REFERENCE_DUMP", "")
CIFAR_MEAN = [0.4914, 0.4822, 0.4465]
CIFAR_STD = [0.2470, 0.2435, 0.2616]
# Long enough that a pipeline that can deliver does, even on a loaded 2-core CI machine.
DELIVER_TIMEOUT = 60.0
# How long a next() that should be blocked is given to prove it is not.
BLOCKED_TIMEOUT = 1.5


def have_cifar():
    return bool(CIFAR_TEST) and os.path.isdir(CIFAR_TEST)


def cifar_items(per_class):
    """The first `per_class` files of each class of cifar10/test, as spec items (absolute paths)."""
    classes = sorted(e.name for e in os.scandir(CIFAR_TEST) if e.is_dir())
    items = []
    for label, name in enumerate(classes):
        folder = os.path.join(CIFAR_TEST, name)
        for file in sorted(os.listdir(folder))[:per_class]:
            items.append({"path": os.path.join(folder, file), "label": label})
    return items


def cifar_spec(items, batch=64, prefetch=1, threads=2, dtype="f32", seed=3):
    """The CIFAR training transform (pad-crop, flip, normalise) over `items`, file order shuffled."""
    return {
        "source": {"items": items},
        "shuffle_files": {"seed": 7},
        "stages": [
            "read",
            "decode_jpeg",
            {"random_crop": {"size": 32, "padding": 4}},
            {"flip_horizontal": {"probability": 0.5}},
            # u8 output keeps the pixels as they are (no mean/std): normalised values need a float.
            {"normalize": {"mean": CIFAR_MEAN if dtype != "u8" else [],
                           "std": CIFAR_STD if dtype != "u8" else [], "layout": "nchw", "dtype": dtype}},
            {"batch": {"size": batch}},
            {"prefetch": {"depth": prefetch}},
        ],
        "build": {"threads": threads, "seed": seed},
    }


def next_in_thread(iterator, timeout):
    """next(iterator) on a helper thread, waited for at most `timeout` seconds. Returns the thread
    (alive if next() is still blocked) and a dict that gets 'batch' or 'error'."""
    result = {}

    def run():
        try:
            result["batch"] = next(iterator)
        except BaseException as e:  # noqa: BLE001 - reported to the test
            result["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    return thread, result


@unittest.skipUnless(have_cifar(), "the shared datasets (cifar10/test) are absent: set SLUICE_DATASETS")
@unittest.skipUnless(torch is not None, "torch is not importable by this interpreter (use /usr/bin/python3)")
class DlpackTest(unittest.TestCase):
    def test_from_dlpack_shares_the_batch_memory(self):
        pipeline = sluice.Pipeline(cifar_spec(cifar_items(10), batch=32))
        self.assertEqual(pipeline.batch_shape, (32, 3, 32, 32))
        self.assertEqual(pipeline.dtype, "float32")
        batch = next(iter(pipeline.epoch(0)))
        data = torch.from_dlpack(batch.data)
        labels = torch.from_dlpack(batch.labels)
        self.assertEqual(data.data_ptr(), batch.data.data_ptr)
        self.assertEqual(data.data_ptr(), batch.data_ptr)
        self.assertEqual(labels.data_ptr(), batch.labels.data_ptr)
        self.assertEqual(tuple(data.shape), (32, 3, 32, 32))
        self.assertEqual(data.dtype, torch.float32)
        self.assertEqual(labels.dtype, torch.int32)
        self.assertEqual(batch.data.__dlpack_device__(), (1, 0))  # kDLCPU
        # The same memory, not an equal copy: a write through one tensor shows in another.
        again = torch.from_dlpack(batch.data)
        data[0, 0, 0, 0] = 12345.0
        self.assertEqual(float(again[0, 0, 0, 0]), 12345.0)

    def test_numpy_from_dlpack_shares_too(self):
        if np is None or not hasattr(np, "from_dlpack"):
            self.skipTest("numpy.from_dlpack needs numpy >= 1.22")
        pipeline = sluice.Pipeline(cifar_spec(cifar_items(10), batch=32, dtype="u8"))
        batch = next(iter(pipeline.epoch(0)))
        array = np.from_dlpack(batch.data)
        self.assertEqual(array.ctypes.data, batch.data.data_ptr)
        self.assertEqual(array.dtype, np.uint8)
        self.assertEqual(array.shape, (32, 3, 32, 32))

    @unittest.skipUnless(REFERENCE_DUMP and os.path.exists(REFERENCE_DUMP), "python_reference_dump is not built")
    def test_values_equal_the_cpp_iterator(self):
        import subprocess

        items = cifar_items(30)  # 300 images: 4 batches of 64 and a short one of 44
        with tempfile.TemporaryDirectory() as tmp:
            spec_path = os.path.join(tmp, "spec.json")
            with open(spec_path, "w", encoding="utf-8") as f:
                json.dump(cifar_spec(items), f)
            dump = os.path.join(tmp, "reference.bin")
            run = subprocess.run([REFERENCE_DUMP, spec_path, "2", dump], capture_output=True, text=True, check=False)
            self.assertEqual(run.returncode, 0, run.stderr)
            lines = [tuple(int(v) for v in line.split()) for line in run.stdout.splitlines()]
            self.assertEqual(len(lines), 10)
            with open(dump, "rb") as f:
                reference = f.read()

            # Through a spec file and through the same spec as a dict: both equal the C++ bytes,
            # two epochs (different crops, flips and order) via iter(pipeline).
            for source in (spec_path, cifar_spec(items)):
                pipeline = sluice.Pipeline(source)
                offset = 0
                seen = 0
                for expected_epoch in range(2):
                    for batch in pipeline:
                        epoch, index, size, data_bytes, labels_bytes = lines[seen]
                        self.assertEqual((batch.epoch, batch.index, len(batch)), (expected_epoch, index, size))
                        self.assertEqual(epoch, expected_epoch)
                        data = torch.from_dlpack(batch.data)
                        labels = torch.from_dlpack(batch.labels)
                        got = data.numpy().tobytes() + labels.numpy().tobytes()
                        self.assertEqual(len(got), data_bytes + labels_bytes)
                        self.assertTrue(got == reference[offset:offset + len(got)],
                                        f"epoch {epoch} batch {index}: bytes differ from the C++ iterator's")
                        offset += len(got)
                        seen += 1
                self.assertEqual(offset, len(reference))
                self.assertEqual(seen, len(lines))


@unittest.skipUnless(have_cifar(), "the shared datasets (cifar10/test) are absent: set SLUICE_DATASETS")
@unittest.skipUnless(torch is not None, "torch is not importable by this interpreter (use /usr/bin/python3)")
class SlotLifetimeTest(unittest.TestCase):
    """prefetch 1 gives a ring of prefetch + 2 = 3 slots (fixed threads: no autotuner to grow it)."""

    SLOTS = 3

    def hold_all_slots(self, iterator, keep):
        """Takes batches until SLOTS are held through `keep(batch)`'s return value alone."""
        held = []
        for _ in range(self.SLOTS):
            thread, result = next_in_thread(iterator, DELIVER_TIMEOUT)
            self.assertFalse(thread.is_alive(), "a batch did not arrive while slots were free")
            self.assertNotIn("error", result)
            held.append(keep(result.pop("batch")))  # the Batch object itself is dropped here
        gc.collect()
        return held

    def check_blocks_until_released(self, held, release):
        iterator = self.iterator
        thread, result = next_in_thread(iterator, BLOCKED_TIMEOUT)
        self.assertTrue(thread.is_alive(), f"production went on while all {self.SLOTS} slots were held")
        freed_ptr = release(held)
        thread.join(DELIVER_TIMEOUT)
        self.assertFalse(thread.is_alive(), "production did not resume after the holder was released")
        self.assertNotIn("error", result)
        # The freed slot is the only free one: the new batch is written into the same memory.
        self.assertEqual(result["batch"].data.data_ptr, freed_ptr)
        return result["batch"]

    def start(self):
        pipeline = sluice.Pipeline(cifar_spec(cifar_items(20), batch=16, prefetch=1, threads=1))
        self.iterator = pipeline.epoch(0)
        return pipeline

    def test_torch_tensor_keeps_the_slot_until_dropped(self):
        pipeline = self.start()
        tensors = self.hold_all_slots(self.iterator, lambda b: torch.from_dlpack(b.data))

        def drop_first(held):
            ptr = held[0].data_ptr()
            del held[0]  # the last reference to that batch's memory
            return ptr

        batch = self.check_blocks_until_released(tensors, drop_first)
        # Values held in the other tensors were not overwritten by the new batch.
        self.assertNotEqual(batch.data.data_ptr, tensors[0].data_ptr())
        del batch, tensors
        self.assertEqual(sum(1 for _ in self.iterator) + 4, pipeline.batches_per_epoch)

    def test_unconsumed_capsule_and_labels_keep_the_slot(self):
        self.start()

        def keep(batch):
            # Alternately an unconsumed DLPack capsule of the data and a tensor of the labels.
            return (batch.data.__dlpack__(), batch.data.data_ptr) if batch.index % 2 == 0 else \
                (torch.from_dlpack(batch.labels), batch.data.data_ptr)

        held = self.hold_all_slots(self.iterator, keep)

        def drop_first(held):
            ptr = held[0][1]
            del held[0]
            return ptr

        self.check_blocks_until_released(held, drop_first)

    def test_batch_object_keeps_the_slot_and_release_frees_it(self):
        self.start()
        batches = self.hold_all_slots(self.iterator, lambda b: b)

        def release_first(held):
            ptr = held[0].data_ptr
            held[0].release()  # explicit, while the Python object stays alive
            self.assertTrue(held[0].released)
            with self.assertRaises(ValueError):
                _ = held[0].data
            return ptr

        self.check_blocks_until_released(batches, release_first)


@unittest.skipUnless(have_cifar(), "the shared datasets (cifar10/test) are absent: set SLUICE_DATASETS")
class PipelineApiTest(unittest.TestCase):
    def test_len_stats_and_iteration_convention(self):
        pipeline = sluice.Pipeline(cifar_spec(cifar_items(30), batch=64))
        self.assertEqual(len(pipeline), 5)
        self.assertEqual(pipeline.batches_per_epoch, 5)
        self.assertEqual(pipeline.samples_per_epoch, 300)
        self.assertEqual(len(pipeline.epoch(3)), 5)
        self.assertEqual(pipeline.next_epoch, 0)
        sizes = [len(b) for b in pipeline]
        self.assertEqual(sizes, [64, 64, 64, 64, 44])
        self.assertEqual(pipeline.next_epoch, 1)
        self.assertEqual([b.epoch for b in pipeline][0], 1)
        stats = pipeline.stats()
        self.assertEqual(stats["samples"], 600)
        self.assertEqual(stats["batches"], 10)
        self.assertIn("stages", stats)
        self.assertEqual(pipeline.spec["build"]["seed"], 3)

    def test_state_and_restore_resume_mid_epoch(self):
        spec = cifar_spec(cifar_items(30), batch=64, dtype="u8")
        first = sluice.Pipeline(spec)
        full = [bytes(np_bytes(b)) for b in first.epoch(0)]
        it = first.epoch(0)
        next(it)
        next(it)
        state = first.state()
        self.assertIsInstance(state, bytes)

        resumed = sluice.Pipeline(spec)
        resumed.restore(state)
        self.assertEqual(resumed.next_epoch, 0)
        self.assertEqual(resumed.state(), state)  # until the epoch starts: the state it restored
        rest = [bytes(np_bytes(b)) for b in resumed]
        self.assertEqual(rest, full[2:])
        with self.assertRaises(ValueError) as caught:
            resumed.restore(b"not a state")
        self.assertIn("restore", str(caught.exception))

    def test_starting_another_epoch_abandons_the_iterator_in_progress(self):
        pipeline = sluice.Pipeline(cifar_spec(cifar_items(30), batch=64))
        old = pipeline.epoch(0)
        next(old)
        newer = pipeline.epoch(1)
        self.assertEqual(next(newer).epoch, 1)
        with self.assertRaises(sluice.Error) as caught:
            next(old)
        self.assertIn("abandoned", str(caught.exception))
        self.assertEqual(next(newer).index, 1)

    def test_bad_file_raises_from_next_or_is_skipped(self):
        if not os.path.exists(TRUNCATED):
            self.skipTest("corrupt/truncated.jpg is absent")
        items = cifar_items(3) + [{"path": TRUNCATED, "label": 0}]
        spec = cifar_spec(items, batch=8)
        spec["stages"][2] = {"resize": {"size": 32}}  # the truncated file is 100x100
        with self.assertRaises(sluice.Error) as caught:
            for _ in sluice.Pipeline(spec).epoch(0):
                pass
        self.assertNotIsInstance(caught.exception, ValueError)
        self.assertIn("truncated.jpg", str(caught.exception))
        self.assertIn("truncated.jpg", caught.exception.path)
        spec["build"]["on_error"] = "skip"
        pipeline = sluice.Pipeline(spec)
        self.assertEqual(sum(len(b) for b in pipeline.epoch(0)), len(items))
        self.assertEqual(pipeline.stats()["skipped"], 1)
        self.assertEqual(pipeline.stats()["skip_events"], 1)
        self.assertEqual(sum(len(b) for b in pipeline.epoch(1)), len(items))
        stats = pipeline.stats()
        self.assertEqual((stats["skipped"], stats["skip_events"]), (1, 2))  # one file, skipped in two epochs
        self.assertEqual([s["path"] for s in stats["skipped_samples"]], [TRUNCATED])


@unittest.skipUnless(have_cifar(), "the shared datasets (cifar10/test) are absent: set SLUICE_DATASETS")
class PresetTest(unittest.TestCase):
    """A spec's {"preset": ...} is the library's standard transform (sluice/pipeline/presets.hpp),
    the same stages as written out by hand, and batch_shape/dtype describe what arrives."""

    def test_preset_equals_its_stages(self):
        items = cifar_items(2)
        preset = {"source": {"items": items},
                  "stages": ["read", "decode_jpeg", {"preset": {"name": "cifar10_eval", "dtype": "f16"}},
                             {"batch": {"size": 8}}], "build": {"threads": 2}}
        by_hand = {"source": {"items": items},
                   "stages": ["read", "decode_jpeg",
                              {"normalize": {"mean": CIFAR_MEAN, "std": CIFAR_STD, "layout": "nchw", "dtype": "f16"}},
                              {"batch": {"size": 8}}], "build": {"threads": 2}}
        a, b = sluice.Pipeline(preset), sluice.Pipeline(by_hand)
        self.assertEqual(a.spec["stages"], b.spec["stages"])
        self.assertEqual((a.batch_shape, a.dtype, a.device), ((8, 3, 32, 32), "float16", "host"))
        self.assertEqual(a.outputs, [
            {"name": "data", "shape": (8, 3, 32, 32), "dtype": "float16", "layout": "NCHW", "device": "host"},
            {"name": "labels", "shape": (8,), "dtype": "int32", "layout": "N", "device": "host"}])
        if np is not None:
            for x, y in zip(a.epoch(0), b.epoch(0)):
                self.assertEqual(np.from_dlpack(x.data).tobytes(), np.from_dlpack(y.data).tobytes())
        with self.assertRaises(ValueError) as caught:
            sluice.Pipeline({"source": {"items": items}, "stages": ["read", "decode_jpeg", {"preset": "cifar100"}]})
        self.assertIn("stages[2].preset: unknown preset", str(caught.exception))


@unittest.skipUnless(have_cifar() and os.path.exists(TRUNCATED), "the shared datasets are absent: set SLUICE_DATASETS")
class NonUtf8PathTest(unittest.TestCase):
    """A class folder and a file named with a byte that is not UTF-8 (b"bad\\xff"): stats() and a
    bad file's error under on_error "fail" give the path as os.fsdecode gives it, so os.fsencode
    gives the bytes back (stats() raised RuntimeError, the error UnicodeDecodeError)."""

    def test_stats_and_errors_carry_the_path_as_fsdecode_gives_it(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = os.fsencode(tmp)
            good, bad = os.path.join(root, b"good"), os.path.join(root, b"bad\xff")
            os.mkdir(good)
            os.mkdir(bad)
            for i, item in enumerate(cifar_items(1)[:6]):
                with open(item["path"], "rb") as src, open(os.path.join(good if i < 4 else bad, b"%d.jpg" % i), "wb") as dst:
                    dst.write(src.read())
            bad_file = os.path.join(bad, b"bad\xff.jpg")
            with open(TRUNCATED, "rb") as src, open(bad_file, "wb") as dst:
                dst.write(src.read())
            spec = {"source": {"folder": tmp}, "stages": ["read", "decode_jpeg", {"resize": {"size": 32}},
                                                           {"normalize": {"mean": [], "std": [], "layout": "nhwc",
                                                                          "dtype": "u8"}},
                                                           {"batch": {"size": 2}}],
                    "build": {"threads": 2, "on_error": "fail"}}
            with self.assertRaises(sluice.Error) as caught:
                for _ in sluice.Pipeline(spec).epoch(0):
                    pass
            self.assertNotIsInstance(caught.exception, UnicodeError)
            self.assertEqual(os.fsencode(caught.exception.path), bad_file)
            self.assertIn(os.fsdecode(bad_file), str(caught.exception))
            spec["build"]["on_error"] = "skip"
            pipeline = sluice.Pipeline(spec)
            self.assertEqual(sum(len(b) for b in pipeline.epoch(0)), 7)
            stats = pipeline.stats()
            self.assertEqual(stats["skipped"], 1)
            self.assertEqual([os.fsencode(s["path"]) for s in stats["skipped_samples"]], [bad_file])


@unittest.skipUnless(have_cifar(), "the shared datasets (cifar10/test) are absent: set SLUICE_DATASETS")
class RecoveredFilesTest(unittest.TestCase):
    """A file libjpeg warns about but decodes whole is decoded (as Pillow decodes it) and counted
    in stats()["recovered"] with its path and warning; "strict" fails it instead."""

    def test_recovered_file_is_counted_and_strict_fails_it(self):
        items = cifar_items(2)
        with tempfile.TemporaryDirectory() as tmp:
            with open(items[3]["path"], "rb") as f:
                data = f.read()
            at = data.index(b"\xff\xdb")  # junk before the first quantisation table
            damaged = os.path.join(tmp, "damaged.jpg")
            with open(damaged, "wb") as f:
                f.write(data[:at] + b"\x01\x02\x03\x04\x05" + data[at:])
            items[3] = {"path": damaged, "label": items[3]["label"]}
            spec = cifar_spec(items, batch=8)
            pipeline = sluice.Pipeline(spec)
            self.assertEqual(sum(len(b) for b in pipeline.epoch(0)), len(items))
            stats = pipeline.stats()
            self.assertEqual(stats["recovered"], 1)
            self.assertEqual(stats["recovered_samples"],
                             [{"path": damaged, "warning": "Corrupt JPEG data: 5 extraneous bytes before marker 0xdb"}])
            spec["stages"][1] = {"decode_jpeg": {"strict": True}}
            with self.assertRaises(sluice.Error) as caught:
                for _ in sluice.Pipeline(spec).epoch(0):
                    pass
            self.assertIn("damaged.jpg", caught.exception.path)


class OrientationTest(unittest.TestCase):
    """{"decode": {"orientation": "exif"}} from Python: a JPEG Pillow wrote with EXIF orientation 6
    comes out as ImageOps.exif_transpose gives it, sized upright; the default keeps it as stored;
    the canonical spec writes the stage back as "decode" with its orientation."""

    def test_exif_orientation_turns_the_image_and_the_default_keeps_it(self):
        try:
            from PIL import Image, ImageOps
        except ImportError:
            self.skipTest("Pillow is absent")
        if np is None or not hasattr(np, "from_dlpack"):
            self.skipTest("numpy.from_dlpack needs numpy >= 1.22")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "turned.jpg")
            y, x = np.mgrid[0:24, 0:40]
            picture = np.stack([x * 6, y * 10, (x + y) * 3], axis=-1).astype(np.uint8)
            exif = Image.Exif()
            exif[0x0112] = 6
            Image.fromarray(picture).save(path, "JPEG", quality=95, exif=exif.tobytes())
            with Image.open(path) as im:
                upright = np.asarray(ImageOps.exif_transpose(im).convert("RGB"))
                stored = np.asarray(im.convert("RGB"))

            def first_batch(orientation):
                decode = {"decode": {"orientation": orientation}} if orientation else "decode"
                pipeline = sluice.Pipeline({"source": {"items": [{"path": path, "label": 0}]},
                                            "stages": ["read", decode, {"normalize": {"dtype": "u8", "layout": "nhwc"}},
                                                       {"batch": {"size": 1}}], "build": {"threads": 1}})
                batch = next(iter(pipeline.epoch(0)))
                return pipeline, np.from_dlpack(batch.data)[0]

            pipeline, turned = first_batch("exif")
            self.assertEqual(pipeline.batch_shape, (1, 40, 24, 3))
            np.testing.assert_array_equal(turned, upright)
            self.assertEqual(pipeline.spec["stages"][1]["decode"]["orientation"], "exif")
            _, as_stored = first_batch(None)
            np.testing.assert_array_equal(as_stored, stored)
            with self.assertRaises(sluice.InvalidArgumentError):
                first_batch("upright")


class LauncherRankTest(unittest.TestCase):
    """sluice.launcher_rank() reads what mpirun or srun exported (the C++ unit test covers every
    launcher); here: the binding, and a bad value raising ValueError naming the variable."""

    NAMES = ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
             "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS")

    def setUp(self):
        self.saved = {name: os.environ.pop(name) for name in self.NAMES if name in os.environ}

    def tearDown(self):
        for name in self.NAMES:
            os.environ.pop(name, None)
        os.environ.update(self.saved)

    def test_no_launcher_then_openmpi(self):
        self.assertEqual(sluice.launcher_rank(), {"rank": 0, "world": 1, "source": ""})
        os.environ["OMPI_COMM_WORLD_RANK"] = "1"
        os.environ["OMPI_COMM_WORLD_SIZE"] = "2"
        self.assertEqual(sluice.launcher_rank(),
                         {"rank": 1, "world": 2, "source": "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE"})

    @unittest.skipUnless(have_cifar(), "the shared datasets (cifar10/test) are absent: set SLUICE_DATASETS")
    def test_pipeline_shard_from_the_launcher(self):
        spec = cifar_spec(cifar_items(5), batch=8)  # 50 images
        counts = []
        for rank in range(2):
            os.environ["OMPI_COMM_WORLD_RANK"] = str(rank)
            os.environ["OMPI_COMM_WORLD_SIZE"] = "2"
            pipeline = sluice.Pipeline(spec, shard="launcher")
            self.assertEqual(pipeline.spec["shard"], {"rank": rank, "world": 2})
            counts.append(sum(len(b) for b in pipeline.epoch(0)))
        self.assertEqual(counts, [25, 25])
        self.assertEqual(sluice.Pipeline(spec, shard=(2, 3)).samples_per_epoch, 16)
        with self.assertRaises(ValueError) as caught:
            sluice.Pipeline(spec, shard=(3, 3))
        self.assertIn("shard", str(caught.exception))

    def test_bad_value_names_the_variable(self):
        os.environ["PMI_RANK"] = "3"
        os.environ["PMI_SIZE"] = "2"
        with self.assertRaises(ValueError) as caught:
            sluice.launcher_rank()
        self.assertIn("PMI_RANK", str(caught.exception))


def np_bytes(batch):
    return memoryview(np.from_dlpack(batch.data)).tobytes() + memoryview(np.from_dlpack(batch.labels)).tobytes()


class RemoteShardsTest(unittest.TestCase):
    """A spec whose shards are http:// URLs (docs/remote.md) gives the batches of the same shards
    on disk; the shards are served on 127.0.0.1 by tests/support/remote_server.py."""

    def test_url_shards_give_the_local_batches(self):
        if np is None:
            self.skipTest("numpy not installed")
        with tempfile.TemporaryDirectory() as tmp:
            port = self._serve_shards(tmp)

            def batches(shards, shard=None):
                spec = {"source": {"shards": shards}, "shuffle_files": {"seed": 4},
                        "stages": ["read", "decode_jpeg", {"center_crop": {"size": 24}},
                                   {"normalize": {"mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25]}}, {"batch": {"size": 5}}],
                        "build": {"threads": 2, "seed": 1}}
                return [bytes(np_bytes(b)) for b in sluice.Pipeline(spec, shard=shard).epoch(0)]

            local = batches({"path": os.path.join(tmp, "root", "s-{0..2}.tar"), "index": "memory"})
            remote = batches({"path": "http://127.0.0.1:%d/s-{0..2}.tar" % port,
                              "remote": {"cache_dir": os.path.join(tmp, "cache"), "cache_limit": "16MiB"}})
            self.assertEqual(len(local), 5)
            self.assertEqual(remote, local)

            # Split by shards among 3 ranks (each with a cache of its own, as on 3 nodes), a
            # rank fetches the shards' index files and the one shard it reads, not all three.
            def served():
                with urllib.request.urlopen("http://127.0.0.1:%d/__stats" % port) as reply:
                    return json.load(reply)["bytes"]
            batches({"path": os.path.join(tmp, "root", "s-{0..2}.tar")})  # writes the index files beside
            shard_bytes = [os.path.getsize(os.path.join(tmp, "root", "s-%d.tar" % i)) for i in range(3)]
            index_bytes = sum(os.path.getsize(os.path.join(tmp, "root", "s-%d.tar.sluice-idx" % i)) for i in range(3))
            fetched = []
            for rank in range(3):
                before = served()
                got = batches({"path": "http://127.0.0.1:%d/s-{0..2}.tar" % port,
                               "remote": {"cache_dir": os.path.join(tmp, "cache-rank%d" % rank)}}, shard=(rank, 3))
                self.assertEqual(got, batches({"path": os.path.join(tmp, "root", "s-{0..2}.tar"), "index": "memory"},
                                              shard=(rank, 3)))
                fetched.append(served() - before - index_bytes)
                self.assertIn(fetched[-1], shard_bytes)
            self.assertEqual(sorted(fetched), sorted(shard_bytes))

    def _serve_shards(self, tmp):
        """Three shards of eight generated JPEGs under tmp/root, served on 127.0.0.1."""
        import io
        import subprocess
        import tarfile
        from PIL import Image
        os.makedirs(os.path.join(tmp, "root"))
        for shard in range(3):
            with tarfile.open(os.path.join(tmp, "root", "s-%d.tar" % shard), "w", format=tarfile.USTAR_FORMAT) as tar:
                for i in range(8):
                    jpeg = io.BytesIO()
                    Image.new("RGB", (36, 28), (shard * 80, i * 30, 90)).save(jpeg, "JPEG")
                    for name, data in (("k%d_%d.jpg" % (shard, i), jpeg.getvalue()), ("k%d_%d.cls" % (shard, i), b"%d" % (i % 3))):
                        info = tarfile.TarInfo(name)
                        info.size = len(data)
                        tar.addfile(info, io.BytesIO(data))
        server = subprocess.Popen(["/usr/bin/python3", os.path.join(os.path.dirname(__file__), "..", "support", "remote_server.py"),
                                   "--root", os.path.join(tmp, "root")], stdout=subprocess.PIPE)
        self.addCleanup(server.stdout.close)
        self.addCleanup(server.wait)
        self.addCleanup(server.terminate)
        return int(server.stdout.readline())

    def _spec(self, tmp, port):
        return {"source": {"shards": {"path": "http://127.0.0.1:%d/s-{0..2}.tar" % port, "index": "memory",
                                      "remote": {"cache_dir": os.path.join(tmp, "cache"), "cache_limit": "16MiB"}}},
                "stages": ["read", "decode_jpeg", {"center_crop": {"size": 24}}, {"batch": {"size": 6}}],
                "build": {"threads": 2, "seed": 1}}

    def test_stats_count_this_pipelines_remote_source(self):
        with tempfile.TemporaryDirectory() as tmp:
            port = self._serve_shards(tmp)

            pipeline = sluice.Pipeline(self._spec(tmp, port))
            for _ in pipeline.epoch(0):
                pass
            sources = pipeline.stats()["sources"]
            self.assertEqual([s["source"] for s in sources], ["http://127.0.0.1:%d" % port])
            shard_bytes = sum(os.path.getsize(os.path.join(tmp, "root", "s-%d.tar" % i)) for i in range(3))
            self.assertEqual(sources[0]["bytes"], shard_bytes)
            self.assertEqual(sources[0]["requests"], 6)  # the 3 shards' index files looked for (404), the 3 shards
            self.assertEqual(sources[0]["cache_misses"], 3)
            self.assertEqual(sum(sources[0]["retries"].values()), 0)
            self.assertIn("remote", pipeline.stats()["memory"])

    def test_ctrl_c_stops_builds_fetch(self):
        import signal
        import time
        with tempfile.TemporaryDirectory() as tmp:
            port = self._serve_shards(tmp)

            req = urllib.request.Request("http://127.0.0.1:%d/__faults" % port, data=b'{"latency_ms": 20000}', method="PUT")
            urllib.request.urlopen(req).read()
            timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
            started = time.monotonic()
            timer.start()
            try:
                with self.assertRaises(KeyboardInterrupt):
                    sluice.Pipeline(self._spec(tmp, port))
            finally:
                timer.cancel()
            self.assertLess(time.monotonic() - started, 3.0)


class BadSpecTest(unittest.TestCase):
    """Bad specs raise ValueError (sluice.InvalidArgumentError) naming the field; missing files
    FileNotFoundError (sluice.NotFoundError). Parsing fails before any data is touched."""

    def spec(self, **changes):
        spec = {"source": {"folder": "/nonexistent-sluice-data"},
                "stages": ["read", "decode_jpeg", {"resize": {"size": 32}}, {"batch": {"size": 4}}]}
        spec.update(changes)
        return spec

    def assert_invalid(self, spec, *fragments, **kwargs):
        with self.assertRaises(ValueError) as caught:
            sluice.Pipeline(spec, **kwargs)
        self.assertIsInstance(caught.exception, sluice.InvalidArgumentError)
        self.assertIsInstance(caught.exception, sluice.Error)
        self.assertEqual(caught.exception.code, "invalid argument")
        for fragment in fragments:
            self.assertIn(fragment, str(caught.exception))
        return caught.exception

    def test_unknown_stage(self):
        spec = self.spec()
        spec["stages"][1] = "decode_png"
        self.assert_invalid(spec, "stages[1]", "decode_png")

    def test_wrong_type(self):
        spec = self.spec()
        spec["stages"][3] = {"batch": {"size": "big"}}
        self.assert_invalid(spec, "stages[3].batch.size", "big")

    def test_missing_source(self):
        spec = self.spec()
        del spec["source"]
        self.assert_invalid(spec, "source", "missing")

    def test_negative_size(self):
        spec = self.spec()
        spec["stages"][2] = {"resize": {"size": -4}}
        self.assert_invalid(spec, "stages[2].resize", "-4")
        spec = self.spec()
        spec["stages"][3] = {"batch": {"size": -4}}
        self.assert_invalid(spec, "stages[3].batch.size", "-4")

    def test_unknown_key_and_bad_overrides(self):
        spec = self.spec()
        spec["stages"][1] = {"decode_jpeg": {"fastdct": True}}
        self.assert_invalid(spec, "stages[1].decode_jpeg", "fastdct")
        self.assert_invalid(self.spec(), "threads", threads=0)
        self.assert_invalid(self.spec(), "memory_budget", memory_budget="lots")

    def test_missing_files(self):
        with self.assertRaises(FileNotFoundError) as caught:
            sluice.Pipeline("/nonexistent-sluice-spec.json")
        self.assertIsInstance(caught.exception, sluice.NotFoundError)
        self.assertIn("nonexistent-sluice-spec.json", str(caught.exception))
        with self.assertRaises(FileNotFoundError) as caught:
            sluice.Pipeline(self.spec())  # a valid spec whose data folder is missing: build() says so
        self.assertIn("nonexistent-sluice-data", str(caught.exception))

    def test_spec_of_the_wrong_kind(self):
        with self.assertRaises(TypeError):
            sluice.Pipeline(42)
        with self.assertRaises(ValueError) as caught:
            sluice.Pipeline.from_json("{not json")
        self.assertIsInstance(caught.exception, sluice.Error)


if __name__ == "__main__":
    unittest.main(verbosity=2)
