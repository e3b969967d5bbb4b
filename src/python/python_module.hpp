// What the Python module's objects are behind pybind11, and how their lifetimes chain: a
// Pipeline, its epoch iterators and every batch share one Core (the built Loader); a Batch, the
// Tensor views taken from it and each DLPack tensor a consumer made from those share one
// BatchHold, whose destruction returns the ring slot. Reference counting decides when, so a
// tensor torch still holds is never overwritten, whichever object Python frees last.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>

#include "c/dlpack_export.hpp"
#include "sluice/core/device_id.hpp"
#include "sluice/core/dtype.hpp"
#include "sluice/core/shape.hpp"
#include "sluice/pipeline/batch.hpp"
#include "sluice/pipeline/spec.hpp"
#include "sluice/runtime/loader.hpp"

namespace sluice::python {

namespace py = pybind11;

// The built pipeline. Loader's API is the consumer's (one thread at a time), while Python may
// call it from several threads and releases the GIL while a call waits: `mutex` serialises every
// call on `loader`. Slots return through BatchHold's destructor without it (the runtime takes
// recycled slots from any thread).
struct Core {
  explicit Core(Loader built) : loader(std::move(built)) {}

  Loader loader;
  std::timed_mutex mutex;
  // Bumped whenever an epoch starts or restore() runs: the runtime then abandons the epoch in
  // progress, so an iterator of an older generation must not touch the Loader's iterator again.
  std::uint64_t generation = 0;
  // The epoch iter(pipeline) iterates: 0, the one after the last epoch started, or the epoch a
  // restore() resumes.
  std::int64_t next_epoch = 0;
  // Where batches are, and the consumer's CUDA stream the loader hands them over on (nullptr:
  // the legacy default stream). Fixed at construction.
  DeviceId device = host();
  void* cuda_stream = nullptr;
  // Batches handed to Python whose slot is still out of the ring (BatchHolds alive). Changed
  // without the GIL or `mutex`, from any thread (DLPack deleters).
  std::atomic<int> batches_held{0};
};

// One batch handed to Python.
struct BatchHold {
  BatchHold(std::shared_ptr<Core> c, Batch b) : core(std::move(c)), batch(std::move(b)) {
    core->batches_held.fetch_add(1, std::memory_order_relaxed);
  }
  ~BatchHold() {
    batch.release();  // the slot first: a count that says a slot is free means it is
    core->batches_held.fetch_sub(1, std::memory_order_relaxed);
  }
  BatchHold(const BatchHold&) = delete;
  BatchHold& operator=(const BatchHold&) = delete;
  std::shared_ptr<Core> core;  // declared before `batch`: the whole pipeline outlives the batch
  Batch batch;
};

// sluice.Batch: the Python object of a batch. release() drops its hold early.
struct BatchRef {
  std::shared_ptr<BatchHold> hold;
};

// sluice.Tensor: batch.data or batch.labels, a view that exports DLPack.
struct TensorRef {
  std::shared_ptr<BatchHold> hold;
  bool labels = false;
};

// What a TensorRef points at: the data pointer, dtype, shape and device of the batch's data or
// labels (after to_device(), the device copy), as the C API describes them too.
dlpack::TensorDesc describe(const TensorRef& tensor);

// The module's parts, called from PYBIND11_MODULE in module.cpp.
void register_errors(py::module_& m);
void bind_pipeline(py::module_& m);
void bind_batch(py::module_& m);

// One default-constructed stage of every kind, in spec::Stage's order: what the stage reference
// (sluice.stage_reference(), the docstrings made from it) and the message rewriting list.
std::vector<spec::Stage> every_stage();

// "uint8", "float32", ...: the names torch and numpy use.
const char* dtype_name(DType dtype);

}  // namespace sluice::python
