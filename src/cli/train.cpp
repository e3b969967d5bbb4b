// `sluice train`: trains one of the training core's models (sluice/train/models.hpp) on an image
// folder with train/ and test/ splits, fed by two sluice pipelines. The training loop only pulls
// the next batch: the loader decodes, augments and batches ahead on its own threads while a step
// runs, and the time the loop waits for it is reported. Per epoch: loss, test accuracy, training
// and pipeline images/s, and the training allocator's peak memory by category; --json ends
// stdout with one object (keys only ever grow).
#include <CLI/CLI.hpp>
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/console.hpp"
#include "cli/train_options.hpp"
#include "sluice/sluice.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/batch_search.hpp"
#include "sluice/train/checkpoint.hpp"
#include "sluice/train/compressed_weights.hpp"
#include "sluice/train/context.hpp"
#include "sluice/train/gradient_checkpointing.hpp"
#include "sluice/train/models.hpp"
#include "sluice/train/optimizer.hpp"
#include "sluice/train/out_of_memory.hpp"
#include "sluice/train/planner.hpp"
#include "sluice/train/precision.hpp"
#include "sluice/train/profiler.hpp"
#include "sluice/train/pruning.hpp"
#include "sluice/train/setup.hpp"
#include "sluice/train/trainer.hpp"

namespace sluice::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Epochs that bring fashion-cnn past 90% test accuracy on 2 cores well inside 10 minutes, and
// cifar10-separable past 80% (docs/training.md has both measurements).
constexpr int kFashionEpochs = 3;
constexpr int kCifarEpochs = 15;

fs::path data_dir(const TrainOptions& o) {
  if (!o.data.empty()) return o.data;
  const fs::path dir = fs::path(o.data_root) / o.dataset;
  if (!fs::is_directory(dir / "train") || !fs::is_directory(dir / "test")) {
    throw Error(ErrorCode::kNotFound, "no prepared " + o.dataset + " here: run `sluice prepare " + o.dataset +
                                          " --out " + dir.string() + "` first (or pass --data-root)", dir.string());
  }
  return dir;
}

// The pipelines for a model: greyscale or RGB from its input, the data set's mean and std, and
// CIFAR's augmentation (random crop with padding 4, horizontal flip) for the RGB model's training.
// For a CUDA device the batches go there through the loader's pinned transfer ring, handed over
// to `stream` (the training context's) with an event: no pageable copy, no host wait per step.
Pipeline make_pipeline(const fs::path& dir, const train::ModelInfo& model, bool training, int batch, std::uint64_t seed,
                       DeviceId device, void* stream) {
  const bool grey = model.channels == 1;
  Pipeline p = Pipeline::from_folder(dir.string());
  if (training) p.shuffle_files(seed);
  p.read().decode_jpeg({.color = grey ? Color::kGrey : Color::kRGB});
  if (training && !grey) p.random_crop(model.width, model.height, {.padding = 4}).flip_horizontal(0.5);
  std::vector<float> mean = grey ? std::vector<float>{0.2860f} : std::vector<float>{0.4914f, 0.4822f, 0.4465f};
  std::vector<float> std = grey ? std::vector<float>{0.3530f} : std::vector<float>{0.2470f, 0.2435f, 0.2616f};
  p.normalize({.mean = std::move(mean), .std = std::move(std), .layout = Layout::kNCHW, .dtype = DType::kF32});
  // Training drops the short last batch: BatchNorm's statistics over a handful of images are noise.
  p.batch(batch, {.drop_last = training});
  if (device.is_cuda()) p.to_device(device, {.stream = stream});
  return p;
}

enum class Use { kTrainingStep, kEvaluation };

// A training step or an evaluation on a batch where the loader left it (host memory, or the
// device with the event that says its copy is done).
train::BatchResult run_on(train::Trainer& trainer, const Batch& b, Use use) {
  const DeviceId where = b.on_device() ? b.device() : host();
  const TensorView& data = b.on_device() ? b.device_data() : b.data();
  const std::span<const std::int32_t> labels =
      b.on_device() ? std::span<const std::int32_t>(b.device_labels(), b.labels().size()) : b.labels();
  void* ready = b.on_device() ? b.ready_event() : nullptr;
  return use == Use::kEvaluation ? trainer.evaluate(data, labels, where, ready)
                                 : trainer.step(data, labels, where, ready);
}

