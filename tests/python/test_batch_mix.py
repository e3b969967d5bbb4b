"""sluice.transforms.MixUp / CutMix (torchvision.transforms.v2's signature) through sluice.torch.Loader:
labels become float32 (N, num_classes) (docs/decisions/batch-mix-labels.md), each batch is the
unmixed batch mixed with its roll by one with the weight its soft labels carry, RandomChoice over
the two becomes both stages, and what v2 would refuse (or sluice cannot run) is refused by name.

Run by CTest (label python) as `/usr/bin/python3 -m unittest -v test_batch_mix`, like test_recipe.py.
"""

import os
import shutil
import tempfile
import unittest

import sluice
import sluice.datasets
import sluice.transforms as T

try:
    import torch
    import torchvision.transforms as tvT
    import sluice.torch as sluice_torch
except ImportError:
    torch = None

DATASETS = os.environ.get("SLUICE_DATASETS", "")
CIFAR_TEST = os.path.join(DATASETS, "cifar10", "test") if DATASETS else ""


class MixTransformsTest(unittest.TestCase):
    def test_stages_come_after_the_per_image_ones(self):
        stages = T.Compose([T.RandomCrop(32, padding=4), T.ToTensor(), T.MixUp(alpha=0.2, num_classes=10)]).stages()
        self.assertEqual(stages[-2:], [{"normalize": {"mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0],
                                                      "layout": "nchw", "dtype": "f32"}},
                                       {"mixup": {"alpha": 0.2, "num_classes": 10}}])
        self.assertEqual(T.stages_of([T.ToTensor(), T.CutMix(num_classes=3)])[-1], {"cutmix": {"alpha": 1.0, "num_classes": 3}})

    def test_bad_parameters_are_refused_by_name(self):
        with self.assertRaisesRegex(T.UnsupportedTransformError, r"^MixUp: num_classes"):
            T.stages_of([T.MixUp(num_classes=0)])
        with self.assertRaisesRegex(T.UnsupportedTransformError, r"^CutMix: alpha"):
            T.stages_of([T.CutMix(alpha=-1.0, num_classes=3)])
        with self.assertRaisesRegex(T.UnsupportedTransformError, r"^MixUp: labels_getter"):
            T.stages_of([T.MixUp(num_classes=3, labels_getter=lambda x: x)])
        with self.assertRaisesRegex(T.UnsupportedTransformError, r"^RandomCrop: comes after MixUp/CutMix"):
            T.stages_of([T.MixUp(num_classes=3), T.RandomCrop(8)])
        with self.assertRaises(TypeError):
            T.MixUp(0.2, 10)  # keyword-only, as v2


@unittest.skipUnless(torch is not None, "torch is not importable by this interpreter (use /usr/bin/python3)")
@unittest.skipUnless(bool(CIFAR_TEST) and os.path.isdir(CIFAR_TEST), "the shared datasets (cifar10) are absent")
class MixLoaderTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.root = os.path.join(cls.tmp.name, "test")
        for name in sorted(os.listdir(CIFAR_TEST))[:3]:
            os.makedirs(os.path.join(cls.root, name))
            for f in sorted(os.listdir(os.path.join(CIFAR_TEST, name)))[:6]:
                shutil.copy(os.path.join(CIFAR_TEST, name, f), os.path.join(cls.root, name, f))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def loader(self, *mix):
        transform = T.Compose([T.RandomCrop(32, padding=2), T.ToTensor(), *mix])
        return sluice_torch.Loader(sluice.datasets.ImageFolder(self.root, transform), batch_size=5, shuffle=True,
                                   threads=2, seed=11)

    def batches(self, *mix):
        return [(images.clone(), labels) for images, labels in self.loader(*mix)]

    def check_mixed(self, mixed, plain, kind):
        for (images, soft), (x, labels) in zip(mixed, plain):
            self.assertEqual(soft.dtype, torch.float32)
            self.assertEqual(tuple(soft.shape), (len(labels), 3))
            torch.testing.assert_close(soft.sum(1), torch.ones(len(labels)))
            rolled = labels.roll(1, 0)
            differ = (rolled != labels).nonzero()
            if len(differ) == 0:
                continue
            i = int(differ[0])
            w = float(soft[i, labels[i]])
            one_hot = torch.nn.functional.one_hot(labels, 3).float()
            torch.testing.assert_close(soft, one_hot.roll(1, 0) * (1.0 - w) + one_hot * w)
            if kind == "mixup":
                torch.testing.assert_close(images, x.roll(1, 0) * (1.0 - w) + x * w)
            else:  # CutMix: every pixel is its own or the previous sample's, the box covering 1 - w
                own = (images == x).all(1)  # (N, H, W)
                other = (images == x.roll(1, 0)).all(1)
                self.assertTrue(bool((own | other).all()))
                changed = (~own).flatten(1).sum(1)  # pixels that can only have come from the previous sample
                self.assertTrue(bool((changed <= round((1.0 - w) * 32 * 32)).all()), (changed, w))
                self.assertGreater(int(changed.sum()), 0)

    def test_mixup_labels_are_soft_and_images_follow_them(self):
        self.check_mixed(self.batches(T.MixUp(alpha=0.4, num_classes=3)), self.batches(), "mixup")

    def test_cutmix_copies_a_box_from_the_previous_sample(self):
        self.check_mixed(self.batches(T.CutMix(num_classes=3)), self.batches(), "cutmix")

    def test_the_same_batches_every_run(self):
        a = [s for _, s in self.batches(tvT.RandomChoice([T.MixUp(alpha=0.4, num_classes=3), T.CutMix(num_classes=3)]))]
        b = [s for _, s in self.batches(tvT.RandomChoice([T.MixUp(alpha=0.4, num_classes=3), T.CutMix(num_classes=3)]))]
        for x, y in zip(a, b):
            torch.testing.assert_close(x, y, rtol=0, atol=0)


if __name__ == "__main__":
    unittest.main()
