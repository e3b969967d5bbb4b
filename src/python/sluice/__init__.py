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
    stage_reference,
)

# The classes and function live in sluice._sluice; help() and repr() name them where users find them.
for _name in ("Batch", "EpochIterator", "Pipeline", "Tensor", "launcher_rank", "stage_reference"):
    try:
        globals()[_name].__module__ = __name__
    except (AttributeError, TypeError):  # a type that does not allow it keeps its own name
        pass
del _name

__all__ = ["Batch", "EpochIterator", "Error", "InvalidArgumentError", "NotFoundError", "Pipeline", "Tensor",
           "datasets", "launcher_rank", "stage_reference", "torch", "transforms"]


def _stage_help():
    """The stages and their options with their defaults, from the stages themselves
    (stage_reference(): the canonical JSON writer's output), for help() on the main classes."""
    import json
    lines = ["", "Stages of a spec (\"stages\": [...]) and their options, with defaults (docs/json-spec.md):", ""]
    for entry in stage_reference():
        (name, options), = entry.items()
        shown = json.dumps(options) if options else "{}"
        lines.append(f"    {name}: {shown}")
    return "\n".join(lines)


def _signature(*keywords, positional=("spec",)):
    import inspect
    params = [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in positional]
    params += [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=None) for k in keywords]
    return inspect.Signature(params)


try:
    Pipeline.__doc__ = (Pipeline.__doc__ or "") + "\n" + _stage_help()
    # pybind11's constructors have no signature inspect can read; this is the one __init__ takes.
    Pipeline.__signature__ = _signature("base_dir", "threads", "memory_budget", "cuda_stream", "shard")
except (AttributeError, TypeError):  # an interpreter that does not allow it keeps the plain ones
    pass


def __getattr__(name):
    # `import sluice` then `sluice.torch.Loader(...)` works without importing torch up front;
    # sluice.transforms and sluice.datasets need no torch but load on first use too.
    if name in ("torch", "transforms", "datasets"):
        return _importlib.import_module("." + name, __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
