// EpochRunner: the training loop as a library type. It pulls batches from a BatchSource, runs
// one TrainingStep on each, evaluates after every epoch, stops after a number of epochs or
// steps, times the steps and the waits for data, and reports per epoch and for the run; hooks
// attach the rest (pruning, profiling, progress, printing, cancellation) at fixed points.
//
// The train module may not include the pipeline or the runtime (docs/design.md's layering), so the
// batches come through BatchSource, an interface a sluice Loader is adapted to on top of both
// (sluice/loader_batches.hpp). Trainer is one TrainingStep (TrainerStep below); a step of the
// caller's own, such as examples/mpi_data_parallel.cpp's data-parallel one, is another. The
// runner draws nothing at random: a run is as deterministic as its step and its batches.
//
// The hooks nest: the first added is the outermost, so *_begin events reach the hooks first to
// last and *_end events last to first (a profiler added before a pruner encloses its pruning in
// the step's slice; a printer added first sees every other hook's part of the epoch's report).
// What a run holds for its memory is the allocator's; a hook that owns more of the job's memory
// (JobMemoryHook, for a job under one limit) resets its peaks in on_epoch_begin and reports them
// in on_epoch_end.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <span>
#include <vector>

#include "sluice/core/device_id.hpp"
#include "sluice/core/shape.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/category.hpp"
#include "sluice/train/job_memory.hpp"
#include "sluice/train/trainer.hpp"

namespace sluice::train {

class MagnitudePruner;
class Profiler;
struct JobPlan;
struct JobBudgets;

// One batch as a source hands it over: views of memory the source owns.
struct TrainBatch {
  TensorView data;                       // (N, C, H, W) f32
  std::span<const std::int32_t> labels;  // N class indices
  DeviceId where = host();               // where data and labels are
  // A device batch's copy-done event (a cudaEvent_t) its consumer's stream must wait on; null
  // for a host batch.
  void* ready_event = nullptr;
};

// The producer's counters, as far as the reports need them; zeros for a source without any.
struct InputStats {
  double busy_seconds = 0;         // its workers' busy time so far, summed over them
  int workers = 0;                 // its worker threads
  std::uint64_t host_bytes = 0;    // accounted pageable memory now
  std::uint64_t pinned_bytes = 0;  // accounted page-locked memory now
  // Its memory cache, counted since it started: hits, misses (each a file read), the bytes it
  // holds now and the entries it gave back to working memory.
  std::int64_t cache_hits = 0;
  std::int64_t cache_misses = 0;
  std::uint64_t cache_bytes = 0;
  std::int64_t cache_dropped = 0;
};

// Batches, one pass per epoch.
class BatchSource {
 public:
  virtual ~BatchSource() = default;

  virtual std::int64_t batches_per_epoch() const = 0;
  // Starts epoch `epoch` (from 0); the order of its batches may depend on it (shuffling).
  virtual void start_epoch(std::int64_t epoch) = 0;
  // The epoch's next batch, or nullptr after its last. Blocks until the batch is ready (the
  // runner counts that time as waiting for data). Valid until the next call to next() or
  // end_epoch().
  virtual const TrainBatch* next() = 0;
  // The runner is done with the epoch, after its last batch or before (a step limit): what the
  // source holds for it can go.
  virtual void end_epoch() {}
  virtual InputStats input_stats() const { return {}; }
};

// What trains on a batch.
class TrainingStep {
 public:
  virtual ~TrainingStep() = default;
  // One optimizer step on `batch`: its loss and correct predictions.
  virtual BatchResult train(const TrainBatch& batch) = 0;
  // Loss and correct predictions with no update.
  virtual BatchResult evaluate(const TrainBatch& batch) = 0;
};

// Trainer as a TrainingStep. The trainer must outlive it.
class TrainerStep final : public TrainingStep {
 public:
  explicit TrainerStep(Trainer& trainer) : trainer_(trainer) {}
  BatchResult train(const TrainBatch& batch) override;
  BatchResult evaluate(const TrainBatch& batch) override;

