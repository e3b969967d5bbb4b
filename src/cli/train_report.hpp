// What `sluice train` tells a person and a script: the run's plan before its first step, one
// line per epoch (as a hook of the epoch runner, with the progress line and Ctrl-C), the closing
// summary, and the --json object (keys only ever grow). The loop itself is the library's
// (sluice/train/epoch_runner.hpp); train.cpp builds the run and calls these.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/console.hpp"
#include "cli/train_options.hpp"
#include "sluice/core/device_id.hpp"
#include "sluice/train/weights_file.hpp"
#include "sluice/train/epoch_runner.hpp"
#include "sluice/train/gradient_checkpointing.hpp"
#include "sluice/train/job_plan.hpp"
#include "sluice/train/models.hpp"
#include "sluice/train/precision.hpp"
#include "sluice/train/pruning.hpp"
#include "sluice/train/train_config.hpp"
#include "sluice/train/trainer.hpp"

namespace sluice::cli {

// One run of `sluice train` as its reports see it. The options are the resolved ones (model,
// epochs, batch and accumulation filled in).
struct TrainRun {
  const TrainOptions& options;
  const train::ModelInfo& model;
  std::filesystem::path data;
  DeviceId device;
  AllocatorOptions memory;
  train::CheckpointPolicy checkpoint;
  train::Context& ctx;
  train::TrainSetup& setup;
  train::Trainer& trainer;
  const train::MagnitudePruner* pruner = nullptr;  // with --prune
  std::int64_t steps = 0;                          // the run's, planned
  std::int64_t epochs = 0;
  std::int64_t steps_per_epoch = 0;
  const train::JobPlan* job = nullptr;             // under --memory-limit
  std::uint64_t baseline_rss_bytes = 0;            // VmHWM before the run held anything
};

// The model, the data, the optimizer and schedule, the memory and the techniques, before step 1.
void print_run_plan(const TrainRun& run);

// The epoch runner's hook for the person at the terminal: the progress line (stderr, a
// terminal only), Ctrl-C turned into sluice::Error(kCancelled) before the next step, and each
// epoch's line of text and JSON object. Add it first, so it sees every other hook's part of
// the epoch's report.
class EpochPrinter final : public train::EpochHook {
 public:
  explicit EpochPrinter(const TrainRun& run);

  void on_epoch_begin(std::int64_t epoch) override;
  void on_step_begin(std::int64_t step) override;
  void on_step_end(const train::StepReport& step) override;
  void on_epoch_end(train::EpochReport& report) override;

  // The epochs' JSON objects so far.
  const nlohmann::json& per_epoch_json() const { return per_epoch_; }

 private:
  const TrainRun& run_;
  InterruptGuard interrupt_;
  double epoch_cpu_start_ = 0;  // the process's CPU seconds when the epoch began
  std::atomic<std::uint64_t> images_{0};
  ProgressLine progress_;  // reads images_: declared after it
  nlohmann::json per_epoch_ = nlohmann::json::array();
};

// After the run: the closing line (accuracy, steps, time, images/s, memory); `seconds` is the
// command's wall time so far.
void print_summary(const TrainRun& run, const train::RunReport& report, double seconds);

// The --json object. `batch_search` and `pruning` are the objects of those parts (null when
// they did not run).
nlohmann::json run_json(const TrainRun& run, const train::RunReport& report, const nlohmann::json& per_epoch,
                        const nlohmann::json& batch_search, const nlohmann::json& pruning, double seconds);

}  // namespace sluice::cli
