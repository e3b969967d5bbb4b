// sluice.Pipeline and sluice.EpochIterator: a pipeline built from a JSON spec (a dict or a file,
// docs/json-spec.md) and iterated one epoch at a time.
//
//   pipeline = sluice.Pipeline({"source": {...}, "stages": [...]}, threads=2)
//   for batch in pipeline.epoch(e): ...        # epoch e
//   for batch in pipeline: ...                 # the epoch after the last one started (0 first)
//
// Waiting for a batch releases the GIL, so other Python threads (a training step, a thread that
// drops tensors and so frees slots) run meanwhile, and looks for signals every 50 ms (Ctrl-C
// raises KeyboardInterrupt out of next() even while the consumer holds every slot). Calls on one pipeline are serialised by
// Core::mutex: the Loader's API is its consumer's, one thread at a time.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <pybind11/stl.h>

#include "sluice/detail/core/numbers.hpp"
#include "python_module.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"
#include "sluice/pipeline/json_spec.hpp"
#include "sluice/pipeline/launcher.hpp"

namespace sluice::python {

namespace {

// The Python object sluice.Pipeline.
struct PipelineRef {
  std::shared_ptr<Core> core;
  std::string spec_json;  // the canonical document (every option written out)
  Shape batch_shape;      // of a full batch, as the consumer receives it
  DType dtype = DType::kU8;
  std::vector<OutputDescription> outputs;  // the Loader's: data, then labels
};

// pipeline.epoch(e): a one-pass iterator over epoch e, started by its first next().
struct EpochIterator {
  enum class Phase { kPending, kRunning, kEnded };

  EpochIterator(std::shared_ptr<Core> c, std::int64_t e) : core(std::move(c)), epoch(e) {}

