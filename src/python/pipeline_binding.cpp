// sluice.Pipeline and sluice.EpochIterator: a pipeline built from a JSON spec (a dict or a file,
// docs/json-spec.md) and iterated one epoch at a time.
//
//   pipeline = sluice.Pipeline({"source": {...}, "stages": [...]}, threads=2)
//   for batch in pipeline.epoch(e): ...        # epoch e
//   for batch in pipeline: ...                 # the epoch after the last one started (0 first)
//
// Waiting for a batch releases the GIL, so other Python threads (a training step, a thread that
// drops tensors and so frees slots) run meanwhile. Calls on one pipeline are serialised by
// Core::mutex: the Loader's API is its consumer's, one thread at a time.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <pybind11/stl.h>

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

// Runs `body` with the GIL released and the pipeline's lock held.
template <class Body>
auto locked(Core& core, Body&& body) {
  py::gil_scoped_release release;
  std::lock_guard lock(core.mutex);
  return body();
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
  Loader loader = [&] {
    py::gil_scoped_release release;  // build() scans folders and plans memory: let Python run
    return Pipeline(doc.spec).build(doc.build);
  }();
  // What the consumer receives, device normalisation included: the Loader's to say.
  out.outputs = loader.outputs();
  const OutputDescription data = out.outputs[0];
  out.batch_shape = data.shape;
  out.dtype = data.dtype;
  out.core = std::make_shared<Core>(std::move(loader));
  out.core->device = data.device;
  for (const spec::Stage& stage : doc.spec.stages) {
    if (const auto* t = std::get_if<spec::ToDevice>(&stage)) out.core->cuda_stream = t->options.stream;
  }
  return out;
}

PipelineRef from_object(const py::object& spec, const py::object& base_dir, const py::object& threads,
                        const py::object& memory_budget, const py::object& cuda_stream, const py::object& shard) {
  PipelineDocument doc;
  if (py::isinstance<py::dict>(spec)) {
    const std::string text = py::module_::import("json").attr("dumps")(spec).cast<std::string>();
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

void bind_pipeline(py::module_& m) {
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

  py::class_<PipelineRef>(m, "Pipeline",
                          "A running sluice pipeline, built from a JSON spec given as a dict or as the path of a "
                          "JSON file (docs/json-spec.md).")
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
          [](const PipelineRef& p, std::int64_t e) {
            if (e < 0) throw Error(ErrorCode::kInvalidArgument, "epoch: expected a non-negative integer, got " + std::to_string(e));
            return EpochIterator(p.core, e);
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
           "Where the consumer is (epoch and next batch) as bytes, for restore(); after restore() and "
           "before the next epoch starts, the state it restored.")
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
          "Resumes from state(): the saved epoch (next_epoch, and what iter() iterates) starts at the saved "
          "batch. Raises ValueError for a state of another pipeline or a damaged one.")
      .def("__repr__", [](const PipelineRef& p) {
        return "<sluice.Pipeline " + std::to_string(p.core->loader.samples_per_epoch()) + " samples, " +
               std::to_string(p.core->loader.batches_per_epoch()) + " batches of " + p.batch_shape.to_string() + " " +
               dtype_name(p.dtype) + " on " + to_string(p.core->device) + ">";
      });
}

}  // namespace sluice::python
