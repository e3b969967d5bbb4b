"""A PyTorch user's recipe against sluice: the DataLoader surface of sluice.torch.Loader (classes,
class_to_idx, samples equal to torchvision's ImageFolder; shuffle=; DataLoader keywords refused
saying what sluice uses), sluice.transforms and sluice.datasets building the spec from
torchvision's names (and torchvision's own objects), held to torchvision's pixels, Python-speaking
errors, help() and inspect.signature, and the two bugs: Ctrl-C during a wait (KeyboardInterrupt
within a second even while the consumer holds every slot, or waits for another thread's call),
and pipelines of different thread counts side by side (no oneTBB warning, which the process-wide
limit printed).

Run by CTest (label python) as `/usr/bin/python3 -m unittest -v test_recipe`, like test_sluice.py.
"""

import inspect
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

import sluice
import sluice.datasets
import sluice.transforms as T

try:
    import numpy as np
    import torch
    import torchvision
    import torchvision.transforms as tvT
    from PIL import Image
    import sluice.torch as sluice_torch
except ImportError:
    torch = None

DATASETS = os.environ.get("SLUICE_DATASETS", "")
IMAGENETTE = os.path.join(DATASETS, "imagenette-val") if DATASETS else ""
CIFAR_TEST = os.path.join(DATASETS, "cifar10", "test") if DATASETS else ""
MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def have(folder):
    return bool(folder) and os.path.isdir(folder)


def small_image_folder(root, source, classes=3, per_class=4):
    """root/<class>/<file>: the first `per_class` files of the first `classes` classes of `source`
    (copied: a folder source refuses links that leave it)."""
    for name in sorted(os.listdir(source))[:classes]:
        os.makedirs(os.path.join(root, name))
        for file in sorted(os.listdir(os.path.join(source, name)))[:per_class]:
            shutil.copy(os.path.join(source, name, file), os.path.join(root, name, file))
    return root


