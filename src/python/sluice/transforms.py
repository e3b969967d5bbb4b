"""sluice.transforms: torchvision's transform names, building a sluice pipeline spec, so that a
recipe's transform line is copied, not rewritten (docs/python.md, "sluice.transforms"):

    import sluice.transforms as T                 # was: import torchvision.transforms as T
    transform = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                           T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    dataset = sluice.datasets.ImageFolder("train/", transform)
    loader = sluice.torch.Loader(dataset, batch_size=256, shuffle=True, threads=8)

Each transform is a stage of the spec (transform.stages() lists them), run fused in sluice's C++
workers: the geometric ones (crops, resizes, flips) fold into one resampling from the source,
ToTensor and Normalize into the pass that writes the batch. Compose also takes torchvision's own
transform objects (read by their parameters). A transform sluice does not run (a Python Lambda,
an augmentation sluice has no stage for yet) is refused by its name when the spec is built; the
names sluice has and the stages they become are in TRANSFORMS.

Parameters follow torchvision's: Resize(int) resizes the shorter side, sizes given as a sequence
are (height, width), interpolation is bilinear (the only one sluice resamples with; antialias as
torchvision applies it to PIL images), RandomCrop pads with a constant.
"""

from collections.abc import Sequence

__all__ = ["CenterCrop", "Compose", "CutMix", "MixUp", "Normalize", "PILToTensor", "RandomCrop", "RandomHorizontalFlip",
           "RandomResizedCrop", "Resize", "ToTensor", "TRANSFORMS", "UnsupportedTransformError", "stages_of"]


class UnsupportedTransformError(TypeError):
    """A transform (or a parameter of one) sluice does not run; the message names it."""


# torchvision's augmentations sluice has no stage for yet: named in the refusal, so that a recipe
# that uses one learns which line, rather than that an attribute is missing.
_NOT_YET = ("ColorJitter", "Grayscale", "RandomGrayscale", "RandomVerticalFlip", "RandomRotation",
            "RandomAffine", "GaussianBlur", "RandomErasing", "RandomPosterize", "RandomSolarize",
            "RandomEqualize", "RandomAutocontrast", "RandomAdjustSharpness", "RandomInvert",
            "AutoAugment", "RandAugment", "TrivialAugmentWide", "AugMix", "Pad",
            "RandomPerspective", "FiveCrop", "TenCrop", "ConvertImageDtype", "RandomApply",
            "RandomChoice", "RandomOrder", "ElasticTransform", "Lambda")


def _refuse(name, why):
    return UnsupportedTransformError(f"{name}: {why}")


def _size(name, size):
    """torchvision's size: an int, or a sequence (h, w) or (s,). Returns (height, width) or (s, None)."""
    if isinstance(size, bool):
        raise _refuse(name, f"size: expected a positive integer or (height, width), got {size!r}")
    if isinstance(size, int):
        return size, None
    if isinstance(size, Sequence) and len(size) in (1, 2) and all(isinstance(v, int) and not isinstance(v, bool)
                                                                   for v in size):
        return (size[0], None) if len(size) == 1 else (size[0], size[1])
    raise _refuse(name, f"size: expected a positive integer or (height, width), got {size!r}")


def _extent(name, size):
    """A square or (height, width) size as the spec's size or width + height."""
    h, w = _size(name, size)
    return {"size": h} if w is None or w == h else {"width": w, "height": h}


def _interpolation(name, interpolation):
    """torchvision's InterpolationMode (or its string value); sluice resamples bilinear only."""
    value = getattr(interpolation, "value", interpolation)
    if str(value).lower() != "bilinear":
        raise _refuse(name, f"interpolation {value!r}: sluice resamples bilinear only (InterpolationMode.BILINEAR, "
                            "torchvision's default)")
    return "bilinear"


def _floats(name, field, values):
    """A list of floats from a list, tuple, torch tensor or numpy array."""
    if hasattr(values, "tolist"):
        values = values.tolist()
    if isinstance(values, (int, float)) and not isinstance(values, bool):
        values = [values]
    if not isinstance(values, Sequence) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                   for v in values):
        raise _refuse(name, f"{field}: expected a sequence of numbers, got {values!r}")
    return [float(v) for v in values]


class Transform:
    """A transform that becomes stages of the spec."""

    def stages(self):
        """The spec stages this transform becomes, in order (Compose: all of them, with the
        normalize stage that ToTensor/Normalize make)."""
        return stages_of([self])

    def __call__(self, image):
        raise TypeError(f"{type(self).__name__} runs inside a sluice pipeline (give it to "
                        "sluice.datasets.ImageFolder), not on an image in Python")

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({fields})"


class Compose(Transform):
    """Composes transforms (sluice's or torchvision's), as torchvision.transforms.Compose."""

    def __init__(self, transforms):
        self.transforms = list(transforms)

    def stages(self):
        return stages_of(self.transforms)


class Resize(Transform):
    """Resize(size): an int resizes the shorter side to it (resize_shorter), (h, w) resizes to that
    (resize). Bilinear, antialiased as torchvision resizes a PIL image."""

    def __init__(self, size, interpolation="bilinear", max_size=None, antialias=True):
        self.size, self.interpolation, self.max_size, self.antialias = size, interpolation, max_size, antialias