  std::shared_ptr<Core> core;
  std::int64_t epoch;
  std::uint64_t generation = 0;  // Core::generation when this iterator started
  Phase phase = Phase::kPending;
  std::optional<Loader::Iterator> it;  // declared after `core`: destroyed before it
};

// Signals while a batch is awaited. Python runs its signal handlers (KeyboardInterrupt for
// Ctrl-C) only when the main thread looks for them, so the Loader's wait check does that every
// kSignalInterval: with the GIL taken back for the moment, PyErr_CheckSignals(). When a handler
// raised, the exception is kept here (on the waiting thread: the check runs on it) and the wait
// ends with Error(kCancelled), which __next__ turns back into the handler's exception. Plain
// pointers under the GIL: Core may die without it (a DLPack deleter), so it holds no Python
// object.
constexpr std::chrono::milliseconds kSignalInterval{50};

struct PendingSignal {
  PyObject* type = nullptr;
  PyObject* value = nullptr;
  PyObject* traceback = nullptr;
};
thread_local PendingSignal pending_signal;

// Python runs signal handlers on its main thread only, so a wait on another thread has nothing
// to look for and never takes the GIL (which also keeps a daemon thread that waits while the
// interpreter shuts down from taking it then). Set under the GIL when a pipeline is built.
std::atomic<unsigned long> main_thread_ident{0};

bool python_signal_raised() {
  if (PyThread_get_thread_ident() != main_thread_ident.load(std::memory_order_relaxed)) return false;
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() == 0) return false;
  PyErr_Fetch(&pending_signal.type, &pending_signal.value, &pending_signal.traceback);
  return true;
}

// With the GIL: raises the exception a signal handler raised during the wait, if one did.
void raise_pending_signal() {
  if (pending_signal.type == nullptr) return;
  PyErr_Restore(pending_signal.type, pending_signal.value, pending_signal.traceback);
  pending_signal = {};
  throw py::error_already_set();
}

// Runs `body` with the GIL released and the pipeline's lock held. Waiting for the lock (another
// thread's call waits for a batch) looks for signals as the wait for a batch does; a signal
// handler's exception from either is raised once the GIL is back.
template <class Body>
auto locked(Core& core, Body&& body) {
  try {
    py::gil_scoped_release release;
    std::unique_lock lock(core.mutex, std::defer_lock);
    while (!lock.try_lock_for(kSignalInterval)) {
      if (python_signal_raised()) throw Error(ErrorCode::kCancelled, "interrupted while waiting for the pipeline");
    }
    return body();
  } catch (const Error& e) {  // the GIL is held again: `release` is gone
    if (e.code() == ErrorCode::kCancelled) raise_pending_signal();
    throw;
  }
}

// The epoch's next batch, or nullptr at its end. Runs under the lock, without the GIL.
std::shared_ptr<BatchHold> advance(EpochIterator& self) {
  using Phase = EpochIterator::Phase;
  Core& core = *self.core;
  switch (self.phase) {
    case Phase::kEnded:
      return nullptr;
    case Phase::kPending:
      self.phase = Phase::kEnded;  // stays so if the first batch fails: the epoch is over
      self.generation = ++core.generation;
      core.next_epoch = self.epoch + 1;
      self.it.emplace(core.loader.epoch(self.epoch).begin());
      break;
    case Phase::kRunning:
      if (self.generation != core.generation) {
        // Starting an epoch abandons the one in progress in the runtime; going on here would
        // read the newer epoch's batches as this one's.
        self.phase = Phase::kEnded;
        self.it.reset();
        throw Error(ErrorCode::kCancelled,
                    "epoch " + std::to_string(self.epoch) +
                        " was abandoned: another epoch was started (or restore() was called) on this pipeline "
                        "while it was being iterated; a pipeline iterates one epoch at a time");
      }
      self.phase = Phase::kEnded;
      ++*self.it;
      break;
  }
  if (*self.it == Loader::Sentinel{}) {
    self.it.reset();
    return nullptr;
  }
  auto hold = std::make_shared<BatchHold>(self.core, std::move(**self.it));
  self.phase = Phase::kRunning;
  return hold;
}

int threads_option(const py::object& threads) {
  if (py::isinstance<py::str>(threads)) {
    if (threads.cast<std::string>() == "auto") return autotune;
  } else if (py::isinstance<py::int_>(threads) && !py::isinstance<py::bool_>(threads)) {
    const auto n = threads.cast<long long>();
    if (n >= 1 && n <= 4096) return static_cast<int>(n);
  }
  throw Error(ErrorCode::kInvalidArgument,
              "threads: expected a positive integer or \"auto\", got " + py::repr(threads).cast<std::string>());
}

std::uint64_t memory_budget_option(const py::object& budget) {
  if (py::isinstance<py::str>(budget)) {
    if (const auto bytes = parse_size(budget.cast<std::string>())) return *bytes;
  } else if (py::isinstance<py::int_>(budget) && !py::isinstance<py::bool_>(budget)) {
    if (budget.cast<py::int_>() >= py::int_(0)) return budget.cast<std::uint64_t>();
  }
  throw Error(ErrorCode::kInvalidArgument,
              "memory_budget: expected a non-negative integer of bytes or a string like \"4GiB\", got " +
                  py::repr(budget).cast<std::string>());
}

// The keyword arguments that override the spec, turned into the DocumentOverrides the C API
// fills from its options too (apply_overrides checks and applies them).
// shard="launcher": the rank and world size torchrun, mpirun or srun gave this process (launcher.hpp);
// shard=(rank, world): those.
void shard_option(DocumentOverrides& o, const py::object& shard) {
  if (py::isinstance<py::str>(shard) && shard.cast<std::string>() == "launcher") {
    const LauncherRank r = launcher_rank();
    o.shard_rank = r.rank;
    o.shard_world = r.world;
    return;
  }
  if (py::isinstance<py::tuple>(shard) || py::isinstance<py::list>(shard)) {
    const py::sequence pair = shard.cast<py::sequence>();
    if (pair.size() == 2 && py::isinstance<py::int_>(pair[0]) && py::isinstance<py::int_>(pair[1])) {
      const auto rank = pair[0].cast<long long>();
      const auto world = pair[1].cast<long long>();
      if (world >= 1 && world <= 1'000'000 && rank >= 0 && rank < world) {
        o.shard_rank = static_cast<int>(rank);
        o.shard_world = static_cast<int>(world);
        return;
      }
    }
  }
  throw Error(ErrorCode::kInvalidArgument,
              "shard: expected \"launcher\" or (rank, world) with 0 <= rank < world, got " +
                  py::repr(shard).cast<std::string>());
}

void apply_keywords(PipelineDocument& doc, const py::object& threads, const py::object& memory_budget,
                    const py::object& cuda_stream, const py::object& shard) {
  DocumentOverrides o;
  if (!shard.is_none()) shard_option(o, shard);
  if (!threads.is_none()) o.threads = threads_option(threads);
  if (!memory_budget.is_none()) o.memory_budget = memory_budget_option(memory_budget);
  if (!cuda_stream.is_none()) o.cuda_stream = reinterpret_cast<void*>(cuda_stream.cast<std::uintptr_t>());
  apply_overrides(doc, o);
}

PipelineRef build(PipelineDocument doc) {
  PipelineRef out;
  out.spec_json = to_json(doc);
  main_thread_ident.store(py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>(),
                          std::memory_order_relaxed);
  // build()'s fetch of remote shards and lists looks for Ctrl-C as a wait for a batch does: a
  // signal handler's exception ends it (Error(kCancelled)) and is raised here in its place.
  doc.build.stop = [] { return python_signal_raised(); };
  Loader loader = [&] {
    try {
      py::gil_scoped_release release;  // build() scans folders and plans memory: let Python run
      return Pipeline(doc.spec).build(doc.build);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kCancelled) raise_pending_signal();
      throw;
    }
  }();
  // What the consumer receives, device normalisation included: the Loader's to say.
  out.outputs = loader.outputs();
  const OutputDescription data = out.outputs[0];
  out.batch_shape = data.shape;
  out.dtype = data.dtype;
  out.core = std::make_shared<Core>(std::move(loader));
  out.core->loader.set_wait_check(&python_signal_raised, kSignalInterval);
  out.core->device = data.device;
  for (const spec::Stage& stage : doc.spec.stages) {
    if (const auto* t = std::get_if<spec::ToDevice>(&stage)) out.core->cuda_stream = t->options.stream;
  }
  return out;
}