@unittest.skipUnless(torch is not None, "torch/torchvision are not importable by this interpreter (use /usr/bin/python3)")
class TransformsSpecTest(unittest.TestCase):
    def test_names_build_the_stages(self):
        transform = T.Compose([T.RandomResizedCrop(176), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])
        self.assertEqual(transform.stages(), [
            {"random_resized_crop": {"size": 176, "scale": [0.08, 1.0], "ratio": [0.75, 4.0 / 3.0],
                                     "filter": "bilinear", "antialias": True}},
            {"flip_horizontal": {"probability": 0.5}},
            {"normalize": {"mean": MEAN, "std": STD, "layout": "nchw", "dtype": "f32"}},
        ])
        self.assertEqual(T.Compose([T.Resize(256), T.CenterCrop(224), T.PILToTensor()]).stages(), [
            {"resize_shorter": {"size": 256, "filter": "bilinear", "antialias": True}},
            {"center_crop": {"size": 224}},
            {"normalize": {"mean": [], "std": [], "layout": "nchw", "dtype": "u8"}},
        ])
        self.assertEqual(T.Compose([T.Resize((32, 48)), T.RandomCrop(32, padding=4)]).stages(), [
            {"resize": {"width": 48, "height": 32, "filter": "bilinear", "antialias": True}},
            {"random_crop": {"size": 32, "padding": 4, "fill": 0}},
        ])

    def test_torchvision_objects_give_the_same_stages(self):
        mine = T.Compose([T.RandomResizedCrop(224, scale=(0.25, 1)), T.RandomHorizontalFlip(0.3),
                          T.ToTensor(), T.Normalize(torch.tensor(MEAN, dtype=torch.float64), np.array(STD))])
        theirs = tvT.Compose([tvT.RandomResizedCrop(224, scale=(0.25, 1)), tvT.RandomHorizontalFlip(0.3),
                              tvT.ToTensor(), tvT.Normalize(MEAN, STD)])
        self.assertEqual(T.stages_of([theirs]), mine.stages())

    def test_augmentation_names_build_their_stages(self):
        transform = T.Compose([T.RandomResizedCrop(176), T.RandomVerticalFlip(0.25),
                               T.ColorJitter(0.4, 0.3, 0.2, 0.1), T.RandomGrayscale(0.2), T.Grayscale(3),
                               T.ToTensor(), T.Normalize(MEAN, STD), T.RandomErasing(0.1, value="random")])
        stages = transform.stages()
        self.assertEqual(stages[1:5], [
            {"flip_vertical": {"probability": 0.25}},
            {"color_jitter": {"brightness": [0.6, 1.4], "contrast": [0.7, 1.3], "saturation": [0.8, 1.2],
                              "hue": [-0.1, 0.1]}},
            {"random_grayscale": {"probability": 0.2}},
            {"grayscale": {"num_output_channels": 3}},
        ])
        self.assertEqual(list(stages[5]), ["normalize"])
        self.assertEqual(stages[6], {"random_erasing": {"probability": 0.1, "scale": [0.02, 0.33], "ratio": [0.3, 3.3],
                                                        "value": "random"}})
        self.assertEqual(T.ColorJitter(brightness=0.5).stages(), [{"color_jitter": {"brightness": [0.5, 1.5]}}])
        theirs = tvT.Compose([tvT.RandomResizedCrop(176), tvT.RandomVerticalFlip(0.25),
                              tvT.ColorJitter(0.4, 0.3, 0.2, 0.1), tvT.RandomGrayscale(0.2), tvT.Grayscale(3),
                              tvT.ToTensor(), tvT.Normalize(MEAN, STD), tvT.RandomErasing(0.1, value="random")])
        self.assertEqual(T.stages_of([theirs]), stages)
        self.assertEqual(T.stages_of([tvT.ToTensor(), tvT.RandomErasing(value=(1, 2, 3))])[-1]["random_erasing"]["value"],
                         [1.0, 2.0, 3.0])

    def test_warps_point_ops_and_policies_build_their_stages(self):
        def ops(M):
            return [M.RandomRotation(15), M.RandomAffine(10, translate=(0.1, 0.2), scale=(0.9, 1.1), shear=5),
                    M.GaussianBlur(5), M.RandomPosterize(4), M.RandomSolarize(128), M.RandomInvert(),
                    M.RandomAutocontrast(), M.RandomEqualize(), M.RandomAdjustSharpness(2), M.TrivialAugmentWide(),
                    M.RandAugment(), M.AutoAugment(M.AutoAugmentPolicy.CIFAR10)]
        stages = T.stages_of(ops(T))
        self.assertEqual(T.stages_of(ops(tvT)), stages)
        self.assertEqual([list(s)[0] for s in stages], [
            "random_rotation", "random_affine", "gaussian_blur", "random_posterize", "random_solarize", "random_invert",
            "random_autocontrast", "random_equalize", "random_adjust_sharpness", "trivial_augment_wide",
            "rand_augment", "auto_augment"])
        self.assertEqual(stages[1]["random_affine"]["shear"], [-5.0, 5.0])
        self.assertEqual(stages[9], {"trivial_augment_wide": {"num_magnitude_bins": 31, "interpolation": "nearest",
                                                              "fill": []}})
        for M in (T, tvT):
            self.assertEqual(T.stages_of([M.TrivialAugmentWide(interpolation=M.InterpolationMode.BILINEAR)]),
                             [{"trivial_augment_wide": {"num_magnitude_bins": 31, "interpolation": "bilinear",
                                                        "fill": []}}])

    def test_unsupported_transforms_are_refused_by_name(self):
        with self.assertRaisesRegex(T.UnsupportedTransformError, r"^Lambda: a Python function"):
            T.stages_of([tvT.Lambda(lambda x: x)])
        with self.assertRaisesRegex(T.UnsupportedTransformError, r"^RandomPerspective: sluice has no stage"):
            T.stages_of([tvT.RandomPerspective()])
        with self.assertRaisesRegex(T.UnsupportedTransformError, r"^RandomRotation: expand=True"):
            T.stages_of([tvT.RandomRotation(10, expand=True)])
        with self.assertRaisesRegex(T.UnsupportedTransformError, r"^AutoAugment: policy 'svhn'"):
            T.stages_of([tvT.AutoAugment(tvT.AutoAugmentPolicy.SVHN)])
        with self.assertRaisesRegex(T.UnsupportedTransformError, r"^TrivialAugmentWide: interpolation 'bicubic'"):
            T.stages_of([tvT.TrivialAugmentWide(interpolation=tvT.InterpolationMode.BICUBIC)])
        with self.assertRaisesRegex(T.UnsupportedTransformError, r"^RandomErasing: needs ToTensor"):
            T.stages_of([tvT.RandomErasing()])
        with self.assertRaisesRegex(T.UnsupportedTransformError, r"^Normalize: comes after RandomErasing"):
            T.stages_of([tvT.ToTensor(), tvT.RandomErasing(), tvT.Normalize(MEAN, STD)])
        with self.assertRaisesRegex(ValueError, r"hue values should be between"):
            T.ColorJitter(hue=(-0.7, 0.7))
        with self.assertRaisesRegex(AttributeError, r"sluice.transforms has no AugMix: torchvision's AugMix converts"):
            T.AugMix()
        with self.assertRaisesRegex(T.UnsupportedTransformError, r"^AugMix: torchvision's AugMix converts the image to a uint8 tensor"):
            T.stages_of([tvT.AugMix()])
        with self.assertRaisesRegex(T.UnsupportedTransformError, r"^Resize: interpolation 'bicubic'"):
            T.stages_of([tvT.Resize(256, interpolation=tvT.InterpolationMode.BICUBIC)])
        with self.assertRaisesRegex(T.UnsupportedTransformError, r"^Normalize: needs ToTensor"):
            T.Compose([T.Normalize(MEAN, STD)]).stages()
        with self.assertRaisesRegex(T.UnsupportedTransformError, r"^CenterCrop: comes after ToTensor"):
            T.Compose([T.ToTensor(), T.CenterCrop(8)]).stages()
        with self.assertRaisesRegex(T.UnsupportedTransformError, r"target_transform"):
            sluice.datasets.ImageFolder("/tmp", target_transform=lambda y: y)
        with self.assertRaisesRegex(TypeError, "runs inside a sluice pipeline"):
            T.CenterCrop(8)(None)


