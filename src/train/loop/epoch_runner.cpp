// The epoch runner: the loop over epochs and steps, its timing and reports, and the hooks that
// ship with it (pruning, profiling).
#include "sluice/train/epoch_runner.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "sluice/core/error.hpp"
#include "sluice/train/profiler.hpp"
#include "sluice/train/pruning.hpp"

namespace sluice::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double per_second(double count, double seconds) { return seconds > 0 ? count / seconds : 0.0; }

}  // namespace

BatchResult TrainerStep::train(const TrainBatch& batch) {
  return trainer_.step(batch.data, batch.labels, batch.where, batch.ready_event);
}

BatchResult TrainerStep::evaluate(const TrainBatch& batch) {
  return trainer_.evaluate(batch.data, batch.labels, batch.where, batch.ready_event);
}

double EpochReport::train_images_per_sec() const { return per_second(static_cast<double>(train.images), step_seconds); }

double EpochReport::input_images_per_sec() const {
  return per_second(static_cast<double>(train.images) * input_workers, input_busy_seconds);
}

std::optional<BatchResult> RunReport::last_evaluation() const {
  if (per_epoch.empty()) return std::nullopt;
  return per_epoch.back().evaluation;
}

double RunReport::train_images_per_sec() const { return per_second(static_cast<double>(timed_images), timed_seconds); }

double RunReport::input_images_per_sec() const {
  return per_second(static_cast<double>(images) * input_workers, input_busy_seconds);
}

EpochRunner::EpochRunner(TrainingStep& step, BatchSource& train, EpochRunnerOptions options)
    : step_(step), train_(train), options_(options) {
  if (options_.epochs < 1 || options_.max_steps < 0 || options_.warmup_steps < 0) {
    throw Error(ErrorCode::kInvalidArgument, "EpochRunner: needs epochs >= 1, max_steps >= 0 and warmup_steps >= 0, got " +
                                                 std::to_string(options_.epochs) + ", " +
                                                 std::to_string(options_.max_steps) + " and " +
                                                 std::to_string(options_.warmup_steps));
  }
}

void EpochRunner::add_hook(EpochHook& hook) { hooks_.push_back(&hook); }

bool EpochRunner::done() const {
  return next_epoch_ >= options_.epochs || (options_.max_steps > 0 && report_.steps >= options_.max_steps);
}

EpochReport EpochRunner::run_epoch() {
  if (done()) {
    throw Error(ErrorCode::kInvalidArgument, "EpochRunner: the run is done (" + std::to_string(next_epoch_) +
                                                 " epoch(s), " + std::to_string(report_.steps) + " step(s))");
  }
  EpochReport epoch;
  epoch.epoch = next_epoch_++;
  if (options_.allocator != nullptr) options_.allocator->reset_peak();
  for (EpochHook* h : hooks_) h->on_epoch_begin(epoch.epoch);
  run_steps(epoch);
  evaluate(epoch);
  epoch.steps = report_.steps;
  // After the evaluation: an epoch's peak is the highest of its steps and its evaluation.
  if (options_.allocator != nullptr) epoch.memory = options_.allocator->stats();
  for (auto h = hooks_.rbegin(); h != hooks_.rend(); ++h) (*h)->on_epoch_end(epoch);
  add_to_totals(epoch);
  report_.per_epoch.push_back(epoch);
  return epoch;
}

const RunReport& EpochRunner::run() {
  while (!done()) run_epoch();
  return report_;
}

