"""sluice.torch: a sluice pipeline as the input of a PyTorch training loop, in place of
torch.utils.data.DataLoader (docs/python.md, "sluice.torch").

    import sluice.torch

    loader = sluice.torch.Loader("train.json", batch_size=256, drop_last=True,
                                 shard="launcher", threads=8, device="cuda")
    for epoch in range(start_epoch, epochs):
        loader.set_epoch(epoch)
        for images, labels in loader:      # (N, C, H, W) images, (N,) int64 labels
            ...

Images leave the pipeline through DLPack without a copy: the tensor is the batch's slot of the
pipeline's ring, and the slot stays out of the ring while the tensor (or any view of it) lives, so
a tensor kept past the next step, or past the loader, keeps its values. Labels are copied to int64
(what torch's losses take). When the loop holds every slot but one (tensors from earlier batches
kept alive), the next batch is copied instead, so that production can go on; see Loader.
"""

import copy
import errno
import json
import os
import warnings
from collections.abc import Mapping

import torch

from . import _sluice, _stage_help

__all__ = ["Loader"]

# The batch ring never has fewer slots (prefetch depth 1 + 2): below this many held batches no
# check is needed.
_MIN_RING_SLOTS = 3
_STATE_VERSION = 1
# The largest epoch number (the library counts epochs in a signed 64-bit integer).
_MAX_EPOCH = 2**63 - 1


def _invalid(message):
    """sluice.InvalidArgumentError (a ValueError), as the compiled module raises it."""
    error = _sluice.InvalidArgumentError(message)
    error.code, error.path, error.cause = "invalid argument", "", message
    return error


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _invalid(f"{name}: expected a positive integer, got {value!r}")
    return value


def _read_spec(spec, base_dir):
    """The spec as a dict the overrides can edit, and the folder its relative paths resolve against
    (a file's own folder, as sluice.Pipeline(path) resolves them)."""
    if isinstance(spec, Mapping):
        return copy.deepcopy(dict(spec)), base_dir
    if isinstance(spec, (str, os.PathLike)):
        if base_dir is not None:
            raise _invalid("base_dir: applies to a spec given as a dict; a spec file's relative paths "
                           "resolve against its own folder")
        path = os.fspath(spec)
        try:
            with open(path, encoding="utf-8") as f:
                document = json.load(f)
        except FileNotFoundError:
            # As Python raises a missing file: str() is "[Errno 2] <cause>: '<path>'".
            error = _sluice.NotFoundError(f"{path}: the spec file does not exist")
            error.code, error.path, error.cause = "not found", path, "the spec file does not exist"
            error.errno, error.strerror, error.filename = errno.ENOENT, error.cause, path
            raise error from None
        except json.JSONDecodeError as e:
            raise _invalid(f"{path}: not valid JSON: {e}") from None
        if not isinstance(document, dict):
            raise _invalid(f"{path}: expected a JSON object at the top level")
        return document, os.path.dirname(os.path.abspath(path))
    raise TypeError(f"spec: expected a dict or the path of a JSON spec file, got {type(spec).__name__}")


def _stage_name(stage):
    if isinstance(stage, str):
        return stage
    if isinstance(stage, Mapping) and len(stage) == 1:
        return next(iter(stage))
    return None


def _set_batch(document, batch_size, drop_last):
    """batch_size and drop_last into the spec's batch stage, which is added (before prefetch and
    to_device, and before mixup/cutmix, which mix whole batches) when the spec has none."""
    stages = document.get("stages")
    if not isinstance(stages, list):
        return  # the compiled parser says what is wrong with it
    names = [_stage_name(s) for s in stages]
    if batch_size is None and drop_last is None and "batch" in names:
        return
    if "batch" in names:
        i = names.index("batch")
        options = stages[i]["batch"] if isinstance(stages[i], Mapping) else {}
        options = dict(options) if isinstance(options, Mapping) else {}
    else:
        if batch_size is None:
            raise _invalid("batch_size: the spec has no batch stage, so batch_size is required")
        i = next((k for k, n in enumerate(names) if n in ("mixup", "cutmix", "prefetch", "to_device")), len(stages))
        stages.insert(i, {})
        options = {}
    if batch_size is not None:
        options["size"] = batch_size
    if drop_last is not None:
        options["drop_last"] = drop_last
    stages[i] = {"batch": options}