@unittest.skipUnless(torch is not None, "torch/torchvision are not importable by this interpreter (use /usr/bin/python3)")
class ImageFolderOfEveryFormatTest(unittest.TestCase):
    def test_png_webp_and_jpeg_files_give_torchvisions_pixels(self):
        # The spec's decode stage is "decode" (every format, by content), so a folder mixing PNG,
        # WebP and JPEG (one PNG named .jpg) loads as torchvision's ImageFolder loads it.
        with tempfile.TemporaryDirectory() as root:
            rng = np.random.default_rng(28)
            files = [("a", "x.png", "PNG", {}), ("a", "y.webp", "WEBP", {"lossless": True}),
                     ("b", "z.jpg", "JPEG", {"quality": 90}), ("b", "w.jpg", "PNG", {})]
            for folder, name, fmt, options in files:
                os.makedirs(os.path.join(root, folder), exist_ok=True)
                pixels = rng.integers(0, 256, size=(30, 40, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(os.path.join(root, folder, name), fmt, **options)
            spec = sluice.datasets.ImageFolder(root, T.Compose([T.Resize(16), T.CenterCrop(16), T.PILToTensor()]),
                                               decoder="torchvision")
            self.assertEqual(spec["stages"][1], {"decode": {"dct_scaling": False}})
            theirs = torchvision.datasets.ImageFolder(root, tvT.Compose([tvT.Resize(16), tvT.CenterCrop(16),
                                                                          tvT.PILToTensor()]))
            images, labels = next(iter(sluice_torch.Loader(spec, batch_size=4, shuffle=False, threads=2)))
            self.assertEqual(labels.tolist(), [theirs[i][1] for i in range(4)])
            difference = (images.int() - torch.stack([theirs[i][0] for i in range(4)]).int()).abs()
            self.assertEqual(difference.max().item(), 0)


@unittest.skipUnless(torch is not None, "torch/torchvision are not importable by this interpreter (use /usr/bin/python3)")
@unittest.skipUnless(have(IMAGENETTE), "the shared datasets (imagenette-val) are absent: set SLUICE_DATASETS")
class ImageFolderTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.root = small_image_folder(os.path.join(cls.tmp.name, "val"), IMAGENETTE)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_classes_class_to_idx_and_samples_equal_torchvisions(self):
        theirs = torchvision.datasets.ImageFolder(self.root)
        loader = sluice_torch.Loader(sluice.datasets.ImageFolder(self.root, T.Compose([T.Resize(32), T.CenterCrop(32)])),
                                     batch_size=4, threads=1)
        self.assertEqual(loader.classes, theirs.classes)
        self.assertEqual(loader.class_to_idx, theirs.class_to_idx)
        self.assertEqual(loader.samples, theirs.samples)

    def test_the_eval_transform_gives_torchvisions_pixels(self):
        # Resize(256) + CenterCrop(224) on PIL images, the torchvision decoder preset: the same uint8 pixels
        # (bench/e2e/decoder_presets.py finds the same on all 1,000 imagenet-photos).
        transform = [T.Resize(256), T.CenterCrop(224), T.PILToTensor()]
        theirs = torchvision.datasets.ImageFolder(self.root, tvT.Compose([tvT.Resize(256), tvT.CenterCrop(224),
                                                                          tvT.PILToTensor()]))
        loader = sluice_torch.Loader(sluice.datasets.ImageFolder(self.root, T.Compose(transform), decoder="torchvision"),
                                     batch_size=len(theirs), shuffle=False, threads=2)
        images, labels = next(iter(loader))
        expected = torch.stack([theirs[i][0] for i in range(len(theirs))])
        self.assertEqual(labels.tolist(), [theirs[i][1] for i in range(len(theirs))])
        difference = (images.int() - expected.int()).abs()
        self.assertEqual(difference.max().item(), 0, f"mean {difference.float().mean().item():.4f}")

    def test_colour_ops_with_given_factors_give_torchvisions_pixels(self):
        # A one-value range draws that value, and one adjustment per ColorJitter leaves no order to
        # draw: torchvision's PIL path and sluice's kernels then see the same parameters.
        def ops(M):
            return [M.Resize(256), M.CenterCrop(224), M.ColorJitter(brightness=(0.6, 0.6)),
                    M.ColorJitter(contrast=(1.3, 1.3)), M.ColorJitter(saturation=(0.4, 0.4)),
                    M.ColorJitter(hue=(0.1, 0.1)), M.RandomVerticalFlip(1.0), M.PILToTensor()]

        def grey(M):
            return [M.Resize(256), M.CenterCrop(224), M.ColorJitter(contrast=(0.7, 0.7)), M.Grayscale(),
                    M.PILToTensor()]

        for build in (ops, grey):
            theirs = torchvision.datasets.ImageFolder(self.root, tvT.Compose(build(tvT)))
            loader = sluice_torch.Loader(sluice.datasets.ImageFolder(self.root, T.Compose(build(T)),
                                                                     decoder="torchvision"),
                                         batch_size=len(theirs), shuffle=False, threads=2)
            images, _ = next(iter(loader))
            expected = torch.stack([theirs[i][0] for i in range(len(theirs))])
            self.assertEqual(images.shape, expected.shape)
            difference = (images.int() - expected.int()).abs()
            self.assertEqual(difference.max().item(), 0, f"{build.__name__}: mean {difference.float().mean().item():.4f}")

    def test_warps_and_point_ops_with_given_parameters_give_torchvisions_pixels(self):
        # Fixed draws (a one-value range, p=1) leave nothing to the generator: torchvision's PIL
        # path and sluice's kernels see the same parameters.
        def ops(M):
            return [M.Resize(160), M.CenterCrop(144), M.RandomRotation((23, 23)),
                    M.RandomAffine((-7, -7), scale=(1.1, 1.1), shear=(4, 4), interpolation=tvT.InterpolationMode.BILINEAR),
                    M.RandomAdjustSharpness(1.8, p=1.0), M.RandomPosterize(5, p=1.0), M.RandomSolarize(200, p=1.0),
                    M.RandomAutocontrast(p=1.0), M.RandomEqualize(p=1.0), M.RandomInvert(p=1.0), M.PILToTensor()]

        theirs = torchvision.datasets.ImageFolder(self.root, tvT.Compose(ops(tvT)))
        loader = sluice_torch.Loader(sluice.datasets.ImageFolder(self.root, T.Compose(ops(T)), decoder="torchvision"),
                                     batch_size=len(theirs), shuffle=False, threads=2)
        images, _ = next(iter(loader))
        expected = torch.stack([theirs[i][0] for i in range(len(theirs))])
        difference = (images.int() - expected.int()).abs()
        self.assertEqual(difference.max().item(), 0, f"mean {difference.float().mean().item():.4f}")

    def test_augmentations_are_the_same_at_one_and_two_threads(self):
        transform = T.Compose([T.RandomResizedCrop(64), T.RandomHorizontalFlip(), T.RandomVerticalFlip(),
                               T.ColorJitter(0.4, 0.4, 0.4, 0.1), T.RandomGrayscale(0.3), T.TrivialAugmentWide(),
                               T.RandAugment(), T.AutoAugment(), T.GaussianBlur(3), T.ToTensor(),
                               T.Normalize(MEAN, STD), T.RandomErasing(0.5, value="random")])
        spec = sluice.datasets.ImageFolder(self.root, transform)
        runs = []
        for threads in (1, 2):
            loader = sluice_torch.Loader(spec, batch_size=4, shuffle=True, seed=7, threads=threads)
            runs.append([images.clone() for images, _ in loader])
        self.assertEqual(len(runs[0]), len(runs[1]))
        for a, b in zip(*runs):
            self.assertTrue(torch.equal(a, b))

    def test_shuffle_keyword(self):
        spec = sluice.datasets.ImageFolder(self.root, T.Compose([T.Resize(16), T.CenterCrop(16)]))
        ordered = sluice_torch.Loader(spec, batch_size=12, shuffle=False, threads=1)
        self.assertEqual(next(iter(ordered))[1].tolist(), [0] * 4 + [1] * 4 + [2] * 4)
        shuffled = sluice_torch.Loader(spec, batch_size=12, shuffle=True, seed=3, threads=1)
        first = [labels.tolist() for _, labels in shuffled]
        second = [labels.tolist() for _, labels in shuffled]  # the next epoch: another order
        self.assertEqual(sorted(first[0]), [0] * 4 + [1] * 4 + [2] * 4)
        self.assertNotEqual(first, second)
        self.assertNotEqual(first[0], [0] * 4 + [1] * 4 + [2] * 4)
        with self.assertRaises(ValueError):
            sluice_torch.Loader(spec, batch_size=4, shuffle="yes")

    def test_dataloader_keywords_say_what_sluice_uses(self):
        spec = sluice.datasets.ImageFolder(self.root)
        for keyword, value, says in (("num_workers", 4, "threads="), ("pin_memory", True, 'device="cuda"'),
                                     ("collate_fn", list, "batch stage"), ("sampler", None, "shard="),
                                     ("persistent_workers", True, "live as long as the loader")):
            with self.assertRaisesRegex(TypeError, f"takes no {keyword}=.*{says}"):
                sluice_torch.Loader(spec, batch_size=4, **{keyword: value})
        with self.assertRaisesRegex(TypeError, "unexpected keyword argument 'bogus'"):
            sluice_torch.Loader(spec, batch_size=4, bogus=1)


    def test_the_recipe_example_runs_with_both_loaders(self):
        example = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "imagenet_recipe.py")
        for recipe in ("classic", "new"):
            for loader in ("sluice", "torch"):
                run = subprocess.run([sys.executable, example, "--data", self.root, "--loader", loader, "--recipe", recipe,
                                      "--batch", "4", "--batches", "2", "--workers", "1"],
                                     capture_output=True, text=True, timeout=300)
                self.assertEqual(run.returncode, 0, run.stderr)
                self.assertRegex(run.stdout, rf"^{loader}: train [0-9]+ images/s, eval [0-9]+ images/s")


@unittest.skipUnless(torch is not None, "torch/torchvision are not importable by this interpreter (use /usr/bin/python3)")
@unittest.skipUnless(have(CIFAR_TEST), "the shared datasets (cifar10/test) are absent")
class CifarRecipeTest(unittest.TestCase):
    def test_the_autoaugment_example_runs_with_both_loaders(self):
        example = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                               "cifar10_autoaugment.py")
        for loader in ("sluice", "torch"):
            run = subprocess.run([sys.executable, example, "--data", CIFAR_TEST, "--loader", loader, "--batch", "8",
                                  "--batches", "2", "--workers", "1"], capture_output=True, text=True, timeout=300)
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertRegex(run.stdout, rf"^{loader}: train [0-9]+ images/s, eval [0-9]+ images/s")