class CenterCrop(Transform):
    """CenterCrop(size): center_crop."""

    def __init__(self, size):
        self.size = size


class RandomResizedCrop(Transform):
    """RandomResizedCrop(size, scale, ratio): random_resized_crop, torchvision's draw per sample."""

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0), interpolation="bilinear",
                 antialias=True):
        self.size, self.scale, self.ratio = size, scale, ratio
        self.interpolation, self.antialias = interpolation, antialias


class RandomCrop(Transform):
    """RandomCrop(size, padding, fill): random_crop (constant padding on every side)."""

    def __init__(self, size, padding=None, pad_if_needed=False, fill=0, padding_mode="constant"):
        self.size, self.padding, self.pad_if_needed = size, padding, pad_if_needed
        self.fill, self.padding_mode = fill, padding_mode


class RandomHorizontalFlip(Transform):
    """RandomHorizontalFlip(p): flip_horizontal with probability p."""

    def __init__(self, p=0.5):
        self.p = p


class ToTensor(Transform):
    """ToTensor(): float32 (N, C, H, W) in [0, 1] (the normalize stage, mean 0 and std 1)."""


class PILToTensor(Transform):
    """PILToTensor(): uint8 (N, C, H, W) (the normalize stage without mean and std)."""


class Normalize(Transform):
    """Normalize(mean, std) after ToTensor(): the normalize stage's mean and std (lists, tensors or
    numpy arrays)."""

    def __init__(self, mean, std, inplace=False):
        self.mean, self.std, self.inplace = mean, std, inplace


class MixUp(Transform):
    """torchvision.transforms.v2.MixUp(alpha, num_classes): the mixup stage, after the batch stage.
    Labels become float32 (N, num_classes), as v2's (docs/decisions/batch-mix-labels.md)."""

    def __init__(self, *, alpha=1.0, num_classes, labels_getter="default"):
        self.alpha = alpha
        self.num_classes = num_classes
        self.labels_getter = labels_getter


class CutMix(Transform):
    """torchvision.transforms.v2.CutMix(alpha, num_classes): the cutmix stage, after the batch
    stage. Labels become float32 (N, num_classes), as v2's."""

    def __init__(self, *, alpha=1.0, num_classes, labels_getter="default"):
        self.alpha = alpha
        self.num_classes = num_classes
        self.labels_getter = labels_getter