// json.dumps' `default`: a torch tensor or numpy array in a spec (normalize's mean and std,
// typically) becomes its list of values; anything else is refused naming its type.
py::object json_value(const py::object& value) {
  if (py::hasattr(value, "tolist")) return value.attr("tolist")();
  throw py::type_error("spec: a value of type " + py::str(py::type::of(value).attr("__name__")).cast<std::string>() +
                       " is not a number, string, list or dict (tensors and numpy arrays are taken as lists)");
}

PipelineRef from_object(const py::object& spec, const py::object& base_dir, const py::object& threads,
                        const py::object& memory_budget, const py::object& cuda_stream, const py::object& shard) {
  PipelineDocument doc;
  if (py::isinstance<py::dict>(spec)) {
    const std::string text = py::module_::import("json").attr("dumps")(spec, py::arg("default") = py::cpp_function(&json_value)).cast<std::string>();
    const std::string base = base_dir.is_none() ? std::string() : py::module_::import("os").attr("fspath")(base_dir).cast<std::string>();
    py::gil_scoped_release release;
    doc = parse_pipeline_json(text, base);
  } else if (py::isinstance<py::str>(spec) || py::hasattr(spec, "__fspath__")) {
    if (!base_dir.is_none()) {
      throw Error(ErrorCode::kInvalidArgument,
                  "base_dir: applies to a spec given as a dict; a spec file's relative paths resolve against its own folder");
    }
    const std::string path = py::module_::import("os").attr("fsdecode")(spec).cast<std::string>();
    py::gil_scoped_release release;
    doc = load_pipeline_json(path);
  } else {
    throw py::type_error("spec: expected a dict or the path of a JSON spec file, got " +
                         py::str(py::type::of(spec).attr("__name__")).cast<std::string>());
  }
  apply_keywords(doc, threads, memory_budget, cuda_stream, shard);
  return build(std::move(doc));
}

