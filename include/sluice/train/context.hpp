// Context: where the training core's ops run. It names the device (the allocator's), owns the
// backend that implements the ops on it (the CPU reference now, CUDA later: the same signatures,
// chosen by the device), the worker threads of the CPU backend, and one workspace: the scratch
// memory of the op running now (im2col columns, per-thread partial gradients), kept and grown
// rather than allocated per call, accounted to TensorCategory::kWorkspace.
//
// One thread drives a Context at a time (the training loop); the ops parallelise inside.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>

#include "sluice/core/device_id.hpp"
#include "sluice/core/dtype.hpp"
#include "sluice/core/shape.hpp"
#include "sluice/train/category.hpp"
#include "sluice/train/tensor.hpp"

namespace sluice {
class Allocator;
}  // namespace sluice

namespace sluice::train {

class Backend;

struct ContextOptions {
  // CPU backend: threads an op may use, the caller's included (0: the hardware's count). The
  // CUDA backend ignores it.
  int threads = 0;
  // Planning (sluice/train/planner.hpp): ops compute nothing and only request the workspace the
  // device's real backend would, so a step allocates exactly what a real one does. Pair it with
  // an allocator over make_address_space_backing().
  bool meta = false;
  // With meta: the device whose backend the ops stand in for; the allocator's when unset. A CUDA
  // device's backend is modelled, not created (src/train/cuda/cuda_workspace.hpp), so planning
  // for cuda(i) needs no GPU: the context then also takes cuBLAS's workspace from the allocator
  // at construction, as a real CUDA context does.
  std::optional<DeviceId> meta_device;
  // ... and, for a CUDA device, the major version of its compute capability (cuBLAS's workspace
  // is 32 MiB from 9, Hopper, on and 4 MiB before). 0: the device's own when it is usable here,
  // else 9 (the H200's).
  int meta_compute_major = 0;
};

class Context {
 public:
  // Ops run on `allocator`'s device; tensors the context creates come from it. Throws
  // sluice::Error(kInvalidArgument) when no backend for that device is built in.
  explicit Context(Allocator& allocator, ContextOptions options = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  DeviceId device() const { return device_; }
  Allocator& allocator() const { return *allocator_; }
  int threads() const { return threads_; }
  const ContextOptions& options() const { return options_; }

  // A new tensor on this device, uninitialised / zero-filled.
  Tensor empty(const Shape& shape, DType dtype, TensorCategory category) const;
  Tensor zeros(const Shape& shape, DType dtype, TensorCategory category);

  // Scratch memory of at least `bytes` for the op running now; valid until the next call. The
  // block is kept between ops and grows (to the largest request) when too small, so reserving
  // the plan's maximum up front (reserve_workspace) keeps it out of the way of the tensors.
  void* workspace(std::size_t bytes);
  void reserve_workspace(std::size_t bytes);
  // The workspace block's size; 0 before the first request and after release_workspace().
  std::size_t workspace_bytes() const { return workspace_.defined() ? workspace_.bytes() : 0; }
  void release_workspace() { workspace_.reset(); }

  // Waits until the device has finished the work queued on it (no-op on the CPU).
  void synchronize();
  // Orders the ops queued from now on after `native_event` (a recorded cudaEvent_t of this
  // context's device, as sluice::Batch::ready_event()), on the device: cudaStreamWaitEvent on the
  // context's stream, the host does not wait. nullptr, and any event on the CPU (whose ops run
  // synchronously on host batches), is a no-op.
  void wait_event(void* native_event);
  // The stream the ops are queued on, as a cudaStream_t on a CUDA device; nullptr on the CPU.
  // For work that must run in order with the ops without a host wait (NCCL's all-reduce of the
  // gradients between backward and the optimizer step, examples/nccl_all_reduce.cpp).
  void* native_stream();

  // The ops' implementation for this device (src/train/tensor/backend.hpp). For backends and ops.
  Backend& backend() { return *backend_; }

 private:
  Allocator* allocator_;
  DeviceId device_;
  int threads_;
  ContextOptions options_;
  Tensor workspace_;  // (bytes,) u8, category workspace
  std::unique_ptr<Backend> backend_;
};

}  // namespace sluice::train
