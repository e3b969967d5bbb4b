// The flags `sluice train` checks first and the sizes a memory limit decides (train_sizing.hpp).
#include "cli/train_sizing.hpp"

#include <algorithm>
#include <iostream>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"
#include "sluice/device/device.hpp"
#include "sluice/train/batch_search.hpp"
#include "sluice/train/planner.hpp"
#include "sluice/train/precision.hpp"
#include "sluice/train/train_config.hpp"

namespace sluice::cli {

using nlohmann::json;

namespace {

// After --batch auto: the evaluation's batches must fit the limit too, which the search (of
// training steps) did not try; the planner says whether they do.
void warn_if_evaluation_does_not_fit(const TrainOptions& o, const train::Context& ctx, const AllocatorOptions& memory) {
  if (o.no_eval) return;
  const train::PlanConfig with_eval{.train = train_config(o, o.batch, 0), .threads = ctx.threads(), .allocator = memory,
                                    .eval_batch = kEvalBatch, .epochs = 2};
  const train::TrainingMemoryPlan p = train::plan_peak(with_eval);
  if (!p.fits) {
    std::cout << "  warning: the evaluation (batch " << kEvalBatch << ") would not fit --memory " << o.memory
              << " (planner: " << p.failure << "); pass --no-eval or a larger limit\n";
  }
}

// What an auto search found: the size (0: nothing fits), the planner's guess, the dry runs, the
// real trials (of batches, or of micro-batches).
struct AutoSizeResult {
  std::int64_t found = 0;
  std::int64_t guess = 0;
  int plans = 0;
  std::vector<train::BatchTrial> trials;
};

// Sets o.batch or o.accumulate to what the search found, says what it found and tried (`under`:
// the limit it fitted), and returns the "batch_search" JSON object.
json report_auto_size(TrainOptions& o, AutoSize what, const AutoSizeResult& r, const std::string& under) {
  const bool batch = what == AutoSize::kBatch;
  const std::string flag = batch ? "--batch auto" : "--accumulate auto";
  if (r.found == 0) {
    throw Error(ErrorCode::kInvalidArgument, flag + ": not even " + (batch ? "a batch of 2 fits" : "micro-batches of 1 fit") +
                                                 " " + under);
  }
  std::string tried;
  json trial_json = json::array();
  for (const train::BatchTrial& t : r.trials) {
    tried += (tried.empty() ? "" : ", ") + std::to_string(t.batch) + (t.fits ? " fits" : " runs out");
    json j{{batch ? "batch" : "micro_batch", t.batch}, {"fits", t.fits}, {"peak_in_use_bytes", t.peak_in_use_bytes},
           {"seconds", t.seconds}};
    if (batch) j["reserved_bytes"] = t.reserved_bytes;
    trial_json.push_back(std::move(j));
  }
  std::string what_found = std::to_string(r.found);
  if (!batch) what_found += " micro-batches of " + std::to_string(o.batch / r.found) + " for the batch of " + std::to_string(o.batch);
  std::cout << "sluice train: " << flag << ": " << what_found << " under " << under << " (planner's guess " << r.guess
            << " from " << r.plans << " dry runs; " << r.trials.size() << " real trials"
            << (batch ? ": " : ", micro-batches: ") << tried << ")\n";
  if (batch) o.batch = static_cast<int>(r.found);
  else o.accumulate = static_cast<int>(r.found);
  return {{batch ? "batch" : "accumulate", r.found}, {"planner_guess", r.guess}, {"plans", r.plans}, {"trials", trial_json}};
}

}  // namespace

CheckedFlags check_flags(TrainOptions& o) {
  CheckedFlags f{.device = parse_device(o.device), .data = data_splits(o)};
  apply_model_defaults(o);
  f.memory = parse_memory(o.memory);
  f.limits = parse_job_limits(o, f.device);
  o.batch = parse_batch(o.batch_text);
  o.accumulate = parse_accumulate(o.accumulate_text);
  if (o.accumulate == 0 && o.batch == 0) {
    throw Error(ErrorCode::kInvalidArgument, "--accumulate auto keeps --batch as the effective batch: give a number, "
                                             "not --batch auto");
  }
  if (o.batch == 0) f.auto_size = AutoSize::kBatch;
  if (o.accumulate == 0) {
    f.auto_size = AutoSize::kAccumulate;
    o.accumulate = 1;  // found by the search, once the allocator exists
  }
  if (o.batch != 0 && o.batch % o.accumulate != 0) {
    throw Error(ErrorCode::kInvalidArgument, "--accumulate " + std::to_string(o.accumulate) +
                                                 " does not divide --batch " + std::to_string(o.batch) +
                                                 " into equal micro-batches");
  }
  try {
    f.checkpoint = train::CheckpointPolicy::parse(o.checkpoint);
  } catch (const Error& e) {
    throw Error(ErrorCode::kInvalidArgument, "--checkpoint: " + e.cause());
  }
  (void)train::parse_precision(o.precision);  // throws for an unknown name
  return f;
}

json fit_auto_size(TrainOptions& o, AutoSize what, train::Context& ctx, const AllocatorOptions& memory) {
  if (what == AutoSize::kNone) return nullptr;
  const bool batch = what == AutoSize::kBatch;
  if (memory.limit == 0) {
    throw Error(ErrorCode::kInvalidArgument, std::string(batch ? "--batch auto" : "--accumulate auto") +
                                                 " needs a memory limit to fit: --memory-limit SIZE (the whole job), or "
                                                 "--memory grow:LIMIT or prealloc:SIZE (the training allocator alone)");
  }
  AutoSizeResult r;
  if (batch) {
    // Only batches that --accumulate divides into equal micro-batches: its multiples.
    const train::BatchSearchOptions range{.min_batch = std::max(2, o.accumulate), .max_batch = 65536,
                                          .granularity = o.accumulate};
    train::BatchSearchResult b = train::find_max_batch(ctx, train_config(o, range.min_batch, 0), range);
    r = {b.batch, b.planner_guess, b.plans, std::move(b.trials)};
  } else {
    train::AccumulationSearchResult a = train::find_accumulation(ctx, train_config(o, o.batch, 0));
    r = {a.accumulate, a.planner_guess, a.plans, std::move(a.trials)};
  }
  json result = report_auto_size(o, what, r, "--memory " + o.memory + " (" + describe_memory(memory) + ")");
  if (batch) warn_if_evaluation_does_not_fit(o, ctx, memory);
  return result;
}

std::unique_ptr<TrainJob> plan_train_job(TrainOptions& o, const CheckedFlags& f, int threads, json& batch_search) {
  require_device(f.device);
  JobPipelines pipelines(o, f.data, f.device);
  const std::string under = "--memory-limit " + sluice::format_bytes(f.limits.memory);
  if (f.auto_size == AutoSize::kBatch) {
    train::JobConfig c = job_config(o, f.limits, f.device, threads, pipelines);
    // No batch larger than the training split: its epoch would have no full batch.
    const train::BatchSearchOptions range{.min_batch = std::max(2, o.accumulate),
                                          .max_batch = std::clamp<std::int64_t>(pipelines.training_items(), 2, 65536),
                                          .granularity = o.accumulate};
    c.train.batch = range.min_batch;
    train::BatchSearchResult b = train::find_job_batch(c, range);
    batch_search = report_auto_size(o, f.auto_size, {b.batch, b.planner_guess, b.plans, std::move(b.trials)}, under);
  } else if (f.auto_size == AutoSize::kAccumulate) {
    train::AccumulationSearchResult a = train::find_job_accumulation(job_config(o, f.limits, f.device, threads, pipelines));
    batch_search = report_auto_size(o, f.auto_size, {a.accumulate, a.planner_guess, a.plans, std::move(a.trials)}, under);
  }
  train::JobPlan plan = train::plan_job(job_config(o, f.limits, f.device, threads, pipelines));
  if (!plan.fits) throw Error(ErrorCode::kOutOfBudget, "--memory-limit " + o.memory_limit + ": " + plan.failure);
  return std::make_unique<TrainJob>(std::move(plan));
}

}  // namespace sluice::cli