py::tuple shape_tuple(const Shape& shape) {
  py::tuple out(static_cast<std::size_t>(shape.rank()));
  for (int i = 0; i < shape.rank(); ++i) out[static_cast<std::size_t>(i)] = shape[i];
  return out;
}

template <std::size_t... I>
std::vector<spec::Stage> every_alternative(std::index_sequence<I...>) {
  return {spec::Stage(std::in_place_index<I>)...};
}

// Every stage with its options and their defaults, as the canonical JSON writer spells them:
// [{"read": {...}}, {"cache": {...}}, ...]. The docstrings of the Python classes and of
// sluice.transforms are made from it, so they cannot drift from the JSON reference.
py::object stage_reference() {
  PipelineSpec spec;
  spec.stages = every_stage();
  const std::string text = to_json(spec, BuildOptions{});
  return py::module_::import("json").attr("loads")(text)["stages"];
}

// sluice.Pipeline.samples: every item's (path, label), as ImageFolder.samples.
py::list samples_of(const Loader& loader) {
  py::list out;
  const std::int64_t n = loader.dataset_size();
  for (std::int64_t i = 0; i < n; ++i) out.append(py::make_tuple(loader.item_path(i), loader.item_label(i)));
  return out;
}

// Pipeline.classes, class_to_idx and samples: the data set as torchvision's ImageFolder
// describes its own.
void add_dataset_properties(py::class_<PipelineRef>& pipeline) {
  pipeline
      .def_property_readonly("classes", [](const PipelineRef& p) { return p.core->loader.class_names(); },
                             "The class names, label i being classes[i] (as ImageFolder.classes): the sorted class "
                             "folders, or the names of shards labelled by name; [] where labels are numbers.")
      .def_property_readonly("class_to_idx",
                             [](const PipelineRef& p) {
                               py::dict out;
                               const std::vector<std::string>& names = p.core->loader.class_names();
                               for (std::size_t i = 0; i < names.size(); ++i) out[py::str(names[i])] = i;
                               return out;
                             },
                             "{class name: label}, as ImageFolder.class_to_idx.")
      .def_property_readonly("samples", [](const PipelineRef& p) { return samples_of(p.core->loader); },
                             "Every item of the data set as (path, label), in the source's order (as "
                             "ImageFolder.samples; the whole data set, before a shard takes its slice).");
}

// Pipeline.outputs: the Loader's output descriptions as a list of dicts.
py::list outputs_list(const PipelineRef& p) {
  py::list out;
  for (const OutputDescription& o : p.outputs) {
    py::dict d;
    d["name"] = o.name;
    d["shape"] = shape_tuple(o.shape);
    d["dtype"] = dtype_name(o.dtype);
    d["layout"] = o.layout;
    d["device"] = to_string(o.device);
    out.append(d);
  }
  return out;
}

}  // namespace

std::vector<spec::Stage> every_stage() {
  return every_alternative(std::make_index_sequence<std::variant_size_v<spec::Stage>>{});
}

// The iterator pipeline.epoch(e) and iter(pipeline) return.
void bind_epoch_iterator(py::module_& m) {
  py::class_<EpochIterator>(m, "EpochIterator",
                            "One pass over an epoch's batches, from pipeline.epoch(e) or iter(pipeline); it starts "
                            "at its first next() (which abandons any epoch in progress on the pipeline).")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__",
           [](EpochIterator& self) {
             std::shared_ptr<BatchHold> hold = locked(*self.core, [&] { return advance(self); });
             if (!hold) throw py::stop_iteration();
             return BatchRef{std::move(hold)};
           })
      .def("__len__", [](const EpochIterator& self) { return self.core->loader.batches_per_epoch(); },
           "Batches in a full epoch (after restore(), the resumed epoch yields only those not yet delivered).")
      .def_property_readonly("epoch", [](const EpochIterator& self) { return self.epoch; })
      .def("__repr__", [](const EpochIterator& self) { return "<sluice.EpochIterator epoch " + std::to_string(self.epoch) + ">"; });
}

