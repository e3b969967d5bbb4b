// The training job under one memory limit (--memory-limit) for `sluice train` and
// `sluice plan`: the data folders and the pipelines both commands describe, the pipelines' needs
// from their memory plans (sluice/train/job_plan.hpp's input), the job's configuration for the
// options, and the plan's and each epoch's reports as text and JSON.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/train_options.hpp"
#include "sluice/core/device_id.hpp"
#include "sluice/pipeline/pipeline.hpp"
#include "sluice/pipeline/spec.hpp"
#include "sluice/train/job_memory.hpp"
#include "sluice/train/job_plan.hpp"
#include "sluice/train/models.hpp"

namespace sluice::cli {

// The folder with train/ and test/: --data, or --dataset under --data-root (which must have been
// prepared). Throws sluice::Error(kNotFound) saying how to prepare it.
std::filesystem::path data_dir(const TrainOptions& o);

// Where the splits come from: train/ and test/ of --data (or of the prepared --dataset), or
// --shards and --test-shards.
struct Splits {
  spec::Source train;
  spec::Source test;
  std::string where;  // for messages and --json's "data"
};
Splits data_splits(const TrainOptions& o);

// What a pipeline feeds: training steps (shuffled, augmented, full batches) or the evaluation.
enum class PipelineUse { kTraining, kEvaluation };

// The pipelines for a model: greyscale or RGB from its input, the data set's mean and std, and
// CIFAR's augmentation (random crop with padding 4, horizontal flip) for the RGB model's training.
// For a CUDA device the batches go there through the loader's pinned transfer ring, handed over
// to `stream` (the training context's) with an event: no pageable copy, no host wait per step.
// A cache share > 0 keeps decoded images in memory (the job's plan gives it); a cached training
// pipeline also produces its short last batch, which the loop skips (LoaderBatches'
// ShortBatch::kSkip), so that the first epoch reads, and caches, every file.
Pipeline make_pipeline(const spec::Source& source, const train::ModelInfo& model, PipelineUse use, std::int64_t batch,
                       std::uint64_t seed, DeviceId device, void* stream, std::uint64_t cache_bytes = 0);

// --memory-limit and --host-memory-limit, read and checked against the device: a host limit only
// with a CUDA device and with --memory-limit. Throws sluice::Error(kInvalidArgument).
struct JobLimits {
  std::uint64_t memory = 0;  // 0: no job limit (the allocator and the pipelines keep their own books)
  std::uint64_t host = 0;
  bool on() const { return memory != 0; }
};
JobLimits parse_job_limits(const TrainOptions& o, DeviceId device);

// The pipelines' needs at a training batch, from their memory plans (the files probed once per
// batch, then remembered): the training pipeline, read once an epoch of the run (--epochs, or the
// epochs --steps spans at that batch), and the evaluation's after each (none with --no-eval).
class JobPipelines {
 public:
  // The options must outlive it. The pipelines are planned as they will run on `device`.
  JobPipelines(const TrainOptions& o, Splits data, DeviceId device);
  std::vector<train::PipelineNeeds> at(std::int64_t batch);
  // Steps an epoch at `batch` (training drops the short last batch).
  std::int64_t steps_per_epoch(std::int64_t batch);
  // Images in the training split: no batch larger can run.
  std::int64_t training_items();
  // The largest evaluation batch the run will see: kEvalBatch, or the whole test split when it
  // is smaller (0 with --no-eval).
  std::int64_t evaluation_batch();

 private:
  train::PipelineNeeds needs(PipelineUse use, std::int64_t batch);

  const TrainOptions& o_;
  Splits data_;
  DeviceId device_;
  std::map<std::int64_t, train::PipelineNeeds> train_;
  std::optional<train::PipelineNeeds> eval_;
  std::int64_t train_items_ = 0;
  std::int64_t eval_items_ = 0;
};

// The job's configuration for the options (their batch and accumulation as they stand): a hand
// split when --memory has a size, the evaluation unless --no-eval.
train::JobConfig job_config(const TrainOptions& o, const JobLimits& limits, DeviceId device, int threads,
                            JobPipelines& pipelines);

// The plan for a person (what `sluice plan` and `sluice train` print) and as JSON ("job_plan").
std::string job_plan_text(const train::JobPlan& plan);
nlohmann::json job_plan_json(const train::JobPlan& plan);

// An epoch's job memory: one line of text and its JSON ("job_memory" of a per_epoch entry).
std::string job_memory_text(const train::JobMemoryReport& r);
nlohmann::json job_memory_json(const train::JobMemoryReport& r);

}  // namespace sluice::cli