@unittest.skipUnless(torch is not None, "torch is not importable by this interpreter (use /usr/bin/python3)")
class MessagesTest(unittest.TestCase):
    def test_not_found_error_says_why(self):
        with self.assertRaises(sluice.NotFoundError) as caught:
            sluice.Pipeline({"source": {"folder": "/nonexistent-sluice-data"},
                             "stages": ["read", "decode_jpeg", {"batch": {"size": 4}}]})
        text = str(caught.exception)
        self.assertNotIn("None", text)
        self.assertIn("/nonexistent-sluice-data", text)
        self.assertIn(caught.exception.cause, text)
        self.assertTrue(caught.exception.cause)
        self.assertEqual(caught.exception.filename, "/nonexistent-sluice-data")
        with self.assertRaises(sluice.NotFoundError) as caught:
            sluice_torch.Loader("/nonexistent-sluice-spec.json")
        self.assertEqual(str(caught.exception), "[Errno 2] the spec file does not exist: '/nonexistent-sluice-spec.json'")

    @unittest.skipUnless(have(CIFAR_TEST), "the shared datasets (cifar10/test) are absent")
    def test_messages_name_json_stages(self):
        folder = os.path.join(CIFAR_TEST, sorted(os.listdir(CIFAR_TEST))[0])
        items = [{"path": os.path.join(folder, f)} for f in sorted(os.listdir(folder))[:3]]
        with self.assertRaises(sluice.InvalidArgumentError) as caught:
            sluice.Pipeline({"source": {"items": items}, "stages": ["read", "decode_jpeg"]})
        self.assertIn('{"batch": {"size": n}}', str(caught.exception))
        self.assertNotIn("batch(n)", str(caught.exception))

    @unittest.skipUnless(have(CIFAR_TEST), "the shared datasets (cifar10/test) are absent")
    def test_mean_and_std_from_tensors_and_numpy(self):
        folder = os.path.join(CIFAR_TEST, sorted(os.listdir(CIFAR_TEST))[0])
        items = [{"path": os.path.join(folder, f)} for f in sorted(os.listdir(folder))[:4]]

        def spec(mean, std):
            return {"source": {"items": items}, "build": {"threads": 1},
                    "stages": ["read", "decode_jpeg", {"normalize": {"mean": mean, "std": std, "dtype": "f32"}},
                               {"batch": {"size": 4}}]}

        lists = sluice.Pipeline(spec(MEAN, STD)).spec["stages"][2]["normalize"]
        for mean, std in ((torch.tensor(MEAN), torch.tensor(STD)), (np.array(MEAN), np.array(STD))):
            got = sluice.Pipeline(spec(mean, std)).spec["stages"][2]["normalize"]
            self.assertEqual([round(v, 6) for v in got["mean"]], [round(v, 6) for v in lists["mean"]])
            self.assertEqual([round(v, 6) for v in got["std"]], [round(v, 6) for v in lists["std"]])
        with self.assertRaisesRegex(TypeError, "object is not a number"):
            sluice.Pipeline(spec(object(), STD))

    def test_help_lists_the_stages_and_signatures_read(self):
        names = [next(iter(entry)) for entry in sluice.stage_reference()]
        self.assertIn("random_resized_crop", names)
        for name in names:
            self.assertIn(f"    {name}: ", sluice.Pipeline.__doc__)
            self.assertIn(f"    {name}: ", sluice_torch.Loader.__doc__)
        self.assertIn('"scale": [0.08, 1.0]', sluice.Pipeline.__doc__)
        self.assertIn("threads", inspect.signature(sluice.Pipeline).parameters)
        parameters = inspect.signature(sluice_torch.Loader).parameters
        for keyword in ("batch_size", "shuffle", "threads", "device", "seed"):
            self.assertIn(keyword, parameters)