// The pruning schedule for --prune: TF's PolynomialDecay from 0 to the final sparsity, from
// --prune-begin (default 0) to --prune-end (default: the multiple of the frequency after begin
// nearest below 75% of the steps, so the last mask update lands on end_step and reaches the
// final sparsity exactly), masks updated every --prune-frequency steps.
train::PolynomialDecay prune_schedule(const TrainOptions& o, std::int64_t total_steps) {
  train::PolynomialDecay s;
  s.final_sparsity = o.prune;
  s.begin_step = o.prune_begin >= 0 ? o.prune_begin : 0;
  const std::int64_t span = std::max<std::int64_t>(1, total_steps * 3 / 4 - s.begin_step);
  s.frequency = o.prune_frequency > 0 ? o.prune_frequency : std::clamp<std::int64_t>(span / 10, 1, 100);
  s.end_step = o.prune_end >= 0 ? o.prune_end : s.begin_step + std::max<std::int64_t>(1, span / s.frequency) * s.frequency;
  s.validate();
  return s;
}

// Busy seconds of the loader's stages, summed: what producing the batches so far cost.
double pipeline_busy_seconds(const Loader& loader) {
  double s = 0;
  for (const StageStats& st : loader.stats().stages) s += st.busy_seconds;
  return s;
}

// CPU time this process has used (user + system), in seconds: on a shared machine a steadier
// measure of the work than wall time.
double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

json category_json(const AllocatorStats& stats) {
  json j = json::object();
  for (std::size_t i = 0; i < kTensorCategoryCount; ++i) {
    const auto c = static_cast<TensorCategory>(i);
    j[std::string(to_string(c))] = stats.by_category[i].peak_in_use_bytes;
  }
  return j;
}

// The input pipeline's accounted bytes now: pageable host memory (everything but the pinned
// slots) and page-locked memory, as the profiler's input categories.
std::pair<std::uint64_t, std::uint64_t> pipeline_bytes(const Loader& loader) {
  const Stats st = loader.stats();
  std::uint64_t pinned = 0;
  for (const MemoryStats& m : st.memory) {
    if (m.use == "pinned") pinned += m.used;
  }
  return {st.memory_used - std::min(st.memory_used, pinned), pinned};
}

std::string category_text(const AllocatorStats& stats) {
  std::string text;
  for (std::size_t i = 0; i < kTensorCategoryCount; ++i) {
    const std::uint64_t peak = stats.by_category[i].peak_in_use_bytes;
    if (peak == 0) continue;
    text += (text.empty() ? "" : ", ") + std::string(to_string(static_cast<TensorCategory>(i))) + " " + format_bytes(peak);
  }
  return text;
}

// Mixed precision's counters: the loss scale now (1 without scaling), steps skipped for an inf or
// NaN gradient, and the times the scale grew.
json precision_json(const train::PrecisionStats& ps) {
  return {{"loss_scale", ps.loss_scale}, {"skipped_steps", ps.skipped_steps}, {"growth_events", ps.growth_events}};
}

std::string precision_text(const train::PrecisionStats& ps) {
  std::string text(train::to_string(ps.precision));
  if (ps.precision != train::Precision::kMixedF16) return text + " (no loss scaling)";
  char line[160];
  std::snprintf(line, sizeof line, ", loss scale %g, %lld skipped step(s), %lld growth event(s)", ps.loss_scale,
                static_cast<long long>(ps.skipped_steps), static_cast<long long>(ps.growth_events));
  return text + line;
}

train::BatchResult evaluate(train::Trainer& trainer, Loader& test) {
  train::BatchResult r;
  for (Batch& b : test.epoch(0)) r += run_on(trainer, b, Use::kEvaluation);
  return r;
}

