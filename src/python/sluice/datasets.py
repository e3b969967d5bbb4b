"""sluice.datasets: torchvision's ImageFolder as a sluice pipeline spec (docs/python.md).

    dataset = sluice.datasets.ImageFolder("train/", transform)   # was torchvision.datasets.ImageFolder
    loader = sluice.torch.Loader(dataset, batch_size=256, shuffle=True, threads=8)

An ImageFolder is the spec itself (a dict: source, read, decode, the transform's stages), so
sluice.Pipeline and sluice.torch.Loader take it as they take any spec, and it can be edited or
saved with json.dump. The classes are the sorted sub-folders, as torchvision's; loader.classes,
class_to_idx and samples give what the data set held.
"""

from . import transforms as _transforms

__all__ = ["DECODERS", "ImageFolder"]

# decoder=: the decode stage's options of each preset, and what it trades (JPEG only: the other
# formats decode every pixel either way).
DECODERS = {
    # Decodes at 1/2, 1/4 or 1/8 scale when the output allows (libjpeg's DCT scaling): faster on
    # large photos, not the same pixels as PIL's full decode followed by a resize.
    "fast": {"dct_scaling": True},
    # Full-size decode, as PIL decodes for torchvision, then sluice's resampling: the pixels
    # torchvision's transforms give (tests/python/test_transforms.py holds the eval transform to them).
    "torchvision": {"dct_scaling": False},
}


class ImageFolder(dict):
    """ImageFolder(root, transform=None, *, decoder="fast"): a spec over root's class sub-folders
    (label = the sorted folder's index; files with an extension of the formats the decode stage
    reads, JPEG, PNG, WebP, GIF, BMP, TIFF and PNM, recursively, each decoded by its content), decoded as
    `decoder` says (DECODERS: "torchvision" for torchvision's exact pixels, "fast" for DCT
    scaling), then the transform's stages (sluice.transforms, or torchvision's own transforms).
    target_transform, loader and is_valid_file (Python callables) are refused: sluice reads and
    labels files in C++."""

    def __init__(self, root, transform=None, target_transform=None, loader=None, is_valid_file=None, *,
                 decoder="fast"):
        for name, value in (("target_transform", target_transform), ("loader", loader),
                            ("is_valid_file", is_valid_file)):
            if value is not None:
                raise _transforms.UnsupportedTransformError(
                    f"ImageFolder({name}=...): a Python function cannot run in sluice's C++ workers; labels are the "
                    "sorted class folders' indices (transform the labels after the loader)")
        if decoder not in DECODERS:
            raise ValueError(f"decoder: expected one of {', '.join(DECODERS)}, got {decoder!r}")
        import os
        stages = ["read", {"decode": dict(DECODERS[decoder])}]
        if transform is not None:
            stages += _transforms.stages_of([transform])
        super().__init__(source={"folder": os.fspath(root)}, stages=stages)
        self.root = os.fspath(root)
        self.transform = transform
