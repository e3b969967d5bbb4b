// The job under --memory-limit for train and plan: data folders, pipelines, their needs, the job's
// configuration, and the reports of the plan and of each epoch.
#include "cli/train_job.hpp"

#include <algorithm>
#include <cstdio>

#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"
#include "sluice/pipeline/presets.hpp"
#include "sluice/sluice.hpp"

namespace sluice::cli {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path data_dir(const TrainOptions& o) {
  if (!o.data.empty()) return o.data;
  const fs::path dir = fs::path(o.data_root) / o.dataset;
  if (!fs::is_directory(dir / "train") || !fs::is_directory(dir / "test")) {
    throw Error(ErrorCode::kNotFound, "no prepared " + o.dataset + " here: run `sluice prepare " + o.dataset +
                                          " --out " + dir.string() + "` first (or pass --data-root)", dir.string());
  }
  return dir;
}

Splits data_splits(const TrainOptions& o) {
  if (o.shards.empty()) {
    const fs::path dir = data_dir(o);
    return {spec::Folder{(dir / "train").string()}, spec::Folder{(dir / "test").string()}, dir.string()};
  }
  if (o.test_shards.empty() && !o.no_eval) {
    throw Error(ErrorCode::kInvalidArgument, "--shards gives the training split: add --test-shards PATTERN for the "
                                             "evaluation, or --no-eval");
  }
  // Without evaluation the test loader is built but never read: the training shards serve.
  return {spec::Shards{{o.shards}}, spec::Shards{{o.test_shards.empty() ? o.shards : o.test_shards}}, o.shards};
}

Pipeline make_pipeline(const spec::Source& source, const train::ModelInfo& model, PipelineUse use, std::int64_t batch,
                       std::uint64_t seed, DeviceId device, void* stream, std::uint64_t cache_bytes) {
  const bool training = use == PipelineUse::kTraining;
  Pipeline p(PipelineSpec{.source = source});
  if (training) p.shuffle_files(seed);
  p.read().decode_jpeg({.color = model.channels == 1 ? Color::kGrey : Color::kRGB});
  // Decoded images, so a hit skips the read and the decode; augmentation still runs per epoch.
  if (cache_bytes > 0) p.cache(MemoryCache{.max_bytes = cache_bytes});
  // The model's presets: its data set's augmentation (training only) and mean and std, f32 NCHW.
  presets::find(training ? model.train_preset : model.eval_preset).make(0, {}).apply(p);
  // Training drops the short last batch: BatchNorm's statistics over a handful of images are noise.
  // With a cache the loop drops it instead, after the pipeline has read (and cached) its files.
  p.batch(static_cast<int>(batch), {.drop_last = training && cache_bytes == 0});
  if (device.is_cuda()) p.to_device(device, {.stream = stream});
  return p;
}

JobLimits parse_job_limits(const TrainOptions& o, DeviceId device) {
  JobLimits limits;
  auto size = [](const std::string& flag, const std::string& text) {
    const auto bytes = parse_size(text);
    if (!bytes || *bytes == 0) {
      throw Error(ErrorCode::kInvalidArgument, flag + ": cannot read \"" + text + "\" as a size (e.g. 512MiB or 2GiB)");
    }
    return *bytes;
  };
  if (!o.memory_limit.empty()) limits.memory = size("--memory-limit", o.memory_limit);
  if (!o.host_memory_limit.empty()) {
    if (!device.is_cuda()) {
      throw Error(ErrorCode::kInvalidArgument, "--host-memory-limit is for a CUDA device: on the CPU --memory-limit "
                                               "holds the whole process");
    }
    if (!limits.on()) {
      throw Error(ErrorCode::kInvalidArgument, "--host-memory-limit needs --memory-limit (the device's limit) too");
    }
    limits.host = size("--host-memory-limit", o.host_memory_limit);
  }
  return limits;
}

JobPipelines::JobPipelines(const TrainOptions& o, Splits data, DeviceId device)
    : o_(o), data_(std::move(data)), device_(device) {}

train::PipelineNeeds JobPipelines::needs(PipelineUse use, std::int64_t batch) {
  const bool training = use == PipelineUse::kTraining;
  const train::ModelInfo& info = train::model_info(o_.model);
  const PipelineMemoryPlan m = make_pipeline(training ? data_.train : data_.test, info, use, batch, o_.seed, device_,
                                             nullptr)
                                   .plan_memory({.threads = o_.loader_threads, .seed = o_.seed});
  if (training) train_items_ = m.items;
  else eval_items_ = m.items;
  train::PipelineNeeds n{.name = training ? "training pipeline" : "evaluation pipeline",
                         .minimum = m.minimum,
                         .slot_bytes = m.slot_bytes,
                         .start_slots = std::max(0, m.start_slots - m.min_slots),
                         .cache_set_bytes = m.decoded_set_bytes};
  return n;
}

std::int64_t JobPipelines::training_items() {
  if (train_.empty()) (void)at(2);
  return train_items_;
}

std::int64_t JobPipelines::evaluation_batch() {
  if (o_.no_eval) return 0;
  if (!eval_) eval_ = needs(PipelineUse::kEvaluation, kEvalBatch);
  return std::min<std::int64_t>(kEvalBatch, eval_items_);
}

std::int64_t JobPipelines::steps_per_epoch(std::int64_t batch) { return batch > 0 ? training_items() / batch : 0; }

std::vector<train::PipelineNeeds> JobPipelines::at(std::int64_t batch) {
  auto it = train_.find(batch);
  if (it == train_.end()) it = train_.emplace(batch, needs(PipelineUse::kTraining, batch)).first;
  train::PipelineNeeds train = it->second;
  const std::int64_t per_epoch = batch > 0 ? train_items_ / batch : 0;
  const std::int64_t epochs =
      o_.steps > 0 ? (per_epoch > 0 ? (o_.steps + per_epoch - 1) / per_epoch : 1) : std::max(1, o_.epochs);
  train.passes = epochs;
  std::vector<train::PipelineNeeds> out{train};
  if (!o_.no_eval) {
    if (!eval_) eval_ = needs(PipelineUse::kEvaluation, kEvalBatch);
    train::PipelineNeeds eval = *eval_;
    eval.passes = epochs;
    out.push_back(eval);
  }
  return out;
}

train::JobConfig job_config(const TrainOptions& o, const JobLimits& limits, DeviceId device, int threads,
                            JobPipelines& pipelines) {
  train::JobConfig c{.train = train_config(o, o.batch, 0), .threads = threads,
                     .eval_batch = pipelines.evaluation_batch(), .epochs = 2, .device = device,
                     .memory_limit = limits.memory, .host_memory_limit = limits.host,
                     .pipelines = [&pipelines](std::int64_t b) { return pipelines.at(b); }};
  // A run whose steps end inside its first epoch never evaluates before them: one epoch to plan.
  if (o.steps > 0 && o.batch > 0 && o.steps <= pipelines.steps_per_epoch(o.batch)) c.epochs = 1;
  if (o.epochs == 1) c.epochs = 1;
  const AllocatorOptions memory = parse_memory(o.memory);
  if (memory.limit != 0) c.allocator = memory;  // grow:SIZE or prealloc:SIZE: a hand split
  return c;
}

std::string job_plan_text(const train::JobPlan& plan) { return plan.explain(); }

json job_plan_json(const train::JobPlan& plan) {
  json pipelines = json::array();
  for (const train::PipelineShare& p : plan.pipelines) {
    json by_use = json::object();
    for (int u = 0; u < kPipelineUseCount; ++u) {
      const std::uint64_t b = p.needs.minimum[static_cast<std::size_t>(u)];
      if (b != 0) by_use[std::string(to_string(static_cast<MemoryUse>(u)))] = b;
    }
    pipelines.push_back({{"name", p.needs.name}, {"minimum_bytes", p.needs.minimum_bytes()},
                         {"minimum_by_use", by_use}, {"prefetch_bytes", p.prefetch_bytes},
                         {"cache_bytes", p.cache_bytes}, {"cache_set_bytes", p.needs.cache_set_bytes},
                         {"passes", p.needs.passes}, {"share_bytes", p.bytes()}});
  }
  return {{"fits", plan.fits}, {"failure", plan.fits ? json(nullptr) : json(plan.failure)},
          {"device", to_string(plan.device)},
          {"memory_limit_bytes", plan.memory_limit}, {"host_memory_limit_bytes", plan.host_memory_limit},
          {"training", {{"share_bytes", plan.training_bytes}, {"hand_split", plan.hand_split},
                        {"planned_peak_bytes", plan.training.peak_in_use_bytes},
                        {"planned_step_peak_bytes", plan.training.step_peak_in_use_bytes},
                        {"initial_region_bytes", plan.allocator.initial_region_bytes}}},
          {"offloaded_state_bytes", plan.offload_bytes},
          {"pipelines", pipelines},
          {"unused_bytes", plan.unused_bytes}, {"unused_reason", plan.unused_reason},
          {"device_unused_bytes", plan.device_unused_bytes},
          {"dry_runs", plan.dry_runs}};
}

std::string job_memory_text(const train::JobMemoryReport& r) {
  auto pct = [](std::uint64_t part, std::uint64_t whole) {
    char text[16];
    std::snprintf(text, sizeof text, "%.0f%%", whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole));
    return std::string(text);
  };
  std::string text = "job memory: limit " + sluice::format_bytes(r.memory_limit) + ", peak " + sluice::format_bytes(r.peak_bytes) +
                     " (" + pct(r.peak_bytes, r.memory_limit) + ")";
  if (r.separate_host) {
    text += "; host " + (r.host_memory_limit ? "limit " + sluice::format_bytes(r.host_memory_limit) + ", " : std::string()) +
            "peak " + sluice::format_bytes(r.host_peak_bytes);
  }
  text += ": ";
  for (std::size_t i = 0; i < r.parts.size(); ++i) {
    const train::JobPartReport& p = r.parts[i];
    text += (i ? ", " : "") + p.name + " " + sluice::format_bytes(p.peak_bytes) + " of " + sluice::format_bytes(p.share_bytes);
    for (const train::JobCacheReport& c : r.caches) {
      if (c.pipeline != p.name) continue;
      char hits[32];
      std::snprintf(hits, sizeof hits, "%.1f%%", 100.0 * c.hit_rate());
      text += " (cache " + sluice::format_bytes(c.bytes) + ", hits " + hits + ")";
    }
  }
  return text + "; unused " + sluice::format_bytes(r.unused_bytes) + " (" + r.unused_reason + ")";
}

