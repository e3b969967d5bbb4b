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

__all__ = ["AutoAugment", "AutoAugmentPolicy", "CenterCrop", "ColorJitter", "Compose", "CutMix", "GaussianBlur",
           "Grayscale", "InterpolationMode", "MixUp", "Normalize", "PILToTensor", "RandAugment", "RandomAdjustSharpness",
           "RandomAffine", "RandomAutocontrast", "RandomCrop", "RandomEqualize", "RandomErasing", "RandomGrayscale",
           "RandomHorizontalFlip", "RandomInvert", "RandomPosterize", "RandomResizedCrop", "RandomRotation",
           "RandomSolarize", "RandomVerticalFlip", "Resize", "ToTensor", "TrivialAugmentWide", "TRANSFORMS",
           "UnsupportedTransformError", "stages_of"]


class UnsupportedTransformError(TypeError):
    """A transform (or a parameter of one) sluice does not run; the message names it."""


# torchvision's augmentations sluice has no stage for yet: named in the refusal, so that a recipe
# that uses one learns which line, rather than that an attribute is missing.
_NOT_YET = ("Pad",
            "RandomPerspective", "FiveCrop", "TenCrop", "ConvertImageDtype", "RandomApply",
            "RandomChoice", "RandomOrder", "ElasticTransform", "Lambda")


# AugMix is refused for a reason of its own: torchvision runs its ops on a uint8 tensor (its tensor
# kernels), not on the PIL image, and sluice's kernels reproduce Pillow's arithmetic, which gives
# other pixels there (docs/decisions/augmentations.md).
_AUGMIX_WHY = ("torchvision's AugMix converts the image to a uint8 tensor and runs its ops with torch's tensor "
               "kernels (warps through grid_sample), whose pixels differ from Pillow's, which sluice's kernels "
               "reproduce; sluice has no stage for it")


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


class RandomVerticalFlip(Transform):
    """RandomVerticalFlip(p): flip_vertical with probability p."""

    def __init__(self, p=0.5):
        self.p = p


def _jitter_range(name, field, value, center=1.0, bound=(0.0, float("inf")), clip_first_on_zero=True):
    """torchvision's ColorJitter._check_input: a number around `center`, or (min, max) inside `bound`;
    None when the adjustment is left out."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"{name}: {field} {value!r}: a single number must be non negative")
        value = [center - float(value), center + float(value)]
        if clip_first_on_zero:
            value[0] = max(value[0], 0.0)
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        if not bound[0] <= value[0] <= value[1] <= bound[1]:
            raise ValueError(f"{name}: {field} values should be between {bound}, got {value!r}")
        value = [float(value[0]), float(value[1])]
    else:
        raise TypeError(f"{name}: {field} should be a single number or a list/tuple with length 2, got {value!r}")
    return None if value[0] == value[1] == center else value


class ColorJitter(Transform):
    """ColorJitter(brightness, contrast, saturation, hue): color_jitter, torchvision's ranges, random
    order and Pillow's arithmetic, on the sample at its output size (after the crops and resizes)."""

    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0):
        name = "ColorJitter"
        self.brightness = _jitter_range(name, "brightness", brightness)
        self.contrast = _jitter_range(name, "contrast", contrast)
        self.saturation = _jitter_range(name, "saturation", saturation)
        self.hue = _jitter_range(name, "hue", hue, center=0.0, bound=(-0.5, 0.5), clip_first_on_zero=False)


class Grayscale(Transform):
    """Grayscale(num_output_channels): grayscale, Pillow's convert("L"); 1 channel or 3."""

    def __init__(self, num_output_channels=1):
        self.num_output_channels = num_output_channels


class RandomGrayscale(Transform):
    """RandomGrayscale(p): random_grayscale with probability p (the image keeps its channels)."""

    def __init__(self, p=0.1):
        self.p = p


class RandomErasing(Transform):
    """RandomErasing(p, scale, ratio, value): random_erasing on the normalised sample, after
    ToTensor() and Normalize as in torchvision; value a number, one per channel, or "random"."""

    def __init__(self, p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0, inplace=False):
        self.p, self.scale, self.ratio, self.value, self.inplace = p, scale, ratio, value, inplace