void EpochRunner::run_steps(EpochReport& epoch) {
  const double busy_before = train_.input_stats().busy_seconds;
  const Clock::time_point epoch_start = Clock::now();
  train_.start_epoch(epoch.epoch);
  Clock::time_point wait_start = Clock::now();
  while (options_.max_steps == 0 || report_.steps < options_.max_steps) {
    const TrainBatch* batch = train_.next();
    epoch.wait_seconds += seconds_since(wait_start);
    if (batch == nullptr) break;
    const Clock::time_point step_start = Clock::now();
    StepReport step{.epoch = epoch.epoch, .step = report_.steps + 1};
    for (EpochHook* h : hooks_) h->on_step_begin(step.step);
    const Clock::time_point train_start = Clock::now();
    step.result = step_.train(*batch);
    step.seconds = seconds_since(train_start);
    report_.steps = step.step;
    epoch.train += step.result;
    for (auto h = hooks_.rbegin(); h != hooks_.rend(); ++h) (*h)->on_step_end(step);
    // The step's time with its hooks (pruning happens there): what training cost.
    const double step_seconds = seconds_since(step_start);
    epoch.step_seconds += step_seconds;
    if (step.step > options_.warmup_steps) {
      report_.timed_seconds += step_seconds;
      report_.timed_images += step.result.images;
    }
    wait_start = Clock::now();
  }
  train_.end_epoch();
  epoch.seconds = seconds_since(epoch_start);
  const InputStats input = train_.input_stats();
  epoch.input_busy_seconds = input.busy_seconds - busy_before;
  epoch.input_workers = input.workers;
}

void EpochRunner::evaluate(EpochReport& epoch) {
  if (options_.evaluation == nullptr) return;
  const Clock::time_point start = Clock::now();
  for (EpochHook* h : hooks_) h->on_evaluation_begin(epoch.epoch);
  BatchSource& source = *options_.evaluation;
  BatchResult result;
  source.start_epoch(0);
  while (const TrainBatch* batch = source.next()) result += step_.evaluate(*batch);
  source.end_epoch();
  for (auto h = hooks_.rbegin(); h != hooks_.rend(); ++h) (*h)->on_evaluation_end(epoch.epoch);
  epoch.evaluation = result;
  epoch.evaluation_seconds = seconds_since(start);
}

void EpochRunner::add_to_totals(const EpochReport& epoch) {
  RunReport& r = report_;
  r.images += epoch.train.images;
  r.step_seconds += epoch.step_seconds;
  r.wall_seconds += epoch.seconds;
  r.input_busy_seconds += epoch.input_busy_seconds;
  r.input_workers = epoch.input_workers;
  for (std::size_t i = 0; i < kTensorCategoryCount; ++i) {
    r.peak_by_category[i] = std::max(r.peak_by_category[i], epoch.memory.by_category[i].peak_in_use_bytes);
  }
  r.peak_in_use_bytes = std::max(r.peak_in_use_bytes, epoch.memory.peak_in_use_bytes);
  r.peak_reserved_bytes = std::max(r.peak_reserved_bytes, epoch.memory.reserved_bytes);
}

// ---- PruningHook --------------------------------------------------------------------------

PruningHook::PruningHook(MagnitudePruner& pruner, Context& ctx, std::vector<Parameter> params)
    : pruner_(pruner), ctx_(ctx), params_(std::move(params)) {}

void PruningHook::on_step_end(const StepReport& step) { pruner_.after_step(ctx_, step.step - 1); }

void PruningHook::on_epoch_end(EpochReport& report) {
  report.pruning = PruningStatus{.sparsity = measured_sparsity(ctx_, params_), .target_sparsity = pruner_.target()};
}

// ---- ProfilingHook ------------------------------------------------------------------------

ProfilingHook::ProfilingHook(Profiler& profiler, const BatchSource& input) : profiler_(profiler), input_(input) {}

void ProfilingHook::on_step_begin(std::int64_t step) { profiler_.begin_step(step); }

void ProfilingHook::on_step_end(const StepReport& step) {
  (void)step;
  profiler_.end_step();
  sample_input();
}

void ProfilingHook::on_evaluation_begin(std::int64_t epoch) {
  (void)epoch;
  profiler_.begin("evaluate");
}

void ProfilingHook::on_evaluation_end(std::int64_t epoch) {
  (void)epoch;
  profiler_.end();
}

void ProfilingHook::sample_input() {
  const InputStats input = input_.input_stats();
  profiler_.sample(TensorCategory::kInputHost, input.host_bytes);
  profiler_.sample(TensorCategory::kInputPinned, input.pinned_bytes);
}

}  // namespace sluice::train