json job_memory_json(const train::JobMemoryReport& r) {
  json parts = json::array();
  for (const train::JobPartReport& p : r.parts) {
    parts.push_back({{"name", p.name}, {"share_bytes", p.share_bytes}, {"peak_bytes", p.peak_bytes}, {"device", p.device}});
  }
  json caches = json::array();
  for (const train::JobCacheReport& c : r.caches) {
    caches.push_back({{"pipeline", c.pipeline}, {"hits", c.hits}, {"misses", c.misses}, {"hit_rate", c.hit_rate()},
                      {"bytes", c.bytes}, {"share_bytes", c.share_bytes}, {"dropped", c.dropped}});
  }
  json by_use = json::object();
  for (std::size_t u = 0; u < r.peak_by_use.size(); ++u) by_use[std::string(to_string(static_cast<MemoryUse>(u)))] = r.peak_by_use[u];
  return {{"limit_bytes", r.memory_limit}, {"host_limit_bytes", r.host_memory_limit}, {"separate_host", r.separate_host},
          {"peak_bytes", r.peak_bytes}, {"host_peak_bytes", r.host_peak_bytes}, {"parts", parts},
          {"peak_by_use", by_use}, {"caches", caches}, {"unused_bytes", r.unused_bytes},
          {"unused_reason", r.unused_reason}};
}

}  // namespace sluice::cli