# A child that builds a pipeline (the CIFAR files of one class), then waits in next() in the way
# `mode` says, printing "waiting" first; the test sends SIGINT and times the KeyboardInterrupt.
CHILD = textwrap.dedent("""
    import os, sys, threading, time
    import sluice
    folder, mode = sys.argv[1], sys.argv[2]
    items = [{"path": os.path.join(folder, f)} for f in sorted(os.listdir(folder))[:64]]
    pipeline = sluice.Pipeline({"source": {"items": items}, "build": {"threads": 1},
                                "stages": ["read", "decode_jpeg", {"batch": {"size": 4}}, {"prefetch": {"depth": 1}}]})
    iterator = pipeline.epoch(0)
    held = [next(iterator) for _ in range(3)]  # every slot of the ring (prefetch 1 + 2)
    if mode == "lock":
        # Another thread waits in next() holding the pipeline's lock; the main thread waits for it.
        started = threading.Event()

        def wait_in_next():
            started.set()
            next(iterator)

        threading.Thread(target=wait_in_next, daemon=True).start()
        started.wait()
        time.sleep(0.5)  # inside next(), holding the lock
        print("waiting", flush=True)
        try:
            pipeline.stats()
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(0)
    else:
        print("waiting", flush=True)
        try:
            next(iterator)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(0)
    sys.exit(3)
""")