def _angles(name, field, value):
    """torchvision's _setup_angle: a number d >= 0 is [-d, d], a pair is [min, max]."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"{name}: if {field} is a single number, it must be positive, got {value!r}")
        return [-float(value), float(value)]
    return [float(v) for v in value]


class RandomRotation(Transform):
    """RandomRotation(degrees, interpolation, expand=False, center, fill): random_rotation."""

    def __init__(self, degrees, interpolation="nearest", expand=False, center=None, fill=0):
        self.degrees = _angles("RandomRotation", "degrees", degrees)
        self.interpolation, self.expand, self.center, self.fill = interpolation, expand, center, fill


class RandomAffine(Transform):
    """RandomAffine(degrees, translate, scale, shear, interpolation, fill, center): random_affine."""

    def __init__(self, degrees, translate=None, scale=None, shear=None, interpolation="nearest", fill=0, center=None):
        self.degrees = _angles("RandomAffine", "degrees", degrees)
        self.shear = None if shear is None else _angles("RandomAffine", "shear", shear)
        self.translate, self.scale, self.interpolation, self.fill, self.center = translate, scale, interpolation, fill, center


class GaussianBlur(Transform):
    """GaussianBlur(kernel_size, sigma=(0.1, 2.0)): gaussian_blur."""

    def __init__(self, kernel_size, sigma=(0.1, 2.0)):
        self.kernel_size = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
        self.sigma = (sigma, sigma) if isinstance(sigma, (int, float)) else tuple(sigma)


class RandomPosterize(Transform):
    """RandomPosterize(bits, p=0.5): random_posterize."""

    def __init__(self, bits, p=0.5):
        self.bits, self.p = bits, p


class RandomSolarize(Transform):
    """RandomSolarize(threshold, p=0.5): random_solarize."""

    def __init__(self, threshold, p=0.5):
        self.threshold, self.p = threshold, p


class RandomInvert(Transform):
    """RandomInvert(p=0.5): random_invert."""

    def __init__(self, p=0.5):
        self.p = p


class RandomAutocontrast(Transform):
    """RandomAutocontrast(p=0.5): random_autocontrast."""

    def __init__(self, p=0.5):
        self.p = p


class RandomEqualize(Transform):
    """RandomEqualize(p=0.5): random_equalize."""

    def __init__(self, p=0.5):
        self.p = p


class RandomAdjustSharpness(Transform):
    """RandomAdjustSharpness(sharpness_factor, p=0.5): random_adjust_sharpness."""

    def __init__(self, sharpness_factor, p=0.5):
        self.sharpness_factor, self.p = sharpness_factor, p


class TrivialAugmentWide(Transform):
    """TrivialAugmentWide(num_magnitude_bins=31, interpolation, fill): trivial_augment_wide."""

    def __init__(self, num_magnitude_bins=31, interpolation="nearest", fill=None):
        self.num_magnitude_bins, self.interpolation, self.fill = num_magnitude_bins, interpolation, fill


class RandAugment(Transform):
    """RandAugment(num_ops=2, magnitude=9, num_magnitude_bins=31, interpolation, fill): rand_augment."""

    def __init__(self, num_ops=2, magnitude=9, num_magnitude_bins=31, interpolation="nearest", fill=None):
        self.num_ops, self.magnitude, self.num_magnitude_bins = num_ops, magnitude, num_magnitude_bins
        self.interpolation, self.fill = interpolation, fill


class _Mode(str):
    @property
    def value(self):
        return str(self)


class InterpolationMode:
    """torchvision's InterpolationMode names sluice runs (a recipe's `T.InterpolationMode.BILINEAR`
    reads the same with either module): NEAREST and BILINEAR."""

    NEAREST = _Mode("nearest")
    BILINEAR = _Mode("bilinear")


class AutoAugmentPolicy:
    """torchvision's AutoAugmentPolicy names: IMAGENET and CIFAR10 (SVHN is not run)."""

    IMAGENET = "imagenet"
    CIFAR10 = "cifar10"


class AutoAugment(Transform):
    """AutoAugment(policy=AutoAugmentPolicy.IMAGENET, interpolation, fill): auto_augment."""

    def __init__(self, policy=AutoAugmentPolicy.IMAGENET, interpolation="nearest", fill=None):
        self.policy, self.interpolation, self.fill = policy, interpolation, fill


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