 private:
  Trainer& trainer_;
};

// Where the magnitude pruner stands at the end of an epoch (PruningHook fills it).
struct PruningStatus {
  double sparsity = 0;         // exact zeros among the prunable weights, as measured
  double target_sparsity = 0;  // what the schedule asked for at the last update
};

struct StepReport {
  std::int64_t epoch = 0;  // from 0
  std::int64_t step = 0;   // steps this runner has run, this one included (from 1)
  BatchResult result;
  double seconds = 0;      // the training step alone, without the hooks
};

struct EpochReport {
  std::int64_t epoch = 0;            // from 0
  std::int64_t steps = 0;            // steps the runner has run by the epoch's end
  BatchResult train;                 // over the epoch's steps
  std::optional<BatchResult> evaluation;  // after the epoch; none without an evaluation source
  double seconds = 0;                // the epoch's wall time, its evaluation left out
  double step_seconds = 0;           // in the steps and their hooks
  double wait_seconds = 0;           // waiting for the source's batches
  double evaluation_seconds = 0;
  double input_busy_seconds = 0;     // the source's workers, during the epoch
  int input_workers = 0;
  // The allocator's statistics at the epoch's end (after the evaluation), its peaks since the
  // epoch's start; zeros without an allocator.
  AllocatorStats memory;
  std::optional<PruningStatus> pruning;
  std::optional<JobMemoryReport> job_memory;  // under one limit for the job (JobMemoryHook)

  // Images the steps trained per second of step time.
  double train_images_per_sec() const;
  // The source's capacity: images per second of its workers' busy time, times its workers.
  double input_images_per_sec() const;
};

struct RunReport {
  std::vector<EpochReport> per_epoch;
  std::int64_t steps = 0;
  std::int64_t images = 0;            // trained on
  double step_seconds = 0;            // summed over the epochs
  double wall_seconds = 0;            // the epochs' seconds, summed
  double input_busy_seconds = 0;
  int input_workers = 0;
  double timed_seconds = 0;           // step time after the warmup steps
  std::int64_t timed_images = 0;
  // The highest of the epochs' peaks, per category and in all; the most reserved at an epoch's end.
  std::array<std::uint64_t, kTensorCategoryCount> peak_by_category{};
  std::uint64_t peak_in_use_bytes = 0;
  std::uint64_t peak_reserved_bytes = 0;

  // The last epoch's evaluation, if any.
  std::optional<BatchResult> last_evaluation() const;
  // Images per second of step time after the warmup steps.
  double train_images_per_sec() const;
  double input_images_per_sec() const;
};

// Called at fixed points of a run (the nesting rule is at the top of this file). A hook may
// throw to stop the run: the exception leaves run_epoch() and run().
class EpochHook {
 public:
  virtual ~EpochHook() = default;
  virtual void on_epoch_begin(std::int64_t epoch) { (void)epoch; }
  // Before step number `step` (from 1), its batch already in hand.
  virtual void on_step_begin(std::int64_t step) { (void)step; }
  virtual void on_step_end(const StepReport& step) { (void)step; }
  virtual void on_evaluation_begin(std::int64_t epoch) { (void)epoch; }
  virtual void on_evaluation_end(std::int64_t epoch) { (void)epoch; }
  // May fill its part of the report (PruningHook: pruning).
  virtual void on_epoch_end(EpochReport& report) { (void)report; }
};

struct EpochRunnerOptions {
  std::int64_t epochs = 1;         // at most (>= 1)
  std::int64_t max_steps = 0;      // > 0: stop after this many steps, inside an epoch if need be
  std::int64_t warmup_steps = 0;   // the first steps, left out of RunReport's timed throughput
  // Evaluated after every epoch (its epoch 0 each time, so every evaluation sees the same
  // batches); null: no evaluation.
  BatchSource* evaluation = nullptr;
  // The training allocator: its peak is reset at each epoch's start and its statistics go into
  // each epoch's report; null: no memory figures.
  Allocator* allocator = nullptr;
};

class EpochRunner {
 public:
  // `step`, `train` and the options' source and allocator must outlive the runner. Throws
  // sluice::Error(kInvalidArgument) for epochs < 1 or negative max_steps or warmup_steps.
  EpochRunner(TrainingStep& step, BatchSource& train, EpochRunnerOptions options = {});