@unittest.skipUnless(have(CIFAR_TEST), "the shared datasets (cifar10/test) are absent: set SLUICE_DATASETS")
class InterruptTest(unittest.TestCase):
    def interrupt(self, mode):
        folder = os.path.join(CIFAR_TEST, sorted(os.listdir(CIFAR_TEST))[0])
        child = subprocess.Popen([sys.executable, "-c", CHILD, folder, mode], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        try:
            self.assertEqual(child.stdout.readline().strip(), "waiting")
            time.sleep(0.3)  # well inside the wait
            sent = time.monotonic()
            child.send_signal(signal.SIGINT)
            out = child.stdout.readline()  # printed by the KeyboardInterrupt handler
            elapsed = time.monotonic() - sent
            rest, err = child.communicate(timeout=10)
            out += rest
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            self.fail("next() was still waiting 10 s after SIGINT")
        self.assertEqual(child.returncode, 0, err)
        self.assertEqual(out.strip(), "interrupted")
        self.assertLess(elapsed, 1.0, f"KeyboardInterrupt {elapsed:.2f} s after SIGINT")

    def test_ctrl_c_ends_a_wait_while_every_slot_is_held(self):
        self.interrupt("next")

    def test_ctrl_c_ends_a_wait_for_another_threads_call(self):
        self.interrupt("lock")


@unittest.skipUnless(have(CIFAR_TEST), "the shared datasets (cifar10/test) are absent: set SLUICE_DATASETS")
class SideBySideTest(unittest.TestCase):
    def test_pipelines_of_different_thread_counts_print_no_tbb_warning(self):
        # A training pipeline of 2 threads beside a validation one of 1: before, the smaller's
        # process-wide limit capped the larger and oneTBB said so on stderr.
        script = textwrap.dedent("""
            import os, sys
            import sluice
            folder = sys.argv[1]
            items = [{"path": os.path.join(folder, f)} for f in sorted(os.listdir(folder))[:64]]
            def spec(threads):
                return {"source": {"items": items}, "build": {"threads": threads},
                        "stages": ["read", "decode_jpeg", {"batch": {"size": 8}}]}
            train, val, third = sluice.Pipeline(spec(2)), sluice.Pipeline(spec(1)), sluice.Pipeline(spec(3))
            for pipeline in (train, val, third, train):
                assert sum(b.size for b in pipeline) == 64
        """)
        folder = os.path.join(CIFAR_TEST, sorted(os.listdir(CIFAR_TEST))[0])
        run = subprocess.run([sys.executable, "-c", script, folder], capture_output=True, text=True, timeout=120)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertNotIn("TBB Warning", run.stderr)


if __name__ == "__main__":
    unittest.main()