def _warp(name, t):
    """interpolation (nearest or bilinear) and fill (None, a grey level or one per channel, 0-255)."""
    value = str(getattr(t.interpolation, "value", t.interpolation)).lower()
    if value not in ("nearest", "bilinear"):
        raise _refuse(name, f"interpolation {value!r}: sluice warps with nearest or bilinear only")
    fill = t.fill
    if fill is None:
        fill = []
    elif isinstance(fill, (int, float)) and not isinstance(fill, bool):
        fill = [fill]
    fill = list(fill)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and float(v).is_integer() and 0 <= v <= 255
               for v in fill):
        raise _refuse(name, f"fill {t.fill!r}: sluice fills with whole grey levels 0-255")
    return {"interpolation": value, "fill": [int(v) for v in fill]}


def _center(name, center):
    return {} if center is None else {"center": _floats(name, "center", center)}


def _random_rotation(t):
    name = "RandomRotation"
    if t.expand:
        raise _refuse(name, "expand=True: the sample keeps its size in sluice (expand=False)")
    return {"random_rotation": {"degrees": _floats(name, "degrees", t.degrees), **_center(name, t.center),
                                **_warp(name, t)}}


def _random_affine(t):
    name = "RandomAffine"
    options = {"degrees": _floats(name, "degrees", t.degrees)}
    if t.translate is not None:
        options["translate"] = _floats(name, "translate", t.translate)
    if t.scale is not None:
        options["scale"] = _floats(name, "scale", t.scale)
    if t.shear is not None:
        options["shear"] = _floats(name, "shear", t.shear)
    return {"random_affine": {**options, **_center(name, t.center), **_warp(name, t)}}


def _gaussian_blur(t):
    name = "GaussianBlur"
    kernel = [int(v) for v in t.kernel_size]
    return {"gaussian_blur": {"kernel_size": kernel, "sigma": _floats(name, "sigma", t.sigma)}}


def _policy(name, t):
    warp = _warp(name, t)
    if name == "TrivialAugmentWide":
        return {"trivial_augment_wide": {"num_magnitude_bins": int(t.num_magnitude_bins), **warp}}
    if name == "RandAugment":
        return {"rand_augment": {"num_ops": int(t.num_ops), "magnitude": int(t.magnitude),
                                 "num_magnitude_bins": int(t.num_magnitude_bins), **warp}}
    policy = str(getattr(t.policy, "value", t.policy)).lower()
    if policy not in ("imagenet", "cifar10"):
        raise _refuse(name, f"policy {policy!r}: sluice has the ImageNet and CIFAR-10 policies")
    return {"auto_augment": {"policy": policy, **warp}}


def _color_jitter(t):
    options = {}
    for field in ("brightness", "contrast", "saturation", "hue"):
        value = getattr(t, field)
        if value is not None:
            options[field] = _floats("ColorJitter", field, value)
    return {"color_jitter": options}


