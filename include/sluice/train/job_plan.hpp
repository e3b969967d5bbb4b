// JobPlan: one memory limit for a whole training job: the training allocator, the
// input pipelines (their buffers, batch rings and caches) and the optimizer state offloaded to the
// host, planned together before step 1 and then held in one MemoryBudget.
//
// The split, in order:
//  1. Training gets the tightest share its steps and evaluation fit: the smallest single
//     allocator region in which the planner's dry run (sluice/train/planner.hpp, the real step on
//     the meta backend) fits. One region, not the allocator's doubling ones (which would leave up
//     to half of the share free), and no margin: the dry run allocates what the run allocates, in
//     the same order. The run's allocator starts with that region, held in the budget from the
//     start (the floor of make_budgeted_backing), and grows beyond it only by taking memory back
//     from the caches (a larger evaluation, a step the plan did not see). A hand split
//     (`--memory prealloc:SIZE` or `grow:SIZE` under the job's limit) gives it SIZE instead.
//  2. Each pipeline gets the minimum its build() would demand (its memory plan), the optimizer's
//     offloaded state what the planner saw its host allocator take.
//  3. What is left goes where it buys throughput: first the slots each pipeline starts with beyond
//     its minimum (its default prefetch depth: a batch ready while the step runs), then a
//     decoded-image memory cache for each pipeline the run reads more than once, up to its whole
//     data set. A decoded entry saves the read and the decode, which is most of a sample's work
//     (docs/memory.md, "One limit for the whole job", has the measured split). What the caches do
//     not take stays unclaimed: the autotuner may deepen prefetch into it at run time.
// A limit below 1 + 2 fails here, before any data is read, with both numbers and what to change.
//
// On a CUDA device the device and the host are separate limits: the device's holds the training
// allocator (and a device batch pool, when the pipelines deliver to the device), the host's the
// pipelines, their page-locked rings and the offloaded state. On the CPU one limit holds all.
//
// The train module may not include the pipeline module, so the pipelines' needs arrive as
// numbers (PipelineNeeds), computed on top of both (sluice/loader_batches.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sluice/core/device_id.hpp"
#include "sluice/memory/budget.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/batch_search.hpp"
#include "sluice/train/planner.hpp"
#include "sluice/train/train_config.hpp"

namespace sluice::train {

// One input pipeline as the job's plan needs it.
struct PipelineNeeds {
  std::string name;  // "training pipeline", "evaluation pipeline"
  // What build() demands at least, by use (MemoryUse order: read and decode buffers per worker,
  // the epoch order's indices, the batch ring's minimum slots, the page-locked ring on a device).
  std::array<std::uint64_t, kPipelineUseCount> minimum{};
  std::uint64_t slot_bytes = 0;  // one batch slot
  int start_slots = 0;           // slots beyond the minimum it starts with when the budget has them
  // Its whole data set as decoded-cache entries (0: not cacheable); a cache of this size hits every
  // sample from the second pass on.
  std::uint64_t cache_set_bytes = 0;
  std::int64_t passes = 1;  // how often the run reads the data set (its epochs)

  std::uint64_t minimum_bytes() const;
  // "ring 3 x 392 KiB, 1 worker x 12.0 KiB, indices 480 KiB"
  std::string explain_minimum() const;
};

struct JobConfig {
  TrainConfig train;
  int threads = 0;                // the training context's (the CPU backend's workspaces depend on it)
  std::int64_t eval_batch = 256;  // 0: no evaluation
  int epochs = 2;                 // simulated by the planner (2: the evaluation's workspace carries over)
  DeviceId device = host();
  // The job's limit: the whole process on the CPU, the device's memory on a CUDA device (> 0).
  std::uint64_t memory_limit = 0;
  // A CUDA device's host side (pipelines, page-locked rings, offloaded state); 0: unbounded but
  // accounted. Must be 0 on the CPU, where memory_limit holds everything.
  std::uint64_t host_memory_limit = 0;
  // A hand split: the training allocator as the user fixed it (prealloc:SIZE or grow:SIZE), its
  // size the training share. Unset: planned (step 1 above).
  std::optional<AllocatorOptions> allocator;
  // The pipelines at a training batch (the evaluation's does not change with it).
  std::function<std::vector<PipelineNeeds>(std::int64_t batch)> pipelines;
};

// A pipeline's share of the limit.
struct PipelineShare {
  PipelineNeeds needs;
  std::uint64_t prefetch_bytes = 0;  // start slots beyond the minimum
  std::uint64_t cache_bytes = 0;     // its memory cache's share (MemoryCache::max_bytes); 0: none