  // Adds a hook (it must outlive the runner), inside the ones added before it.
  void add_hook(EpochHook& hook);

  // The next epoch: its steps (up to the step limit), then its evaluation; hooks throughout.
  // Returns its report (also appended to report().per_epoch). Throws
  // sluice::Error(kInvalidArgument) when done().
  EpochReport run_epoch();
  // run_epoch() until done(); the report of every epoch run so far.
  const RunReport& run();

  // The epochs have all run, or the step limit was reached.
  bool done() const;
  std::int64_t steps() const { return report_.steps; }
  const RunReport& report() const { return report_; }

 private:
  void run_steps(EpochReport& epoch);
  void evaluate(EpochReport& epoch);
  void add_to_totals(const EpochReport& epoch);

  TrainingStep& step_;
  BatchSource& train_;
  EpochRunnerOptions options_;
  std::vector<EpochHook*> hooks_;
  std::int64_t next_epoch_ = 0;
  RunReport report_;
};

// Magnitude pruning as a hook: the pruner's after_step() after every step, and the sparsity
// reached in each epoch's report.
class PruningHook final : public EpochHook {
 public:
  // The pruner, the context and the parameters (the model's, which the pruner masks) must
  // outlive the hook.
  PruningHook(MagnitudePruner& pruner, Context& ctx, std::vector<Parameter> params);
  void on_step_end(const StepReport& step) override;
  void on_epoch_end(EpochReport& report) override;

 private:
  MagnitudePruner& pruner_;
  Context& ctx_;
  std::vector<Parameter> params_;
};

// The memory profiler as a hook: a profiler step per training step (with the source's input
// memory sampled at its end) and an "evaluate" slice around each evaluation.
class ProfilingHook final : public EpochHook {
 public:
  // The profiler and the source must outlive the hook.
  ProfilingHook(Profiler& profiler, const BatchSource& input);
  void on_step_begin(std::int64_t step) override;
  void on_step_end(const StepReport& step) override;
  void on_evaluation_begin(std::int64_t epoch) override;
  void on_evaluation_end(std::int64_t epoch) override;
  // Samples the source's input memory now (also at the end of every step).
  void sample_input();

 private:
  Profiler& profiler_;
  const BatchSource& input_;
};

// A training job under one memory limit as a hook (sluice/train/job_plan.hpp): every epoch starts
// the budgets' peaks again, and ends with its JobMemoryReport: the limit, each part's peak against
// its share, each pipeline's cache hits and what the limit held that nothing claimed.
class JobMemoryHook final : public EpochHook {
 public:
  struct Pipeline {
    std::string name;
    std::shared_ptr<MemoryBudget> part;  // its part of the host budget (the loader's)
    const BatchSource* source = nullptr;  // its cache's counters
  };
  // The plan's pipelines in its order. The plan, the budgets and the sources must outlive the hook.
  JobMemoryHook(const JobPlan& plan, const JobBudgets& budgets, std::vector<Pipeline> pipelines);
  void on_epoch_begin(std::int64_t epoch) override;
  void on_epoch_end(EpochReport& report) override;

 private:
  const JobPlan& plan_;
  const JobBudgets& budgets_;
  std::vector<Pipeline> pipelines_;
  std::vector<InputStats> at_start_;
};

}  // namespace sluice::train
