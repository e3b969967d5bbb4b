// Batch-size search: the largest batch whose training steps fit the allocator's limit. The
// planner (sluice/train/planner.hpp) gives the first guess, a dry run under the same allocator
// options; real trials then confirm it: one trial builds the model and optimizer of the
// configuration on the context's allocator and runs real training steps on a batch of zeros,
// moving up from a fit (increments doubling: +1, +2, +4... steps of `granularity`) or down from a
// failure the same way, then bisecting between the last fit and the first failure. A trial that
// runs out (sluice::OutOfMemory) is caught; the model, optimizer, saved activations and
// workspace are dropped and the allocator's free regions returned (and its growth restarted, so
// each trial sees the regions a new allocator would, as the planner does), and the trial checks that the
// allocator's in-use bytes are back where they were before it (throwing kInternal if not), so a
// search leaves no memory behind.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "sluice/train/context.hpp"
#include "sluice/train/planner.hpp"
#include "sluice/train/train_config.hpp"

namespace sluice::train {

struct BatchSearchOptions {
  std::int64_t min_batch = 2;
  std::int64_t max_batch = 65536;
  std::int64_t granularity = 1;  // candidates are multiples of it: "one step"
  int max_trials = 12;           // real trials at most
  bool use_planner = true;       // false: start at min_batch and double
  int steps = 2;                 // real steps a trial (the second has the optimizer state)
};

struct BatchTrial {
  std::int64_t batch = 0;
  bool fits = false;
  std::uint64_t peak_in_use_bytes = 0;  // of the trial (up to the failure when it ran out)
  std::uint64_t reserved_bytes = 0;
  double seconds = 0;
};

struct BatchSearchResult {
  std::int64_t batch = 0;          // the largest that fitted; 0: not even min_batch
  std::int64_t planner_guess = 0;  // 0 without the planner
  int plans = 0;                   // dry runs the guess took
  std::vector<BatchTrial> trials;  // in order
};

// The search over any trial: `fits(batch)` says whether `batch` fits; `guess` (0: none) is
// where it starts. Exposed for tests; find_max_batch runs it with real training steps.
BatchSearchResult search_max_batch(const std::function<BatchTrial(std::int64_t)>& trial, std::int64_t guess,
                                   const BatchSearchOptions& options);

// The planner's configuration for runs on ctx: its threads, allocator options and device (the
// modelled one for a meta context); the rest defaults.
PlanConfig plan_for(const Context& ctx);

// One real trial of `config` at `batch` on ctx (see the top of this file). Throws
// sluice::Error(kInternal) when the allocator's in-use bytes are not back afterwards.
BatchTrial try_batch(Context& ctx, const TrainConfig& config, std::int64_t batch, int steps = 2);

// The planner's guess: the largest multiple of granularity in [min_batch, max_batch] whose dry
// run under `base` (its allocator options, threads, steps; its batch ignored) fits; 0 when none
// does. `plans` counts the dry runs (doubling, then bisection: about 2 log2(max) at most).
std::int64_t planned_max_batch(const PlanConfig& base, const BatchSearchOptions& options, int* plans = nullptr);
// The same over any dry-run test (a training job's: sluice/train/job_plan.hpp).
std::int64_t planned_max_batch(const std::function<bool(std::int64_t)>& fits, const BatchSearchOptions& options,
                               int* plans = nullptr);

// Keeping the effective batch instead: the smallest accumulation K (a divisor of config.batch,
// micro-batches of batch / K) whose steps fit ctx's allocator. The planner picks the first K
// whose dry run fits; real trials confirm it (and that the divisor below it does not fit), moving
// to larger K while a trial runs out. accumulate is 0 when not even micro-batches of 1 fit.
struct AccumulationSearchResult {
  std::int64_t batch = 0;  // config.batch: the effective batch, kept
  int accumulate = 0;
  int planner_guess = 0;
  int plans = 0;
  std::vector<BatchTrial> trials;  // BatchTrial::batch is the micro-batch
};
AccumulationSearchResult find_accumulation(Context& ctx, const TrainConfig& config, int steps = 2);
// The same over any dry-run test and trial of an accumulation K (find_accumulation's, or a training
// job's: sluice/train/job_plan.hpp).
AccumulationSearchResult search_accumulation(std::int64_t batch, const std::function<bool(int)>& plan_fits,
                                             const std::function<BatchTrial(int)>& trial);

// The largest batch of `config` (its batch field ignored) whose steps fit ctx's allocator.
// Throws sluice::Error(kInvalidArgument) when the allocator has no limit: everything fits.
BatchSearchResult find_max_batch(Context& ctx, const TrainConfig& config, const BatchSearchOptions& options = {});

}  // namespace sluice::train
