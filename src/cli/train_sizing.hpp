// `sluice train`'s flags checked before anything loads, and the sizes a memory limit decides:
// --batch auto and --accumulate auto (searched on the training allocator, or inside the whole
// job under --memory-limit) and the job's plan and budgets. train.cpp runs what these decide.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "cli/train_job.hpp"
#include "cli/train_options.hpp"
#include "sluice/memory/budget.hpp"
#include "sluice/pipeline/options.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/context.hpp"
#include "sluice/train/gradient_checkpointing.hpp"
#include "sluice/train/job_memory.hpp"
#include "sluice/train/job_plan.hpp"

namespace sluice::cli {

// Which size the memory limit is to choose: --batch auto or --accumulate auto (not both).
enum class AutoSize { kNone, kBatch, kAccumulate };

// The flags checked and read before anything loads: a bad value fails at once, not after the
// first epoch's data. Fills in the model's defaults (model, epochs) and the numbers of --batch
// and --accumulate (a size left to the search stays 0 for --batch, 1 for --accumulate).
struct CheckedFlags {
  DeviceId device;
  Splits data;
  AllocatorOptions memory;
  JobLimits limits;
  AutoSize auto_size = AutoSize::kNone;
  train::CheckpointPolicy checkpoint;
};

CheckedFlags check_flags(TrainOptions& o);

// --batch auto or --accumulate auto: real steps on the training allocator find the largest
// batch, or the fewest micro-batches for the batch given, that fit --memory's limit. Sets
// o.batch or o.accumulate, says what it found and tried, and returns the "batch_search" JSON
// object (null for AutoSize::kNone).
nlohmann::json fit_auto_size(TrainOptions& o, AutoSize what, train::Context& ctx, const AllocatorOptions& memory);

// The job's memory under --memory-limit: its plan, the budgets that hold it, and each pipeline's
// part of the host budget.
struct TrainJob {
  explicit TrainJob(train::JobPlan p)
      : plan(std::move(p)), budgets(plan), train_part(budgets.pipeline_part()), eval_part(budgets.pipeline_part()) {}
  train::JobPlan plan;
  train::JobBudgets budgets;
  std::shared_ptr<MemoryBudget> train_part;
  std::shared_ptr<MemoryBudget> eval_part;

  // A pipeline's build options: its part of the job, capped at its share and what no part claims.
  BuildOptions build_options(const TrainOptions& o, std::size_t pipeline) const {
    const train::PipelineShare& share = plan.pipelines[pipeline];
    return {.memory_budget = share.bytes() + plan.unused_bytes, .threads = o.loader_threads, .seed = o.seed,
            .job_budget = pipeline == 0 ? train_part : eval_part};
  }
  std::uint64_t cache_bytes(std::size_t pipeline) const {
    return pipeline < plan.pipelines.size() ? plan.pipelines[pipeline].cache_bytes : 0;
  }
};

// --memory-limit: the auto search inside the job when asked (setting o.batch or o.accumulate and
// `batch_search`), then the job's plan, printed. Fails before any data is read (the pipelines'
// memory plans probe a few files' headers) when the limit is below the minimums, with the plan's
// numbers. On a CUDA device the planner models the CUDA backend's workspaces (no GPU needed to plan).
std::unique_ptr<TrainJob> plan_train_job(TrainOptions& o, const CheckedFlags& f, int threads,
                                         nlohmann::json& batch_search);

}  // namespace sluice::cli