def _random_erasing(t):
    name = "RandomErasing"
    value = t.value
    if isinstance(value, str):
        if value != "random":
            raise _refuse(name, f"value {value!r}: a number, one number per channel, or 'random'")
    else:
        value = _floats(name, "value", value)
    return {"random_erasing": {"probability": float(t.p), "scale": _floats(name, "scale", t.scale),
                               "ratio": _floats(name, "ratio", t.ratio), "value": value}}


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
    "RandomVerticalFlip": "flip_vertical; fused (folds into the source mapping)",
    "ColorJitter": "color_jitter; a pass over the u8 sample at the output size, after the resampling",
    "Grayscale": "grayscale; a pass over the u8 sample at the output size, after the resampling",
    "RandomGrayscale": "random_grayscale; a pass over the u8 sample at the output size, when drawn",
    "RandomErasing": "random_erasing; writes the rectangle into the normalised sample in its slot, after Normalize",
    "RandomRotation": "random_rotation; a warp of the u8 sample at the output size into a second buffer",
    "RandomAffine": "random_affine; a warp of the u8 sample at the output size into a second buffer",
    "GaussianBlur": "gaussian_blur; two 1-D passes over the u8 sample at the output size",
    "RandomPosterize": "random_posterize; a pass over the u8 sample when drawn",
    "RandomSolarize": "random_solarize; a pass over the u8 sample when drawn",
    "RandomInvert": "random_invert; a pass over the u8 sample when drawn",
    "RandomAutocontrast": "random_autocontrast; a histogram pass and a table pass when drawn",
    "RandomEqualize": "random_equalize; a histogram pass and a table pass when drawn",
    "RandomAdjustSharpness": "random_adjust_sharpness; a 3x3 filter pass when drawn",
    "TrivialAugmentWide": "trivial_augment_wide; one op of its 14 per sample, each a pass as above",
    "RandAugment": "rand_augment; num_ops ops of its 14 per sample, each a pass as above",
    "AutoAugment": "auto_augment (imagenet, cifar10); up to two ops per sample, each a pass as above",
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
    after = []     # the stages on the normalised sample (RandomErasing)
    for t in _flatten(transforms):
        name = type(t).__name__
        mixes = _batch_mixes(t)
        if mixes is not None:
            batch_level.extend(mixes)
            continue
        if batch_level:
            raise _refuse(name, "comes after MixUp/CutMix, which mix whole batches: put the per-image transforms first")
        if output is not None and name not in ("Normalize", "RandomErasing"):
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
        elif name == "RandomVerticalFlip":
            stages.append({"flip_vertical": {"probability": float(t.p)}})
        elif name == "ColorJitter":
            stages.append(_color_jitter(t))
        elif name == "Grayscale":
            stages.append({"grayscale": {"num_output_channels": int(t.num_output_channels)}})
        elif name == "RandomGrayscale":
            stages.append({"random_grayscale": {"probability": float(t.p)}})
        elif name == "RandomRotation":
            stages.append(_random_rotation(t))
        elif name == "RandomAffine":
            stages.append(_random_affine(t))
        elif name == "GaussianBlur":
            stages.append(_gaussian_blur(t))
        elif name == "RandomPosterize":
            stages.append({"random_posterize": {"bits": int(t.bits), "probability": float(t.p)}})
        elif name == "RandomSolarize":
            stages.append({"random_solarize": {"threshold": float(t.threshold), "probability": float(t.p)}})
        elif name in ("RandomInvert", "RandomAutocontrast", "RandomEqualize"):
            stages.append({{"RandomInvert": "random_invert", "RandomAutocontrast": "random_autocontrast",
                            "RandomEqualize": "random_equalize"}[name]: {"probability": float(t.p)}})
        elif name == "RandomAdjustSharpness":
            stages.append({"random_adjust_sharpness": {"sharpness_factor": float(t.sharpness_factor),
                                                       "probability": float(t.p)}})
        elif name in ("TrivialAugmentWide", "RandAugment", "AutoAugment"):
            stages.append(_policy(name, t))
        elif name == "RandomErasing":
            if output is None:
                raise _refuse(name, "needs ToTensor() before it (as in torchvision, it erases a tensor)")
            after.append(_random_erasing(t))
        elif name == "ToTensor":
            output = {"mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0], "layout": "nchw", "dtype": "f32"}
        elif name == "PILToTensor":
            output = {"mean": [], "std": [], "layout": "nchw", "dtype": "u8"}
        elif name == "Normalize":
            if output is None or output["dtype"] != "f32":
                raise _refuse(name, "needs ToTensor() before it (as in torchvision, it normalises a float tensor)")
            if after:
                raise _refuse(name, "comes after RandomErasing: sluice erases the normalised sample, so put "
                                    "RandomErasing after Normalize (as torchvision's reference recipes do)")
            output["mean"] = _floats(name, "mean", t.mean)
            output["std"] = _floats(name, "std", t.std)
        elif name == "Lambda":
            raise _refuse(name, "a Python function cannot run in sluice's C++ workers; do it on the batch "
                                "after the loader, or ask for a stage")
        elif name == "AugMix":
            raise _refuse(name, _AUGMIX_WHY)
        elif name in _NOT_YET:
            raise _refuse(name, "sluice has no stage for it yet; sluice.transforms runs " +
                          ", ".join(sorted(TRANSFORMS)))
        else:
            raise _refuse(name, "not a transform sluice knows; sluice.transforms runs " + ", ".join(sorted(TRANSFORMS)))
    if output is not None:
        stages.append({"normalize": output})
    return stages + after + batch_level


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
    if name == "AugMix":
        raise AttributeError(f"sluice.transforms has no AugMix: {_AUGMIX_WHY}")
    if name in _NOT_YET:
        raise AttributeError(f"sluice.transforms has no {name}: sluice has no stage for it yet (it runs "
                             f"{', '.join(sorted(TRANSFORMS))})")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