int run_train(TrainOptions o) {
  const DeviceId device = parse_device(o.device);
  const fs::path dir = data_dir(o);
  if (o.model.empty()) o.model = o.dataset == "fashion-mnist" ? "fashion-cnn" : "cifar10-separable";
  const train::ModelInfo& info = train::model_info(o.model);
  if (o.epochs == 0) o.epochs = info.name == "fashion-cnn" ? kFashionEpochs : kCifarEpochs;
  const AllocatorOptions memory = parse_memory(o.memory);
  o.batch = parse_batch(o.batch_text);
  o.accumulate = parse_accumulate(o.accumulate_text);
  const bool accumulate_auto = o.accumulate == 0;
  if (accumulate_auto && o.batch == 0) {
    throw Error(ErrorCode::kInvalidArgument, "--accumulate auto keeps --batch as the effective batch: give a number, "
                                             "not --batch auto");
  }
  if (accumulate_auto) o.accumulate = 1;  // found below, once the allocator exists
  // Checked before anything loads: a bad value fails at once, not after the first epoch's data.
  if (o.accumulate < 1) {
    throw Error(ErrorCode::kInvalidArgument,
                "--accumulate must be >= 1 micro-batches, got " + std::to_string(o.accumulate));
  }
  if (o.batch != 0 && o.batch % o.accumulate != 0) {
    throw Error(ErrorCode::kInvalidArgument, "--accumulate " + std::to_string(o.accumulate) +
                                                 " does not divide --batch " + std::to_string(o.batch) +
                                                 " into equal micro-batches");
  }
  train::CheckpointPolicy checkpoint;
  try {
    checkpoint = train::CheckpointPolicy::parse(o.checkpoint);
  } catch (const Error& e) {
    throw Error(ErrorCode::kInvalidArgument, "--checkpoint: " + e.cause());
  }
  const train::Precision precision = train::parse_precision(o.precision);

  std::unique_ptr<Allocator> allocator;
  std::unique_ptr<train::Context> ctx;
  try {
    allocator = std::make_unique<Allocator>(device, memory);
    ctx = std::make_unique<train::Context>(*allocator, train::ContextOptions{.threads = o.threads});
  } catch (const OutOfMemory& e) {
    throw Error(ErrorCode::kInvalidArgument, "--memory " + o.memory + ": " + e.cause().substr(0, e.cause().find('\n')));
  } catch (const Error& e) {
    throw Error(ErrorCode::kInvalidArgument, "--device " + o.device + ": " + e.cause());
  }
  json batch_search_json = nullptr;
  if (o.batch == 0) {  // --batch auto
    if (memory.limit == 0) {
      throw Error(ErrorCode::kInvalidArgument, "--batch auto needs a memory limit to fit: --memory grow:LIMIT or prealloc:SIZE");
    }
    const train::BatchSearchResult found = train::find_max_batch(*ctx, train_config(o, 2, 0), {.min_batch = 2, .max_batch = 65536});
    if (found.batch == 0) {
      throw Error(ErrorCode::kInvalidArgument, "--batch auto: not even a batch of 2 fits --memory " + o.memory);
    }
    o.batch = static_cast<int>(found.batch);
    std::string tried;
    json trials = json::array();
    for (const train::BatchTrial& t : found.trials) {
      tried += (tried.empty() ? "" : ", ") + std::to_string(t.batch) + (t.fits ? " fits" : " runs out");
      trials.push_back({{"batch", t.batch}, {"fits", t.fits}, {"peak_in_use_bytes", t.peak_in_use_bytes},
                        {"reserved_bytes", t.reserved_bytes}, {"seconds", t.seconds}});
    }
    std::cout << "sluice train: --batch auto: " << found.batch << " under " << describe_memory(memory) << " (planner's guess "
              << found.planner_guess << " from " << found.plans << " dry runs; " << found.trials.size()
              << " real trials: " << tried << ")\n";
    batch_search_json = {{"batch", found.batch}, {"planner_guess", found.planner_guess}, {"plans", found.plans},
                         {"trials", trials}};
    if (!o.no_eval) {  // the search covers the steps; the evaluation (batch 256) must fit too
      train::PlanConfig with_eval{.train = train_config(o, o.batch, 0), .threads = ctx->threads(), .allocator = memory,
                                  .eval_batch = kEvalBatch, .epochs = 2};
      const train::MemoryPlan p = train::plan_peak(with_eval);
      if (!p.fits) {
        std::cout << "  warning: the evaluation (batch " << kEvalBatch << ") would not fit --memory " << o.memory
                  << " (planner: " << p.failure << "); pass --no-eval or a larger limit\n";
      }
    }
  }
  if (accumulate_auto) {
    if (memory.limit == 0) {
      throw Error(ErrorCode::kInvalidArgument, "--accumulate auto needs a memory limit to fit: --memory grow:LIMIT or prealloc:SIZE");
    }
    const train::AccumulationSearchResult found = train::find_accumulation(*ctx, train_config(o, o.batch, 0));
    if (found.accumulate == 0) {
      throw Error(ErrorCode::kInvalidArgument, "--accumulate auto: not even micro-batches of 1 fit --memory " + o.memory);
    }
    o.accumulate = found.accumulate;
    std::string tried;
    json trials = json::array();
    for (const train::BatchTrial& t : found.trials) {
      tried += (tried.empty() ? "" : ", ") + std::to_string(t.batch) + (t.fits ? " fits" : " runs out");
      trials.push_back({{"micro_batch", t.batch}, {"fits", t.fits}, {"peak_in_use_bytes", t.peak_in_use_bytes},
                        {"seconds", t.seconds}});
    }
    std::cout << "sluice train: --accumulate auto: " << found.accumulate << " micro-batches of " << o.batch / found.accumulate
              << " for the batch of " << o.batch << " under " << describe_memory(memory) << " (planner's guess "
              << found.planner_guess << " from " << found.plans << " dry runs; " << found.trials.size()
              << " real trials, micro-batches: " << tried << ")\n";
    batch_search_json = {{"accumulate", found.accumulate}, {"planner_guess", found.planner_guess},
                         {"plans", found.plans}, {"trials", trials}};
  }
  std::optional<train::Profiler> profiler;
  if (!o.profile.empty()) profiler.emplace(*allocator);

  Loader train_loader = make_pipeline(dir / "train", info, true, o.batch, o.seed, device, ctx->native_stream())
                            .build({.threads = o.loader_threads, .seed = o.seed});
  Loader test_loader = make_pipeline(dir / "test", info, false, 256, o.seed, device, ctx->native_stream())
                           .build({.threads = o.loader_threads, .seed = o.seed});
  const std::int64_t per_epoch = train_loader.batches_per_epoch();
  if (per_epoch < 1) {
    throw Error(ErrorCode::kInvalidArgument, "the training split has fewer images than one batch of " +
                                                 std::to_string(o.batch), (dir / "train").string());
  }
  const std::int64_t total_steps = o.steps > 0 ? o.steps : per_epoch * o.epochs;
  const int epochs = static_cast<int>((total_steps + per_epoch - 1) / per_epoch);

  o.model = info.name;
  train::TrainSetup setup = train::make_training(*ctx, train_config(o, o.batch, total_steps));
  if (profiler) setup.trainer.profiler = &*profiler;
  const float lr = setup.learning_rate;
  std::unique_ptr<train::Sequential>& model = setup.model;
  std::unique_ptr<train::Optimizer>& optimizer = setup.optimizer;
  std::unique_ptr<train::MagnitudePruner> pruner;
  if (o.prune > 0) pruner = std::make_unique<train::MagnitudePruner>(model->parameters(), prune_schedule(o, total_steps));
  train::Trainer trainer(*ctx, *model, *optimizer, setup.trainer);

  std::cout << "sluice train: " << info.name << " (" << model->parameter_count() << " parameters) on "
            << dir.string() << ", " << to_string(device) << " with " << ctx->threads() << " training thread(s), "
            << o.loader_threads << " loader thread(s)\n"
            << "  " << optimizer->describe() << ", cosine schedule with " << total_steps / 20 << " warmup steps; batch "
            << o.batch << ", " << epochs << " epoch(s) of " << per_epoch << " steps" << (o.steps > 0 ? " (--steps)" : "")
            << "; precision " << train::to_string(setup.trainer.precision) << "\n"
            << "  memory: " << describe_memory(memory) << " (--memory)" << (profiler ? ", profiling to " + o.profile : "")
            << "\n";
  const std::string micro_batches =
      std::to_string(o.accumulate) + " micro-batches of " + std::to_string(o.batch / o.accumulate);
  std::cout << "  accumulation: " << (o.accumulate == 1 ? std::string("none") : micro_batches)
            << "; gradient checkpointing: " << checkpoint.to_string();
  if (checkpoint.enabled()) {
    std::cout << " (segments of " << std::min(checkpoint.segment_length(model->size()), model->size()) << " of "
              << model->size() << " layers)";
  }
  std::cout << "\n";
  if (pruner) {
    const train::PolynomialDecay& s = pruner->schedule();
    std::cout << "  magnitude pruning of " << pruner->masks().size() << " weight tensors to sparsity " << s.final_sparsity
              << ": polynomial decay (power " << s.power << ") over steps " << s.begin_step << "-" << s.end_step
              << ", masks updated every " << s.frequency << " steps\n";
  }

  InterruptGuard interrupt;
  std::atomic<std::uint64_t> done{0};
  json per_epoch_json = json::array();
  std::array<std::uint64_t, kTensorCategoryCount> peak_by_category{};
  std::uint64_t peak_in_use = 0;
  std::uint64_t peak_reserved = 0;
  double train_seconds_total = 0, pipeline_busy_total = 0, wall_total = 0;
  std::int64_t images_total = 0;
  double timed_seconds = 0;  // step time after the warmup steps
  std::int64_t timed_images = 0;
  train::BatchResult last_test;
  Stopwatch run_clock;
  {
    ProgressLine progress("train", static_cast<std::uint64_t>(total_steps * o.batch), done, stderr_is_terminal() && !o.json);
    for (int e = 0; e < epochs; ++e) {
      allocator->reset_peak();
      const double busy_before = pipeline_busy_seconds(train_loader);
      Stopwatch epoch_clock;
      double step_seconds = 0, wait_seconds = 0;
      train::BatchResult seen;
      Stopwatch wait_clock;
      auto range = train_loader.epoch(e);
      for (auto it = range.begin(); it != range.end(); ++it) {
        wait_seconds += wait_clock.seconds();
        if (InterruptGuard::interrupted()) throw Error(ErrorCode::kCancelled, "interrupted");
        Stopwatch step_clock;
        if (profiler) profiler->begin_step(trainer.steps() + 1);
        seen += run_on(trainer, *it, Use::kTrainingStep);
        if (pruner) pruner->after_step(*ctx, trainer.steps() - 1);
        if (profiler) {
          profiler->end_step();
          const auto [input_host, input_pinned] = pipeline_bytes(train_loader);
          profiler->sample(TensorCategory::kInputHost, input_host);
          profiler->sample(TensorCategory::kInputPinned, input_pinned);
        }
        const double step_time = step_clock.seconds();
        step_seconds += step_time;
        if (trainer.steps() > o.warmup_steps) {
          timed_seconds += step_time;
          timed_images += it->size();
        }
        done.fetch_add(static_cast<std::uint64_t>(it->size()), std::memory_order_relaxed);
        if (trainer.steps() == total_steps) break;
        wait_clock = Stopwatch();
      }
      const double epoch_seconds = epoch_clock.seconds();
      const double busy = pipeline_busy_seconds(train_loader) - busy_before;
      Stopwatch eval_clock;
      if (profiler && !o.no_eval) profiler->begin("evaluate");
      if (!o.no_eval) last_test = evaluate(trainer, test_loader);
      if (profiler && !o.no_eval) profiler->end();
      const double eval_seconds = eval_clock.seconds();

      const AllocatorStats mem = allocator->stats();
      const double sparsity = pruner ? train::measured_sparsity(*ctx, model->parameters()) : 0.0;
      for (std::size_t i = 0; i < kTensorCategoryCount; ++i) {
        peak_by_category[i] = std::max(peak_by_category[i], mem.by_category[i].peak_in_use_bytes);
      }
      peak_in_use = std::max(peak_in_use, mem.peak_in_use_bytes);
      peak_reserved = std::max(peak_reserved, mem.reserved_bytes);
      train_seconds_total += step_seconds;
      pipeline_busy_total += busy;
      wall_total += epoch_seconds;
      images_total += seen.images;
      // The loader's capacity: images per second of its workers' busy time, times its workers.
      const double pipeline_rate = busy > 0 ? static_cast<double>(seen.images) * o.loader_threads / busy : 0.0;
      const double train_rate = step_seconds > 0 ? static_cast<double>(seen.images) / step_seconds : 0.0;
      per_epoch_json.push_back({{"epoch", e + 1}, {"steps", trainer.steps()}, {"images", seen.images},
                                {"loss", seen.mean_loss()}, {"train_accuracy", seen.accuracy()},
                                {"test_loss", o.no_eval ? json(nullptr) : json(last_test.mean_loss())},
                                {"test_accuracy", o.no_eval ? json(nullptr) : json(last_test.accuracy())},
                                {"seconds", epoch_seconds}, {"train_seconds", step_seconds},
                                {"wait_seconds", wait_seconds}, {"eval_seconds", eval_seconds},
                                {"train_images_per_sec", train_rate}, {"pipeline_images_per_sec", pipeline_rate},
                                {"learning_rate", trainer.learning_rate()},
                                {"peak_device_bytes", mem.peak_in_use_bytes}, {"reserved_bytes", mem.reserved_bytes},
                                {"peak_in_use_bytes", mem.peak_in_use_bytes}, {"peak_reserved_bytes", mem.reserved_bytes},
                                {"peak_by_category", category_json(mem)}});
      const train::PrecisionStats ps = trainer.precision_stats();
      per_epoch_json.back().update(precision_json(ps));
      if (pruner) {
        per_epoch_json.back()["sparsity"] = sparsity;
        per_epoch_json.back()["target_sparsity"] = pruner->target();
      }
      progress.finish();
      char accuracy[32] = "not measured";
      if (!o.no_eval) std::snprintf(accuracy, sizeof accuracy, "%.2f%%", 100.0 * last_test.accuracy());
      char line[320];
      std::snprintf(line, sizeof line,
                    "  epoch %d/%d: loss %.4f, test accuracy %s, train %.0f images/s, pipeline %.0f images/s, "
                    "waited %.2f s for data, %s (+%s eval)\n",
                    e + 1, epochs, seen.mean_loss(), accuracy, train_rate, pipeline_rate, wait_seconds,
                    format_seconds(epoch_seconds).c_str(), format_seconds(eval_seconds).c_str());
      std::cout << line << "    memory: in use at peak " << format_bytes(mem.peak_in_use_bytes) << " (live tensors: "
                << category_text(mem) << "); reserved " << format_bytes(mem.reserved_bytes)
                << " (regions the allocator holds, in use or free)\n";
      if (ps.precision != train::Precision::kF32) std::cout << "    precision: " << precision_text(ps) << "\n";
      std::cout << std::flush;
      if (pruner) {
        std::snprintf(line, sizeof line, "    pruning: sparsity %.2f%% of the prunable weights (target %.2f%%)\n",
                      100.0 * sparsity, 100.0 * pruner->target());
        std::cout << line << std::flush;
      }
      if (trainer.steps() == total_steps) break;
    }
  }
  if (!o.save.empty()) {
    train::save_weights(*ctx, *model, o.save);
    std::cout << "  weights saved to " << o.save << "\n";
  }
  if (const Allocator* h = optimizer->host_state_allocator()) {
    std::cout << "  offload: optimizer state " << format_bytes(h->stats().in_use_bytes) << " in "
              << (device.is_cuda() ? "pinned" : "pageable") << " host memory; on the device only its staging ("
              << format_bytes(peak_by_category[index_of(TensorCategory::kOptimizerState)]) << ")\n";
  }
  json pruning = nullptr;
  if (pruner || !o.save_pruned.empty()) {
    const train::CompressedWeights packed = train::CompressedWeights::from_model(*ctx, *model);
    const double sparsity = train::measured_sparsity(*ctx, model->parameters());
    pruning = {{"sparsity", sparsity}, {"resident_bytes", packed.resident_bytes()}, {"dense_bytes", packed.dense_bytes()}};
    if (pruner) {
      const train::PolynomialDecay& s = pruner->schedule();
      pruning["target_sparsity"] = s.final_sparsity;
      pruning["begin_step"] = s.begin_step;
      pruning["end_step"] = s.end_step;
      pruning["frequency"] = s.frequency;
      json tensors = json::array();
      for (const train::PruneMask& m : pruner->masks()) {
        tensors.push_back({{"name", m.name}, {"elements", m.elements}, {"pruned", m.pruned()}});
      }
      pruning["tensors"] = tensors;
    }
    std::cout << "  pruning: sparsity " << 100.0 * sparsity << "% of the prunable weights; compressed weights "
              << format_bytes(packed.resident_bytes()) << " resident vs " << format_bytes(packed.dense_bytes()) << " dense\n";
    if (!o.save_pruned.empty()) {
      packed.save(o.save_pruned);
      const auto file_bytes = fs::file_size(o.save_pruned);
      pruning["file"] = o.save_pruned;
      pruning["file_bytes"] = file_bytes;
      std::cout << "  pruned weights saved to " << o.save_pruned << " (" << format_bytes(file_bytes) << ")\n";
    }
  }
  const double train_rate = timed_seconds > 0 ? static_cast<double>(timed_images) / timed_seconds : 0.0;
  const double pipeline_rate = pipeline_busy_total > 0 ? static_cast<double>(images_total) * o.loader_threads / pipeline_busy_total : 0.0;
  json by_category = json::object();
  for (std::size_t i = 0; i < kTensorCategoryCount; ++i) {
    by_category[std::string(to_string(static_cast<TensorCategory>(i)))] = peak_by_category[i];
  }
  char final_accuracy[32] = "not measured";
  if (!o.no_eval) std::snprintf(final_accuracy, sizeof final_accuracy, "%.2f%%", 100.0 * last_test.accuracy());
  std::cout << "sluice train: test accuracy " << final_accuracy << " after "
            << trainer.steps()
            << " steps in " << format_seconds(run_clock.seconds()) << " (" << format_seconds(cpu_seconds())
            << " of CPU time); " << static_cast<std::int64_t>(train_rate)
            << " training images/s; memory: peak in use " << format_bytes(peak_in_use) << ", reserved "
            << format_bytes(peak_reserved) << " (" << describe_memory(memory) << ")\n";
  if (profiler) {
    const auto [input_host, input_pinned] = pipeline_bytes(train_loader);
    profiler->sample(TensorCategory::kInputHost, input_host);
    profiler->sample(TensorCategory::kInputPinned, input_pinned);
    profiler->write_trace(o.profile);
    std::cout << profiler->summary_table([](std::uint64_t b) { return format_bytes(b); }) << "  trace written to "
              << o.profile << " (open in ui.perfetto.dev or chrome://tracing; scripts/render-trace draws it)\n";
  }
  if (o.json) {
    json result{
        {"model", info.name},
        {"data", dir.string()},
        {"device", to_string(device)},
        {"threads", ctx->threads()},
        {"loader_threads", o.loader_threads},
        {"batch", o.batch},
        {"accumulate", o.accumulate},
        {"micro_batch", o.batch / o.accumulate},
        {"checkpoint", checkpoint.to_string()},
        {"epochs", static_cast<int>(per_epoch_json.size())},
        {"steps", trainer.steps()},
        {"optimizer", o.optimizer},
        {"precision", std::string(train::to_string(precision))},
        {"learning_rate", lr},
        {"seed", o.seed},
        {"parameters", model->parameter_count()},
        {"images", images_total},
        {"seconds", run_clock.seconds()},
        {"cpu_seconds", cpu_seconds()},
        {"train_seconds", train_seconds_total},
        {"wall_train_seconds", wall_total},
        {"test_accuracy", o.no_eval ? json(nullptr) : json(last_test.accuracy())},
        {"test_loss", o.no_eval ? json(nullptr) : json(last_test.mean_loss())},
        {"warmup_steps", o.warmup_steps},
        {"final_loss", per_epoch_json.empty() ? 0.0 : per_epoch_json.back()["loss"].get<double>()},
        {"train_images_per_sec", train_rate},
        {"pipeline_images_per_sec", pipeline_rate},
        {"peak_device_bytes", peak_in_use},
        {"reserved_bytes", peak_reserved},
        {"peak_in_use_bytes", peak_in_use},
        {"peak_reserved_bytes", peak_reserved},
        {"memory", {{"mode", memory.mode == AllocatorMode::kPreallocate ? "prealloc" : "grow"},
                    {"limit_bytes", memory.limit}, {"text", o.memory}}},
        {"batch_search", batch_search_json},
        {"profile", o.profile.empty() ? json(nullptr) : json(o.profile)},
        {"peak_by_category", by_category},
        {"per_epoch", per_epoch_json},
    };
    result.update(precision_json(trainer.precision_stats()));
    if (!pruning.is_null()) result["pruning"] = pruning;
    if (const Allocator* h = optimizer->host_state_allocator()) {
      result["offload"] = {{"what", o.offload}, {"host_state_bytes", h->stats().in_use_bytes},
                           {"host_reserved_bytes", h->stats().reserved_bytes},
                           {"host_memory", device.is_cuda() ? "pinned" : "pageable"}};
    }
    std::cout << result.dump() << "\n";
  }
  return 0;
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model of the training core on an image folder");
  auto* dataset = cmd->add_option("--dataset", o->dataset, "A prepared data set under --data-root")
                      ->check(CLI::IsMember({"fashion-mnist"}));
  auto* data = cmd->add_option("--data", o->data, "A folder with train/ and test/ image folders")->check(CLI::ExistingDirectory);
  dataset->excludes(data);
  cmd->add_option("--data-root", o->data_root, "Where `sluice prepare` wrote --dataset")->capture_default_str();
  add_model_options(cmd, *o);
  auto* epochs = cmd->add_option("--epochs", o->epochs, "Epochs (default: 3 for fashion-cnn, 15 for cifar10-separable)")
                     ->check(CLI::PositiveNumber);
  auto* steps = cmd->add_option("--steps", o->steps, "Stop after N training steps instead")->check(CLI::PositiveNumber);
  epochs->excludes(steps);
  cmd->add_option("--loader-threads", o->loader_threads, "Pipeline worker threads")->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--save", o->save, "Write the trained weights here");
  cmd->add_option("--warmup-steps", o->warmup_steps, "Leave the first N steps out of train_images_per_sec")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--profile", o->profile, "Write a Chrome trace of the training memory (per category, over time) here");
  cmd->add_flag("--json", o->json, "End stdout with one JSON object");
  auto* prune = cmd->add_option("--prune", o->prune, "Magnitude pruning to this final sparsity (0 < S < 1)")
                    ->check(CLI::Range(0.0, 0.999));
  cmd->add_option("--prune-begin", o->prune_begin, "First step of the pruning schedule (default 0)")
      ->check(CLI::NonNegativeNumber)->needs(prune);
  cmd->add_option("--prune-end", o->prune_end, "Step the final sparsity is reached (default: about 75% of the steps)")
      ->check(CLI::NonNegativeNumber)->needs(prune);
  cmd->add_option("--prune-frequency", o->prune_frequency, "Recompute the masks every N steps (default 100)")
      ->check(CLI::PositiveNumber)->needs(prune);
  cmd->add_option("--save-pruned", o->save_pruned, "Write the weights compressed (bitmap + nonzero values) here");
  cmd->callback([o, dataset, data] {
    if (dataset->count() == 0 && data->count() == 0) throw CLI::RequiredError("--dataset or --data");
    const int code = run_train(*o);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace sluice::cli