def _batch_mix(t):
    """MixUp / CutMix (sluice's or torchvision v2's) as its batch-level stage."""
    name = type(t).__name__
    if getattr(t, "labels_getter", "default") != "default":
        raise _refuse(name, "labels_getter: sluice mixes the batch's own labels (labels_getter=\"default\")")
    alpha, num_classes = getattr(t, "alpha", 1.0), getattr(t, "num_classes", None)
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
        raise _refuse(name, f"num_classes: expected a positive integer, got {num_classes!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not alpha > 0:
        raise _refuse(name, f"alpha: expected a number > 0, got {alpha!r}")
    return {name.lower(): {"alpha": float(alpha), "num_classes": num_classes}}


def _resize(t):
    name = "Resize"
    _interpolation(name, t.interpolation)
    if t.max_size is not None:
        raise _refuse(name, "max_size: sluice has no cap on the longer side; give a size")
    h, w = _size(name, t.size)
    antialias = True if t.antialias is None else bool(t.antialias)  # None: torchvision antialiases PIL images
    options = {"filter": "bilinear", "antialias": antialias}
    if w is None:
        return {"resize_shorter": {"size": h, **options}}
    return {"resize": {"width": w, "height": h, **options}}


def _random_resized_crop(t):
    name = "RandomResizedCrop"
    _interpolation(name, t.interpolation)
    antialias = True if t.antialias is None else bool(t.antialias)
    return {"random_resized_crop": {**_extent(name, t.size), "scale": _floats(name, "scale", t.scale),
                                    "ratio": _floats(name, "ratio", t.ratio), "filter": "bilinear",
                                    "antialias": antialias}}


def _random_crop(t):
    name = "RandomCrop"
    if t.pad_if_needed:
        raise _refuse(name, "pad_if_needed=True: sluice pads by `padding` only")
    if t.padding_mode != "constant":
        raise _refuse(name, f"padding_mode {t.padding_mode!r}: sluice pads with a constant only")
    padding = t.padding or 0
    if isinstance(padding, Sequence):
        if len(set(padding)) != 1:
            raise _refuse(name, f"padding {padding!r}: sluice pads every side by the same amount")
        padding = padding[0]
    fill = t.fill
    if isinstance(fill, Sequence) and len(set(fill)) == 1:
        fill = fill[0]
    if isinstance(fill, bool) or not isinstance(fill, int):
        raise _refuse(name, f"fill {fill!r}: sluice fills with one grey level (an integer 0-255)")
    return {"random_crop": {**_extent(name, t.size), "padding": padding, "fill": fill}}


# What each name becomes: the docs' transform table is this list.
TRANSFORMS = {
    "Compose": "the stages of its transforms, in order",
    "Resize": "resize_shorter (an int size) or resize ((h, w)); fused: one resampling from the source",
    "CenterCrop": "center_crop; fused (folds into the source mapping)",
    "RandomResizedCrop": "random_resized_crop; fused (folds into the source mapping)",
    "RandomCrop": "random_crop; fused (folds into the source mapping, padding included)",
    "RandomHorizontalFlip": "flip_horizontal; fused (folds into the source mapping)",
    "ToTensor": "normalize (float32, mean 0, std 1, NCHW); fused into the pass that writes the batch",
    "PILToTensor": "normalize (uint8, NCHW); fused into the pass that writes the batch",
    "Normalize": "normalize's mean and std; fused into the pass that writes the batch",
    "MixUp": "mixup (after batch); on the complete batch, on a worker; labels become float32 (N, num_classes)",
    "CutMix": "cutmix (after batch); on the complete batch, on a worker; labels become float32 (N, num_classes)",
}


def stages_of(transforms):
    """The spec stages of a list of transforms (sluice's or torchvision's), in order: the image ops,
    then one normalize stage when ToTensor/PILToTensor/Normalize appear (at the end, as torchvision
    requires: Normalize needs a tensor, and no image op may follow one). Raises
    UnsupportedTransformError naming a transform sluice does not run."""
    stages = []
    batch_level = []  # MixUp / CutMix: after the batch stage, so after everything per sample
    output = None  # None: u8 NHWC as decoded; else the normalize stage's options
    for t in _flatten(transforms):
        name = type(t).__name__
        mixes = _batch_mixes(t)
        if mixes is not None:
            batch_level.extend(mixes)
            continue
        if batch_level:
            raise _refuse(name, "comes after MixUp/CutMix, which mix whole batches: put the per-image transforms first")
        if output is not None and name not in ("Normalize",):
            raise _refuse(name, f"comes after {'ToTensor' if output['dtype'] == 'f32' else 'PILToTensor'}: sluice "
                                "runs the image ops before the batch is written, so they must come first")
        if name == "Resize":
            stages.append(_resize(t))
        elif name == "CenterCrop":
            stages.append({"center_crop": _extent(name, t.size)})
        elif name == "RandomResizedCrop":
            stages.append(_random_resized_crop(t))
        elif name == "RandomCrop":
            stages.append(_random_crop(t))
        elif name == "RandomHorizontalFlip":
            stages.append({"flip_horizontal": {"probability": float(t.p)}})
        elif name == "ToTensor":
            output = {"mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0], "layout": "nchw", "dtype": "f32"}
        elif name == "PILToTensor":
            output = {"mean": [], "std": [], "layout": "nchw", "dtype": "u8"}
        elif name == "Normalize":
            if output is None or output["dtype"] != "f32":
                raise _refuse(name, "needs ToTensor() before it (as in torchvision, it normalises a float tensor)")
            output["mean"] = _floats(name, "mean", t.mean)
            output["std"] = _floats(name, "std", t.std)
        elif name == "Lambda":
            raise _refuse(name, "a Python function cannot run in sluice's C++ workers; do it on the batch "
                                "after the loader, or ask for a stage")
        elif name in _NOT_YET:
            raise _refuse(name, "sluice has no stage for it yet; sluice.transforms runs " +
                          ", ".join(sorted(TRANSFORMS)))
        else:
            raise _refuse(name, "not a transform sluice knows; sluice.transforms runs " + ", ".join(sorted(TRANSFORMS)))
    if output is not None:
        stages.append({"normalize": output})
    return stages + batch_level


def _batch_mixes(t):
    """The batch-level stages of MixUp, CutMix, or RandomChoice over them with equal odds (the
    reference recipe's `RandomChoice([MixUp(...), CutMix(...)])`: each batch picks one); None for
    any other transform."""
    name = type(t).__name__
    if name in ("MixUp", "CutMix"):
        return [_batch_mix(t)]
    members = getattr(t, "transforms", None)
    if name == "RandomChoice" and members and all(type(m).__name__ in ("MixUp", "CutMix") for m in members):
        p = getattr(t, "p", None)
        if p is not None and len(set(p)) > 1:
            raise _refuse(name, f"p={p!r}: sluice picks MixUp or CutMix with equal odds")
        if len(members) > 2 or len({type(m).__name__ for m in members}) != len(members):
            raise _refuse(name, "sluice chooses between one MixUp and one CutMix")
        return [_batch_mix(m) for m in members]
    return None


def _flatten(transforms):
    for t in transforms:
        if type(t).__name__ == "Compose":
            yield from _flatten(t.transforms)
        else:
            yield t


def __getattr__(name):
    # torchvision's names sluice does not run yet: say so by name (an AttributeError still, so
    # hasattr() and `from ... import` behave).
    if name in _NOT_YET:
        raise AttributeError(f"sluice.transforms has no {name}: sluice has no stage for it yet (it runs "
                             f"{', '.join(sorted(TRANSFORMS))})")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
