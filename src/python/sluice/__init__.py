"""sluice: image batches for training from a JSON pipeline spec, handed over as DLPack tensors that
share the pipeline's memory (docs/python.md).

    pipeline = sluice.Pipeline("train.json")          # or a dict
    for batch in pipeline.epoch(0):
        images = torch.from_dlpack(batch.data)        # no copy
        labels = torch.from_dlpack(batch.labels)

For PyTorch training loops, sluice.torch.Loader yields (images, labels) torch tensors with len(),
set_epoch(), state_dict()/load_state_dict() and shard="launcher":

    import sluice.torch
    loader = sluice.torch.Loader("train.json", batch_size=256, shard="launcher")

This file re-exports the compiled module, sluice._sluice; sluice.torch is imported on first use
so that `import sluice` does not import torch.
"""

import importlib as _importlib

from ._sluice import (  # noqa: F401 (the package's API)
    Batch,
    EpochIterator,
    Error,
    InvalidArgumentError,
    NotFoundError,
    Pipeline,
    Tensor,
    __version__,
    launcher_rank,
)

# The classes and function live in sluice._sluice; help() and repr() name them where users find them.
for _name in ("Batch", "EpochIterator", "Pipeline", "Tensor", "launcher_rank"):
    try:
        globals()[_name].__module__ = __name__
    except (AttributeError, TypeError):  # a type that does not allow it keeps its own name
        pass
del _name

__all__ = ["Batch", "EpochIterator", "Error", "InvalidArgumentError", "NotFoundError", "Pipeline", "Tensor",
           "launcher_rank", "torch"]


def __getattr__(name):
    # `import sluice` then `sluice.torch.Loader(...)` works without importing torch up front.
    if name == "torch":
        return _importlib.import_module(".torch", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
