// `sluice train`: trains one of the training core's models (sluice/train/models.hpp) on an image
// folder with train/ and test/ splits (or tar shards of each), fed by two sluice pipelines. The
// loop is the library's epoch runner (sluice/train/epoch_runner.hpp), taking the loaders' batches
// through sluice/loader_batches.hpp: it only pulls the next batch, while the loader decodes,
// augments and batches ahead on its own threads, and the time it waits for one is reported. This
// file reads the flags, runs the --batch/--accumulate auto search, builds the pipelines, the model
// and the runner with its hooks, and finishes (saved weights, pruning, profile); train_report.cpp
// prints.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
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
#include "cli/train_report.hpp"
#include "sluice/loader_batches.hpp"
#include "sluice/sluice.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/batch_search.hpp"
#include "sluice/train/checkpoint.hpp"
#include "sluice/train/compressed_weights.hpp"
#include "sluice/train/context.hpp"
#include "sluice/train/epoch_runner.hpp"
#include "sluice/train/gradient_checkpointing.hpp"
#include "sluice/train/models.hpp"
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

// Where the splits come from: train/ and test/ of --data (or of the prepared --dataset), or
// --shards and --test-shards.
struct Splits {
  spec::Source train;
  spec::Source test;
  std::string where;  // for messages and --json's "data"
};

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

// What a pipeline feeds: training steps (shuffled, augmented, full batches) or the evaluation.
enum class PipelineUse { kTraining, kEvaluation };

