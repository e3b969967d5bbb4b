// The memory planner: the allocator's peak in use for a training configuration, predicted before
// running it. It does not model the training core; it runs it: the real Trainer::step, model and
// optimizer (built by make_training, as `sluice train` builds them) on a meta Context, whose ops
// compute nothing and request the same workspaces as the real backend (ContextOptions::meta),
// over an allocator of the same code whose backing hands out address space without memory
// (make_address_space_backing). Every tensor the real run would allocate is allocated, in the
// same order and size, so the peak in use is the real one, whatever technique produced it; a
// batch of 4096 images plans in milliseconds and commits no memory for activations.
//
// The definition is `sluice train`'s peak_device_bytes: the allocator's peak in use over the
// training steps and the evaluation that follows each epoch (its batch keeps the workspace at
// its size for the next epoch's steps), with the batches read in place where the loader leaves
// them (host memory on the CPU; the transfer ring's device memory on CUDA, where `sluice train`
// ships them with to_device): nothing is staged through the training allocator.
//
// PlanConfig::device picks the backend planned for. cuda(i) needs no GPU: the CUDA backend's
// workspaces are arithmetic over the shapes (src/train/cuda/cuda_workspace.hpp), plus cuBLAS's
// workspace, which depends on the device's compute capability (the device's own when it is usable
// here, else compute_major, else 9, the H200's).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "sluice/train/allocator.hpp"
#include "sluice/train/category.hpp"
#include "sluice/train/train_config.hpp"

namespace sluice::train {

struct PlanConfig {
  TrainConfig train;
  // The device the run trains on: host() plans the CPU backend, cuda(i) the CUDA backend's
  // workspaces and cuBLAS's (no GPU needed).
  DeviceId device = host();
  // CUDA: the compute capability's major version to plan for; 0: the device's when usable here,
  // else 9.
  int compute_major = 0;
  // The CPU backend's workspaces depend on its thread count (per-thread partial gradients):
  // plan with the run's (0: the hardware's).
  int threads = 0;
  // With a limit (grow:LIMIT, prealloc:SIZE) the plan also says whether the run would run out,
  // fragmentation included: the allocator is the same code with the same options.
  AllocatorOptions allocator;
  // Steps simulated per epoch: the second has the first's optimizer state throughout.
  int steps = 2;
  // The evaluation batch after each epoch (0: none, as `sluice train --no-eval`).
  std::int64_t eval_batch = 256;
  // Epochs simulated: a second one starts its steps with the evaluation's workspace. More than
  // two change nothing.
  int epochs = 1;
};

struct TrainingMemoryPlan {
  std::uint64_t peak_in_use_bytes = 0;  // = train's peak_device_bytes
  std::array<std::uint64_t, kTensorCategoryCount> peak_by_category{};
  std::uint64_t step_peak_in_use_bytes = 0;  // the training steps alone, evaluation left out
  std::uint64_t reserved_bytes = 0;          // the regions the allocator took (grow mode)
  // With offload: the regions of the optimizer's host allocator (host memory, outside the
  // training allocator; a training job's host side counts them).
  std::uint64_t offload_reserved_bytes = 0;
  bool fits = true;     // false: the allocator ran out under PlanConfig::allocator's limit
  std::string failure;  // then: the out-of-memory report's request and reason, on one line
  std::int64_t parameters = 0;
  std::string backend;  // what was planned for: "meta (plans for cuda:0 (CUDA backend, ...))"
};

// Throws sluice::Error(kInvalidArgument) for a configuration make_training rejects.
TrainingMemoryPlan plan_peak(const PlanConfig& config);

}  // namespace sluice::train