  std::uint64_t bytes() const { return needs.minimum_bytes() + prefetch_bytes + cache_bytes; }
};

struct JobPlan {
  bool fits = true;
  std::string failure;  // when not: the numbers and what to change, for a person

  DeviceId device = host();
  std::uint64_t memory_limit = 0;
  std::uint64_t host_memory_limit = 0;  // on a device; 0: unbounded
  bool hand_split = false;              // the training share came from JobConfig::allocator

  // Training: the allocator's options for the run and its share (held from the start).
  AllocatorOptions allocator;
  std::uint64_t training_bytes = 0;
  TrainingMemoryPlan training;                  // the dry run at that share
  std::int64_t dry_runs = 0;
  std::uint64_t offload_bytes = 0;      // the optimizer's host state (host side)
  std::vector<PipelineShare> pipelines;

  // What no part claims, in the budget the pipelines share (the host's on a device), and why.
  std::uint64_t unused_bytes = 0;
  std::string unused_reason;
  std::uint64_t device_unused_bytes = 0;  // on a device: its limit minus the training share

  bool separate_host() const { return device.is_cuda(); }
  std::uint64_t host_bytes() const;     // everything the host-side budget holds by the plan
  // The whole plan, one part a line, for a person (`sluice plan`, `sluice train`).
  std::string explain() const;
};

// Plans the split (see the top of this file). Throws sluice::Error(kInvalidArgument) for a
// configuration make_training rejects, a zero limit, or a host limit on the CPU; a limit the job
// does not fit is a plan with fits = false.
JobPlan plan_job(const JobConfig& config);

// The smallest single region (to the allocator's 256 B) in which the dry run of `base` fits; 0
// when none does up to `ceiling`. `dry_runs` counts them.
std::uint64_t tightest_region(const PlanConfig& base, std::uint64_t ceiling, std::int64_t* dry_runs = nullptr);

// --batch auto / --accumulate auto inside the job's limit: the training step at a candidate must
// fit what the limit leaves after the pipelines' minimums at that batch and the offloaded state.
// The planner's dry runs give the guess; real trials (real steps and, with an evaluation, one
// real evaluation batch, on zeros) run in one region of that room, on a new allocator each.
// config.train's batch (or accumulation) is the search's; the result is as find_max_batch's and
// find_accumulation's. With a hand split the room is the user's allocator.
BatchSearchResult find_job_batch(const JobConfig& config, const BatchSearchOptions& options);
AccumulationSearchResult find_job_accumulation(const JobConfig& config, int steps = 2);
// The planner's answers alone, from dry runs (sluice plan): the largest batch (0: none) and the
// fewest micro-batches (0: none) whose whole job fits. `plans` counts the dry runs.
std::int64_t planned_job_batch(const JobConfig& config, const BatchSearchOptions& options, int* plans = nullptr);
int planned_job_accumulation(const JobConfig& config, int* plans = nullptr);

// The job's budgets at run time: one for the device's limit and one for the host's on a CUDA
// device, the same one on the CPU.
struct JobBudgets {
  std::shared_ptr<MemoryBudget> device;  // the training allocator (and device batch pools)
  std::shared_ptr<MemoryBudget> host;    // the pipelines' parts, page-locked rings, offloaded state

  explicit JobBudgets(const JobPlan& plan);
  // A part of the host budget for one pipeline (BuildOptions::budget); its limit is none of its own.
  std::shared_ptr<MemoryBudget> pipeline_part() const;
  // The training allocator of the plan: its share held from now on in the device budget, growth
  // beyond it taken from the caches. Throws sluice::Error(kOutOfBudget) when the share does not
  // fit the budget now.
  std::unique_ptr<Allocator> make_training_allocator(const JobPlan& plan) const;
};

}  // namespace sluice::train