// The pipelines for a model: greyscale or RGB from its input, the data set's mean and std, and
// CIFAR's augmentation (random crop with padding 4, horizontal flip) for the RGB model's training.
// For a CUDA device the batches go there through the loader's pinned transfer ring, handed over
// to `stream` (the training context's) with an event: no pageable copy, no host wait per step.
Pipeline make_pipeline(const spec::Source& source, const train::ModelInfo& model, PipelineUse use, std::int64_t batch,
                       std::uint64_t seed, DeviceId device, void* stream) {
  const bool grey = model.channels == 1;
  const bool training = use == PipelineUse::kTraining;
  Pipeline p(PipelineSpec{.source = source});
  if (training) p.shuffle_files(seed);
  p.read().decode_jpeg({.color = grey ? Color::kGrey : Color::kRGB});
  if (training && !grey) p.random_crop(model.width, model.height, {.padding = 4}).flip_horizontal(0.5);
  std::vector<float> mean = grey ? std::vector<float>{0.2860f} : std::vector<float>{0.4914f, 0.4822f, 0.4465f};
  std::vector<float> std = grey ? std::vector<float>{0.3530f} : std::vector<float>{0.2470f, 0.2435f, 0.2616f};
  p.normalize({.mean = std::move(mean), .std = std::move(std), .layout = Layout::kNCHW, .dtype = DType::kF32});
  // Training drops the short last batch: BatchNorm's statistics over a handful of images are noise.
  p.batch(static_cast<int>(batch), {.drop_last = training});
  if (device.is_cuda()) p.to_device(device, {.stream = stream});
  return p;
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

// Which size the memory limit is to choose: --batch auto or --accumulate auto (not both).
enum class AutoSize { kNone, kBatch, kAccumulate };

// The flags checked and read before anything loads: a bad value fails at once, not after the
// first epoch's data. Fills in the model's defaults (model, epochs) and the numbers of --batch
// and --accumulate (a size left to the search stays 0 for --batch, 1 for --accumulate).
struct CheckedFlags {
  DeviceId device;
  Splits data;
  AllocatorOptions memory;
  AutoSize auto_size = AutoSize::kNone;
  train::CheckpointPolicy checkpoint;
};

CheckedFlags check_flags(TrainOptions& o) {
  CheckedFlags f{.device = parse_device(o.device), .data = data_splits(o)};
  if (o.model.empty()) o.model = o.dataset == "fashion-mnist" ? "fashion-cnn" : "cifar10-separable";
  o.model = train::model_info(o.model).name;
  if (o.epochs == 0) o.epochs = o.model == "fashion-cnn" ? kFashionEpochs : kCifarEpochs;
  f.memory = parse_memory(o.memory);
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

// After --batch auto: the evaluation's batches must fit the limit too, which the search (of
// training steps) did not try; the planner says whether they do.
void warn_if_evaluation_does_not_fit(const TrainOptions& o, const train::Context& ctx, const AllocatorOptions& memory) {
  if (o.no_eval) return;
  const train::PlanConfig with_eval{.train = train_config(o, o.batch, 0), .threads = ctx.threads(), .allocator = memory,
                                    .eval_batch = kEvalBatch, .epochs = 2};
  const train::MemoryPlan p = train::plan_peak(with_eval);
  if (!p.fits) {
    std::cout << "  warning: the evaluation (batch " << kEvalBatch << ") would not fit --memory " << o.memory
              << " (planner: " << p.failure << "); pass --no-eval or a larger limit\n";
  }
}

// --batch auto or --accumulate auto: real steps on the training allocator find the largest
// batch, or the fewest micro-batches for the batch given, that fit --memory's limit. Sets
// o.batch or o.accumulate, says what it found and tried, and returns the "batch_search" JSON
// object (null for AutoSize::kNone).
json fit_auto_size(TrainOptions& o, AutoSize what, train::Context& ctx, const AllocatorOptions& memory) {
  if (what == AutoSize::kNone) return nullptr;
  const bool batch = what == AutoSize::kBatch;
  const std::string flag = batch ? "--batch auto" : "--accumulate auto";
  if (memory.limit == 0) {
    throw Error(ErrorCode::kInvalidArgument, flag + " needs a memory limit to fit: --memory grow:LIMIT or prealloc:SIZE");
  }
  // The two searches' results alike: what fits (0: nothing), the planner's guess, the trials
  // (of batches, or of micro-batches).
  std::int64_t found = 0, guess = 0;
  int plans = 0;
  std::vector<train::BatchTrial> trials;
  if (batch) {
    // Only batches that --accumulate divides into equal micro-batches: its multiples.
    const train::BatchSearchOptions range{.min_batch = std::max(2, o.accumulate), .max_batch = 65536,
                                          .granularity = o.accumulate};
    train::BatchSearchResult r = train::find_max_batch(ctx, train_config(o, range.min_batch, 0), range);
    found = r.batch, guess = r.planner_guess, plans = r.plans, trials = std::move(r.trials);
  } else {
    train::AccumulationSearchResult r = train::find_accumulation(ctx, train_config(o, o.batch, 0));
    found = r.accumulate, guess = r.planner_guess, plans = r.plans, trials = std::move(r.trials);
  }
  if (found == 0) {
    throw Error(ErrorCode::kInvalidArgument, flag + ": not even " + (batch ? "a batch of 2 fits" : "micro-batches of 1 fit") +
                                                 " --memory " + o.memory);
  }
  std::string tried;
  json trial_json = json::array();
  for (const train::BatchTrial& t : trials) {
    tried += (tried.empty() ? "" : ", ") + std::to_string(t.batch) + (t.fits ? " fits" : " runs out");
    json j{{batch ? "batch" : "micro_batch", t.batch}, {"fits", t.fits}, {"peak_in_use_bytes", t.peak_in_use_bytes},
           {"seconds", t.seconds}};
    if (batch) j["reserved_bytes"] = t.reserved_bytes;
    trial_json.push_back(std::move(j));
  }
  std::string what_found = std::to_string(found);
  if (!batch) what_found += " micro-batches of " + std::to_string(o.batch / found) + " for the batch of " + std::to_string(o.batch);
  std::cout << "sluice train: " << flag << ": " << what_found << " under " << describe_memory(memory)
            << " (planner's guess " << guess << " from " << plans << " dry runs; " << trials.size() << " real trials"
            << (batch ? ": " : ", micro-batches: ") << tried << ")\n";
  if (batch) {
    o.batch = static_cast<int>(found);
    warn_if_evaluation_does_not_fit(o, ctx, memory);
  } else {
    o.accumulate = static_cast<int>(found);
  }
  return {{batch ? "batch" : "accumulate", found}, {"planner_guess", guess}, {"plans", plans}, {"trials", trial_json}};
}

// After the run: the pruning summary (and the compressed weights written with --save-pruned),
// as text and as the "pruning" JSON object; null without pruning or --save-pruned.
json finish_pruning(const TrainRun& run) {
  const TrainOptions& o = run.options;
  if (run.pruner == nullptr && o.save_pruned.empty()) return nullptr;
  train::Sequential& model = *run.setup.model;
  const train::CompressedWeights packed = train::CompressedWeights::from_model(run.ctx, model);
  const double sparsity = train::measured_sparsity(run.ctx, model.parameters());
  json pruning{{"sparsity", sparsity}, {"resident_bytes", packed.resident_bytes()}, {"dense_bytes", packed.dense_bytes()}};
  if (run.pruner != nullptr) {
    const train::PolynomialDecay& s = run.pruner->schedule();
    pruning["target_sparsity"] = s.final_sparsity;
    pruning["begin_step"] = s.begin_step;
    pruning["end_step"] = s.end_step;
    pruning["frequency"] = s.frequency;
    json tensors = json::array();
    for (const train::PruneMask& m : run.pruner->masks()) {
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
  return pruning;
}

// After the run, before the summary: the weights (--save) and where the offloaded optimizer
// state lived.
void save_and_report_offload(const TrainRun& run, const train::RunReport& report) {
  if (!run.options.save.empty()) {
    train::save_weights(run.ctx, *run.setup.model, run.options.save);
    std::cout << "  weights saved to " << run.options.save << "\n";
  }
  if (const Allocator* h = run.setup.optimizer->host_state_allocator()) {
    std::cout << "  offload: optimizer state " << format_bytes(h->stats().in_use_bytes) << " in "
              << (run.device.is_cuda() ? "pinned" : "pageable") << " host memory; on the device only its staging ("
              << format_bytes(report.peak_by_category[index_of(TensorCategory::kOptimizerState)]) << ")\n";
  }
}

void run_train(TrainOptions o) {
  const CheckedFlags flags = check_flags(o);
  std::unique_ptr<Allocator> allocator;
  std::unique_ptr<train::Context> ctx;
  try {
    allocator = std::make_unique<Allocator>(flags.device, flags.memory);
    ctx = std::make_unique<train::Context>(*allocator, train::ContextOptions{.threads = o.threads});
  } catch (const OutOfMemory& e) {
    throw Error(ErrorCode::kInvalidArgument, "--memory " + o.memory + ": " + e.cause().substr(0, e.cause().find('\n')));
  } catch (const Error& e) {
    throw Error(ErrorCode::kInvalidArgument, "--device " + o.device + ": " + e.cause());
  }
  const json batch_search = fit_auto_size(o, flags.auto_size, *ctx, flags.memory);
  std::optional<train::Profiler> profiler;
  if (!o.profile.empty()) profiler.emplace(*allocator);

  const train::ModelInfo& info = train::model_info(o.model);
  Loader train_loader = make_pipeline(flags.data.train, info, PipelineUse::kTraining, o.batch, o.seed,
                                      flags.device, ctx->native_stream())
                            .build({.threads = o.loader_threads, .seed = o.seed});
  Loader test_loader = make_pipeline(flags.data.test, info, PipelineUse::kEvaluation, kEvalBatch, o.seed, flags.device,
                                      ctx->native_stream())
                           .build({.threads = o.loader_threads, .seed = o.seed});
  const std::int64_t per_epoch = train_loader.batches_per_epoch();
  if (per_epoch < 1) {
    throw Error(ErrorCode::kInvalidArgument, "the training split has fewer images than one batch of " +
                                                 std::to_string(o.batch), flags.data.where);
  }
  const std::int64_t total_steps = o.steps > 0 ? o.steps : per_epoch * o.epochs;

  train::TrainSetup setup = train::make_training(*ctx, train_config(o, o.batch, total_steps));
  if (profiler) setup.trainer.profiler = &*profiler;
  std::optional<train::MagnitudePruner> pruner;
  if (o.prune > 0) pruner.emplace(setup.model->parameters(), prune_schedule(o, total_steps));
  train::Trainer trainer(*ctx, *setup.model, *setup.optimizer, setup.trainer);
  const TrainRun run{.options = o, .model = info, .data = flags.data.where, .device = flags.device,
                     .memory = flags.memory, .checkpoint = flags.checkpoint, .ctx = *ctx, .setup = setup, .trainer = trainer,
                     .pruner = pruner ? &*pruner : nullptr, .steps = total_steps,
                     .epochs = (total_steps + per_epoch - 1) / per_epoch, .steps_per_epoch = per_epoch};
  print_run_plan(run);

  LoaderBatches train_batches(train_loader), test_batches(test_loader);
  train::TrainerStep step(trainer);
  train::EpochRunner runner(step, train_batches,
                            {.epochs = run.epochs, .max_steps = total_steps, .warmup_steps = o.warmup_steps,
                             .evaluation = o.no_eval ? nullptr : &test_batches, .allocator = allocator.get()});
  EpochPrinter printer(run);
  runner.add_hook(printer);
  std::optional<train::ProfilingHook> profiling;
  if (profiler) runner.add_hook(profiling.emplace(*profiler, train_batches));
  std::optional<train::PruningHook> pruning;
  if (pruner) runner.add_hook(pruning.emplace(*pruner, *ctx, setup.model->parameters()));
  const Stopwatch clock;  // the run's seconds: its steps, evaluations and what follows them
  const train::RunReport& report = runner.run();

  save_and_report_offload(run, report);
  const json pruning_json = finish_pruning(run);
  print_summary(run, report, clock.seconds());
  if (profiler) {
    profiling->sample_input();
    profiler->write_trace(o.profile);
    std::cout << profiler->summary_table([](std::uint64_t b) { return format_bytes(b); }) << "  trace written to "
              << o.profile << " (open in ui.perfetto.dev or chrome://tracing; scripts/render-trace draws it)\n";
  }
  if (o.json) {
    std::cout << run_json(run, report, printer.per_epoch_json(), batch_search, pruning_json, clock.seconds()).dump()
              << "\n";
  }
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model of the training core on an image folder");
  auto* dataset = cmd->add_option("--dataset", o->dataset, "A prepared data set under --data-root")
                      ->check(CLI::IsMember({"fashion-mnist"}));
  auto* data = cmd->add_option("--data", o->data, "A folder with train/ and test/ image folders")->check(CLI::ExistingDirectory);
  dataset->excludes(data);
  auto* shards = cmd->add_option("--shards", o->shards, "Tar shards of the training split (a pattern: brace ranges, globs)");
  shards->excludes(dataset)->excludes(data);
  cmd->add_option("--test-shards", o->test_shards, "Tar shards of the test split (with --shards)")->needs(shards);
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
  cmd->callback([o, dataset, data, shards] {
    if (dataset->count() + data->count() + shards->count() == 0) throw CLI::RequiredError("--dataset, --data or --shards");
    run_train(*o);
  });
}

}  // namespace sluice::cli