# DataLoader's keywords that sluice.torch.Loader does not take, and what it uses instead.
_DATALOADER_ONLY = {
    "num_workers": "threads= (worker threads in this process, or \"auto\")",
    "pin_memory": "device=\"cuda\" (batches are assembled in page-locked memory and copied on their own stream)",
    "collate_fn": "the spec's batch stage (sluice assembles each batch in place, in C++; there is no per-sample "
                  "Python object to collate)",
    "sampler": "shuffle= and shard= (the order follows from the seed and the epoch; shard=\"launcher\" in place of "
               "DistributedSampler)",
    "batch_sampler": "batch_size= and drop_last=",
    "persistent_workers": "nothing: sluice's workers live as long as the loader",
    "prefetch_factor": "the spec's prefetch stage ({\"prefetch\": {\"depth\": n}}, batches ahead)",
    "worker_init_fn": "seed= (every random choice follows from (seed, epoch, sample))",
    "generator": "seed= (every random choice follows from (seed, epoch, sample))",
    "multiprocessing_context": "nothing: sluice's workers are threads of this process",
    "timeout": "nothing: a wait for a batch ends with Ctrl-C (KeyboardInterrupt) at any time",
    "in_order": "the spec's build option \"ordered\"",
    "pin_memory_device": "device=\"cuda:N\"",
}


def _refuse_keywords(keywords):
    """TypeError for keywords Loader does not take, saying what sluice uses for a DataLoader's."""
    for name in keywords:
        if name in _DATALOADER_ONLY:
            raise TypeError(f"sluice.torch.Loader() takes no {name}= (a DataLoader keyword): sluice uses "
                            f"{_DATALOADER_ONLY[name]}")
        raise TypeError(f"sluice.torch.Loader() got an unexpected keyword argument {name!r}")


def _set_shuffle(document, shuffle):
    """shuffle=True: a new file order every epoch (the spec's shuffle_files, seeded by the build seed
    unless it names its own); shuffle=False: the source's order (shuffle_files and any shuffle stage
    removed)."""
    if not isinstance(shuffle, bool):
        raise _invalid(f"shuffle: expected True or False, got {shuffle!r}")
    if shuffle:
        if not isinstance(document.get("shuffle_files"), Mapping):
            document["shuffle_files"] = {}
        return
    document.pop("shuffle_files", None)
    stages = document.get("stages")
    if isinstance(stages, list):
        document["stages"] = [s for s in stages if _stage_name(s) != "shuffle"]


def _spec_device(document):
    """The device the spec's to_device stage names ("cuda:0", ...), or None."""
    for stage in document.get("stages") or []:
        if _stage_name(stage) == "to_device" and isinstance(stage, Mapping):
            options = stage["to_device"]
            if isinstance(options, Mapping) and isinstance(options.get("device"), str):
                return options["device"].lower()  # spec names are case-insensitive; torch's are not
    return None


def _set_device(document, device):
    """device="cuda[:N]" makes the spec's to_device stage (added when absent) send batches there;
    "cpu" requires that it sends them nowhere. Returns the torch.device batches arrive on."""
    try:
        wanted = torch.device(device)
    except (RuntimeError, TypeError):
        raise _invalid(f"device: expected \"cpu\", \"cuda\" or \"cuda:N\", got {device!r}") from None
    spec_device = _spec_device(document)
    if wanted.type == "cpu":
        if spec_device is not None and spec_device != "host":
            raise _invalid(f"device: \"cpu\", but the spec's to_device stage sends batches to {spec_device}")
        return wanted
    if wanted.type != "cuda":
        raise _invalid(f"device: sluice delivers to \"cpu\" or \"cuda[:N]\", got {device!r}")
    if wanted.index is None:
        wanted = torch.device("cuda", torch.cuda.current_device() if torch.cuda.is_available() else 0)
    name = f"cuda:{wanted.index}"
    stages = document.setdefault("stages", [])
    for i, stage in enumerate(stages):
        if _stage_name(stage) == "to_device":
            options = dict(stage["to_device"]) if isinstance(stage, Mapping) else {}
            options["device"] = name
            stages[i] = {"to_device": options}
            return wanted
    stages.append({"to_device": {"device": name}})
    return wanted