// stats(), state() and restore(): what the pipeline measured and where the job is.
void add_stats_and_state(py::class_<PipelineRef>& pipeline) {
  pipeline
      .def("stats",
           [](const PipelineRef& p) {
             const std::string text = locked(*p.core, [&] { return stats_to_json(p.core->loader.stats()); });
             return py::module_::import("json").attr("loads")(text);
           },
           "Statistics as a dict: per-stage busy time, samples, batches, skipped files, consumer wait, memory "
           "per use, cache and tuning (the fields of sluice::Stats).")
      .def("state",
           [](const PipelineRef& p) {
             // After restore() and until an epoch starts, the Loader's state() is the restored one.
             const std::vector<std::uint8_t> s = locked(*p.core, [&] { return p.core->loader.state(); });
             return py::bytes(reinterpret_cast<const char*>(s.data()), s.size());
           },
           "Where the whole job is (epoch, global steps delivered, global batch; not the rank or world size) "
           "as bytes, for restore(); after restore() and before the next epoch starts, the state it restored.")
      .def(
          "restore",
          [](const PipelineRef& p, const py::object& state) {
            const std::string bytes = py::bytes(state).cast<std::string>();
            locked(*p.core, [&] {
              const std::span state(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
              p.core->loader.restore(state);
              ++p.core->generation;  // the runtime abandoned the epoch in progress
              p.core->next_epoch = p.core->loader.resume_epoch();
              return 0;
            });
          },
          py::arg("state"),
          "Resumes from state(), saved by any rank at any world size with the same global batch (batch x "
          "world): the saved epoch (next_epoch, and what iter() iterates) delivers what the job had not "
          "delivered of it (docs/distributed.md). Raises ValueError for a state of another pipeline, a global "
          "batch this world size does not split, or a damaged one.");
}

void bind_pipeline(py::module_& m) {
  m.def("stage_reference", &stage_reference,
        "Every stage of a spec with its options and their defaults, as the canonical JSON writes them (a list of "
        "one-key dicts; required sizes show as 0). docs/json-spec.md says what each option means.");
  bind_epoch_iterator(m);

  py::class_<PipelineRef> pipeline(m, "Pipeline",
                                   "A running sluice pipeline, built from a JSON spec given as a dict or as the path "
                                   "of a JSON file (docs/json-spec.md).");
  add_dataset_properties(pipeline);
  add_stats_and_state(pipeline);
  pipeline
      .def(py::init(&from_object), py::arg("spec"), py::kw_only(), py::arg("base_dir") = py::none(),
           py::arg("threads") = py::none(), py::arg("memory_budget") = py::none(),
           py::arg("cuda_stream") = py::none(), py::arg("shard") = py::none(),
           "spec: a dict (relative paths resolve against base_dir, else the working directory) or a path "
           "(relative paths resolve against the file's folder). threads (int or \"auto\") and memory_budget "
           "(bytes or \"4GiB\") override the spec's build options; cuda_stream (an int cudaStream_t, e.g. "
           "torch.cuda.current_stream().cuda_stream) is the stream a to_device stage hands batches to. shard "
           "(\"launcher\": the rank and world size torchrun, mpirun or srun gave this process; or (rank, world)) "
           "overrides the spec's shard.")
      .def_static(
          "from_json",
          [](const std::string& text, const py::object& base_dir, const py::object& threads,
             const py::object& memory_budget, const py::object& cuda_stream, const py::object& shard) {
            const std::string base = base_dir.is_none() ? std::string() : py::module_::import("os").attr("fspath")(base_dir).cast<std::string>();
            PipelineDocument doc = [&] {
              py::gil_scoped_release release;
              return parse_pipeline_json(text, base);
            }();
            apply_keywords(doc, threads, memory_budget, cuda_stream, shard);
            return build(std::move(doc));
          },
          py::arg("text"), py::kw_only(), py::arg("base_dir") = py::none(), py::arg("threads") = py::none(),
          py::arg("memory_budget") = py::none(), py::arg("cuda_stream") = py::none(), py::arg("shard") = py::none(),
          "A pipeline from a JSON spec given as text.")
      .def(
          "epoch",
          [](const PipelineRef& p, const py::object& given) {
            // Checked here, not by pybind's conversion, so 2**63 or "3" is a sluice.Error that
            // names the range rather than a TypeError about the binding's signature.
            const std::string text = py::str(given);
            const auto e = py::isinstance<py::int_>(given) && !py::isinstance<py::bool_>(given)
                               ? core::parse_int(text, 0, INT64_MAX)
                               : std::nullopt;
            if (!e) throw Error(ErrorCode::kInvalidArgument, core::integer_range_message("epoch", text, 0, INT64_MAX));
            return EpochIterator(p.core, *e);
          },
          py::arg("e"), "An iterator over epoch e's batches (order and augmentations follow from the seed and e).")
      .def("__iter__",
           [](const PipelineRef& p) {
             const std::int64_t e = locked(*p.core, [&] { return p.core->next_epoch; });
             return EpochIterator(p.core, e);
           },
           "Iterates the next epoch: 0 at first, then the one after the last epoch started, or the epoch "
           "restore() resumes; so `for epoch in range(n): for batch in pipeline:` walks epochs 0..n-1.")
      .def("__len__", [](const PipelineRef& p) { return p.core->loader.batches_per_epoch(); })
      .def_property_readonly("batches_per_epoch", [](const PipelineRef& p) { return p.core->loader.batches_per_epoch(); })
      .def_property_readonly("samples_per_epoch", [](const PipelineRef& p) { return p.core->loader.samples_per_epoch(); })
      .def_property_readonly("batch_shape", [](const PipelineRef& p) { return shape_tuple(p.batch_shape); },
                             "Shape of a full batch's data.")
      .def_property_readonly("dtype", [](const PipelineRef& p) { return dtype_name(p.dtype); })
      .def_property_readonly(
          "outputs", &outputs_list,
          "What a batch holds as it arrives, one dict per output (\"data\", then \"labels\"): name, shape "
          "(of a full batch), dtype, layout (\"NCHW\", \"NHWC\", \"N\") and device; the C++ Loader::outputs().")
      .def_property_readonly("device", [](const PipelineRef& p) { return to_string(p.core->device); })
      .def_property_readonly("next_epoch", [](const PipelineRef& p) { return locked(*p.core, [&] { return p.core->next_epoch; }); },
                             "The epoch iter(pipeline) iterates next.")
      .def_property_readonly("batches_held", [](const PipelineRef& p) { return p.core->batches_held.load(); },
                             "Batches handed out whose slot is still held (by the Batch, its tensor views, an "
                             "unconsumed capsule or a tensor made from them).")
      .def_property_readonly("batch_slots",
                             [](const PipelineRef& p) {
                               return locked(*p.core, [&] { return p.core->loader.stats().tuning.prefetch + 2; });
                             },
                             "Slots of the batch ring at its current prefetch depth (depth + 2; the ring never "
                             "has fewer). Holding that many batches stops production until one is released.")
      .def_property_readonly("spec", [](const PipelineRef& p) { return py::module_::import("json").attr("loads")(p.spec_json); },
                             "The canonical spec: every option written out.")
      .def("__repr__", [](const PipelineRef& p) {
        return "<sluice.Pipeline " + std::to_string(p.core->loader.samples_per_epoch()) + " samples, " +
               std::to_string(p.core->loader.batches_per_epoch()) + " batches of " + p.batch_shape.to_string() + " " +
               dtype_name(p.dtype) + " on " + to_string(p.core->device) + ">";
      });
}

}  // namespace sluice::python