class Loader:
    """An iterable over (images, labels) torch tensors, one epoch per iteration.

    spec: a sluice pipeline spec (docs/json-spec.md) as a dict or the path of a JSON file. The
    keywords override it: batch_size and drop_last (its batch stage, added when it has none),
    shuffle (True: a new file order every epoch, the spec's shuffle_files; False: the source's
    order), seed (build.seed), threads (an int or "auto": sluice's worker threads, in place of
    DataLoader's num_workers), memory_budget (bytes or "4GiB"), shard ("launcher": the rank and
    world size torchrun, mpirun or srun set; or (rank, world)), device ("cpu", or "cuda[:N]":
    batches assembled in page-locked memory and copied to the GPU on their own stream, in place of
    pin_memory=True and .cuda(non_blocking=True)), base_dir (where a dict's relative paths resolve).
    DataLoader's own keywords (num_workers, pin_memory, collate_fn, sampler, persistent_workers,
    ...) raise TypeError saying what sluice uses instead. classes, class_to_idx and samples
    describe the data set as ImageFolder does.

    Each batch is (images, labels): images (N, C, H, W) of the normalize stage's dtype (float32,
    float16, bfloat16 or uint8), shared with the pipeline without a copy (with layout "nhwc" the
    same memory viewed as (N, C, H, W) in torch.channels_last); labels (N,) int64, or with MixUp /
    CutMix (mixup/cutmix stages) float32 (N, num_classes), as torchvision.transforms.v2. The last batch
    of an epoch is short unless drop_last.

    iter(loader) iterates the epoch set_epoch() chose, else the one after the last epoch started
    (0 first), so `for epoch ...: for images, labels in loader:` walks epochs 0, 1, ... with a
    new order and new augmentations each time; set_epoch(e) makes it epoch e, as
    DistributedSampler.set_epoch does. Every order and random choice follows from the seed and
    the epoch, at any thread count. Starting an epoch abandons one in progress (its iterator then
    raises sluice.Error).

    Memory: a batch's slot returns to the ring when its images tensor and every view of it are
    gone. The ring has batch_slots slots (prefetch depth + 2); a loop that keeps images alive
    (a loss summed over several batches keeps its inputs for backward(), a list of batches
    keeps them all) would stop production once it held them all, so when the loop holds every
    slot but the new batch's, the new batch is copied and its slot returned at once
    (copied_batches counts them, and a RuntimeWarning says so once). Clone what you keep, or
    raise the prefetch depth, to avoid the copies.
    """

    def __init__(self, spec, *, batch_size=None, drop_last=None, shuffle=None, shard=None, threads=None,
                 memory_budget=None, device=None, seed=None, base_dir=None, **dataloader_keywords):
        _refuse_keywords(dataloader_keywords)
        document, base = _read_spec(spec, base_dir)
        if shuffle is not None:
            _set_shuffle(document, shuffle)
        if batch_size is not None:
            _positive_int("batch_size", batch_size)
        if drop_last is not None and not isinstance(drop_last, bool):
            raise _invalid(f"drop_last: expected True or False, got {drop_last!r}")
        if seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
                raise _invalid(f"seed: expected an integer in [0, 2^64), got {seed!r}")
            build = document.setdefault("build", {})
            if isinstance(build, dict):
                build["seed"] = seed
        _set_batch(document, batch_size, drop_last)
        if device is not None:
            self._device = _set_device(document, device)
        else:
            spec_device = _spec_device(document)
            try:
                self._device = torch.device("cpu" if spec_device in (None, "host") else spec_device)
            except RuntimeError:  # not a device name: the spec parser says what it expects
                self._device = torch.device("cpu")
        cuda_stream = None
        if self._device.type == "cuda" and torch.cuda.is_available():
            # The stream batches are handed over on: torch's current one for that device (the
            # legacy default stream unless the caller set another).
            cuda_stream = torch.cuda.current_stream(self._device).cuda_stream
        self._pipeline = _sluice.Pipeline(document, base_dir=base, threads=threads, memory_budget=memory_budget,
                                          cuda_stream=cuda_stream, shard=shard)
        canonical = self._pipeline.spec
        batch = next(s["batch"] for s in canonical["stages"] if "batch" in s)
        self._batch_size = batch["size"]
        self._drop_last = batch["drop_last"]
        normalize = [s["normalize"] for s in canonical["stages"] if "normalize" in s]
        # Without a normalize stage the pipeline delivers its decoded u8 pixels, NHWC.
        self._nhwc = (normalize[0]["layout"] if normalize else "nhwc").lower() == "nhwc"
        self._next_epoch = 0
        self._active = None  # the _EpochIterator of the epoch in progress, once it started
        self._resume = None  # (epoch, batch) load_state_dict() set, until an epoch starts
        self.copied_batches = 0
        self.last_padding = 0  # padding samples at the end of the last batch yielded (docs/distributed.md)
        self._warned_copy = False

    def __len__(self):
        """Batches in an epoch of this process's shard (the last one short unless drop_last)."""
        return self._pipeline.batches_per_epoch

    def __iter__(self):
        return _EpochIterator(self, self._next_epoch)

    def set_epoch(self, epoch):
        """The epoch the next iter() iterates (order and augmentations follow from seed and epoch)."""
        if isinstance(epoch, bool) or not isinstance(epoch, int) or not 0 <= epoch <= _MAX_EPOCH:
            raise _invalid(f"set_epoch: expected an integer from 0 to {_MAX_EPOCH}, got {epoch!r}")
        self._next_epoch = epoch

    def state_dict(self):
        """Where iteration stands, as a dict that torch.save keeps: inside an epoch, the batch after
        the last one yielded (load_state_dict() then resumes there: exactly the batches this loader
        had not yet yielded); between epochs, the start of the epoch iter() would iterate next."""
        active = self._active
        if active is not None and active.position < len(self):
            epoch, batch = active.epoch, active.position
        elif self._resume is not None and self._resume[0] == self._next_epoch:
            epoch, batch = self._resume
        else:
            epoch, batch = self._next_epoch, 0
        return {"version": _STATE_VERSION, "epoch": epoch, "batch": batch, "pipeline": self._pipeline.state()}

    def load_state_dict(self, state_dict):
        """Resumes from state_dict() of a loader with the same spec and seed, saved by any rank of a
        run at any world size with the same global batch (batch_size x world): the next iter()
        iterates the rest of the saved epoch, every sample not yet delivered exactly once, split
        among this run's ranks (docs/distributed.md). Abandons an epoch in progress. Raises
        ValueError for a state of another pipeline, another global batch or a damaged one."""
        if not isinstance(state_dict, Mapping) or state_dict.get("version") != _STATE_VERSION:
            raise _invalid("load_state_dict: expected a dict from sluice.torch.Loader.state_dict() "
                           f"(version {_STATE_VERSION})")
        epoch, batch, pipeline_state = state_dict.get("epoch"), state_dict.get("batch"), state_dict.get("pipeline")
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (epoch, batch)) or \
                not isinstance(pipeline_state, (bytes, bytearray)):
            raise _invalid("load_state_dict: the dict's epoch, batch or pipeline entry is missing or damaged")
        self._pipeline.restore(bytes(pipeline_state))  # checks it is this pipeline's
        if batch > 0 and self._pipeline.next_epoch != epoch:
            raise _invalid(f"load_state_dict: the dict says epoch {epoch} batch {batch}, its pipeline state "
                           f"epoch {self._pipeline.next_epoch}")
        self._active = None
        self._next_epoch = epoch
        self._resume = (epoch, batch)

    @property
    def classes(self):
        """The class names, label i being classes[i] (as ImageFolder.classes); [] where labels are numbers."""
        return self._pipeline.classes

    @property
    def class_to_idx(self):
        """{class name: label}, as ImageFolder.class_to_idx."""
        return self._pipeline.class_to_idx

    @property
    def samples(self):
        """Every item of the data set as (path, label), as ImageFolder.samples (before sharding)."""
        return self._pipeline.samples

    @property
    def batch_size(self):
        return self._batch_size

    @property
    def drop_last(self):
        return self._drop_last

    @property
    def device(self):
        """The torch.device images and labels are on."""
        return self._device

    @property
    def pipeline(self):
        """The sluice.Pipeline behind the loader (stats(), spec, batch_shape, ...)."""
        return self._pipeline

    def stats(self):
        """The pipeline's statistics as a dict (sluice.Pipeline.stats())."""
        return self._pipeline.stats()

    def __repr__(self):
        return (f"<sluice.torch.Loader {len(self)} batches of {self._batch_size} on {self._device}, "
                f"next epoch {self._next_epoch}>")

    def _to_torch(self, batch):
        """(images, labels) of one sluice.Batch; the images share its slot unless it must be copied."""
        images = torch.from_dlpack(batch.data)
        labels = torch.from_dlpack(batch.labels)
        # A copy either way (the slot is not held by it): int64 class indices, or with mixup/cutmix
        # the soft labels, float32 (N, num_classes), as torchvision.transforms.v2 gives them.
        labels = labels.clone() if labels.is_floating_point() else labels.to(torch.int64)
        if self._nhwc:
            images = images.permute(0, 3, 1, 2)  # (N, C, H, W) over NHWC memory: channels_last
        held = self._pipeline.batches_held  # this batch included
        if held >= _MIN_RING_SLOTS and held >= self._pipeline.batch_slots:
            # The loop holds every other slot: keeping this one too would leave none to produce the
            # next batch into, and the next iteration would wait forever.
            images = images.clone(memory_format=torch.preserve_format)
            self.copied_batches += 1
            if not self._warned_copy:
                self._warned_copy = True
                warnings.warn(
                    f"sluice.torch: the loop holds {held - 1} earlier batches of the pipeline's "
                    f"{self._pipeline.batch_slots} batch slots (tensors made from them are alive: a loss summed "
                    "over batches keeps its inputs, a list keeps its items), so this batch and the next ones "
                    "in that situation are copied to let the loader go on. Clone what you keep, or raise the "
                    "spec's prefetch depth, to avoid the copies.", RuntimeWarning, stacklevel=3)
        return images, labels


class _EpochIterator:
    """One pass over an epoch of a Loader; the epoch starts at the first next()."""

    def __init__(self, loader, epoch):
        self._loader = loader
        self.epoch = epoch
        self.position = 0  # batches of the epoch before the next one (those yielded, or skipped by a resume)
        self._batches = None

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._loader)

    def __next__(self):
        loader = self._loader
        if self._batches is None:
            self._batches = loader._pipeline.epoch(self.epoch)
            loader._active = self
            loader._next_epoch = self.epoch + 1
            loader._resume = None
        try:
            batch = next(self._batches)
        except Exception:
            # The end of the epoch, or an error that ended it (a bad file under on_error "fail",
            # another epoch started): nothing of it is left to resume.
            self.position = len(loader)
            if loader._active is self:
                loader._active = None
            raise
        self.position = batch.index + 1
        loader.last_padding = batch.padding
        return loader._to_torch(batch)  # once it returns, the images tensor alone holds the slot


# help(sluice.torch.Loader) lists the stages a spec may hold, from the stages themselves.
Loader.__doc__ += "\n" + _stage_help()
