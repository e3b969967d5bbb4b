// `sluice train`: trains one of the training core's models (sluice/train/models.hpp) on an image
// folder with train/ and test/ splits (or tar shards of each), fed by two sluice pipelines. The
// loop is the library's epoch runner (sluice/train/epoch_runner.hpp), taking the loaders' batches
// through sluice/loader_batches.hpp: it only pulls the next batch, while the loader decodes,
// augments and batches ahead on its own threads, and the time it waits for one is reported. This
// file builds the pipelines, the model and the runner with its hooks, and finishes (saved
// weights, pruning, profile); train_sizing.cpp checks the flags and runs the --batch/--accumulate
// auto search and the job's plan; train_report.cpp prints.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.hpp"
#include "cli/console.hpp"
#include "cli/train_job.hpp"
#include "cli/train_options.hpp"
#include "cli/train_report.hpp"
#include "cli/train_sizing.hpp"
#include "pipeline/json_text.hpp"
#include "sluice/loader_batches.hpp"
#include "sluice/sluice.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/batch_search.hpp"
#include "sluice/train/weights_file.hpp"
#include "sluice/train/compressed_weights.hpp"
#include "sluice/train/context.hpp"
#include "sluice/train/epoch_runner.hpp"
#include "sluice/train/gradient_checkpointing.hpp"
#include "sluice/train/job_plan.hpp"
#include "sluice/train/models.hpp"
#include "sluice/train/out_of_memory.hpp"
#include "sluice/train/planner.hpp"
#include "sluice/train/precision.hpp"
#include "sluice/train/profiler.hpp"
#include "sluice/train/pruning.hpp"
#include "sluice/train/train_config.hpp"
#include "sluice/train/trainer.hpp"

namespace sluice::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

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

// The training allocator and context: the job's allocator (its planned share held in the job's
// budget) under --memory-limit, else one of --memory's mode.
struct TrainingMemory {
  std::unique_ptr<Allocator> allocator;
  std::unique_ptr<train::Context> ctx;
};

TrainingMemory make_training_memory(const TrainOptions& o, const CheckedFlags& flags, const TrainJob* job) {
  TrainingMemory m;
  try {
    m.allocator = job ? job->budgets.make_training_allocator(job->plan) : std::make_unique<Allocator>(flags.device, flags.memory);
    m.ctx = std::make_unique<train::Context>(*m.allocator, train::ContextOptions{.threads = o.threads});
  } catch (const OutOfMemory& e) {
    throw Error(ErrorCode::kInvalidArgument, "--memory " + o.memory + ": " + e.cause().substr(0, e.cause().find('\n')));
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kOutOfBudget) throw;
    throw Error(ErrorCode::kInvalidArgument, "--device " + o.device + ": " + e.cause());
  }
  return m;
}

void run_train(TrainOptions o) {
  const std::uint64_t baseline_rss = resident_peak_bytes();  // before anything of the run is held
  const CheckedFlags flags = check_flags(o);
  check_outputs(o);  // before the run: a path that cannot be written fails now, not after training
  json batch_search = nullptr;
  std::unique_ptr<TrainJob> job;
  if (flags.limits.on()) {
    const int threads = o.threads > 0 ? o.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    job = plan_train_job(o, flags, threads, batch_search);
  }
  TrainingMemory memory = make_training_memory(o, flags, job.get());
  train::Context& ctx = *memory.ctx;
  if (!job) batch_search = fit_auto_size(o, flags.auto_size, ctx, flags.memory);
  std::optional<train::Profiler> profiler;
  if (!o.profile.empty()) profiler.emplace(*memory.allocator);

  const train::ModelInfo& info = train::model_info(o.model);
  void* stream = ctx.native_stream();
  Loader train_loader = make_pipeline(flags.data.train, info, PipelineUse::kTraining, o.batch, o.seed, flags.device,
                                      stream, job ? job->cache_bytes(0) : 0)
                            .build(job ? job->build_options(o, 0) : BuildOptions{.threads = o.loader_threads, .seed = o.seed});
  train_loader.set_wait_check(&InterruptGuard::interrupted, kInterruptPoll);  // Ctrl-C ends a wait for a batch
  std::optional<Loader> test_loader;  // none with --no-eval
  if (!o.no_eval) {
    test_loader = make_pipeline(flags.data.test, info, PipelineUse::kEvaluation, kEvalBatch, o.seed, flags.device,
                                stream, job ? job->cache_bytes(1) : 0)
                      .build(job ? job->build_options(o, 1) : BuildOptions{.threads = o.loader_threads, .seed = o.seed});
    test_loader->set_wait_check(&InterruptGuard::interrupted, kInterruptPoll);
  }
  LoaderBatches train_batches(train_loader, job && job->cache_bytes(0) > 0 ? ShortBatch::kSkip : ShortBatch::kDeliver);
  const std::int64_t per_epoch = train_batches.batches_per_epoch();
  if (per_epoch < 1) {
    throw Error(ErrorCode::kInvalidArgument, "the training split has fewer images than one batch of " +
                                                 std::to_string(o.batch), flags.data.where);
  }
  const std::int64_t total_steps = o.steps > 0 ? o.steps : per_epoch * o.epochs;

  train::TrainSetup setup = train::make_training(ctx, train_config(o, o.batch, total_steps));
  if (profiler) setup.trainer.profiler = &*profiler;
  if (job) setup.optimizer->set_host_state_budget(job->budgets.host);
  std::optional<train::MagnitudePruner> pruner;
  if (o.prune > 0) pruner.emplace(setup.model->parameters(), prune_schedule(o, total_steps));
  train::Trainer trainer(ctx, *setup.model, *setup.optimizer, setup.trainer);
  const TrainRun run{.options = o, .model = info, .data = flags.data.where, .device = flags.device,
                     .memory = flags.memory, .checkpoint = flags.checkpoint, .ctx = ctx, .setup = setup, .trainer = trainer,
                     .pruner = pruner ? &*pruner : nullptr, .steps = total_steps,
                     .epochs = (total_steps + per_epoch - 1) / per_epoch, .steps_per_epoch = per_epoch,
                     .job = job ? &job->plan : nullptr, .baseline_rss_bytes = baseline_rss};
  print_run_plan(run);

  std::optional<LoaderBatches> test_batches;
  if (test_loader) test_batches.emplace(*test_loader);
  train::TrainerStep step(trainer);
  train::EpochRunner runner(step, train_batches,
                            {.epochs = run.epochs, .max_steps = total_steps, .warmup_steps = o.warmup_steps,
                             .evaluation = test_batches ? &*test_batches : nullptr, .allocator = memory.allocator.get()});
  EpochPrinter printer(run);
  runner.add_hook(printer);
  std::optional<train::JobMemoryHook> job_memory;
  if (job) {
    std::vector<train::JobMemoryHook::Pipeline> parts{{"training pipeline", job->train_part, &train_batches}};
    if (test_batches) parts.push_back({"evaluation pipeline", job->eval_part, &*test_batches});
    runner.add_hook(job_memory.emplace(job->plan, job->budgets, std::move(parts)));
  }
  std::optional<train::ProfilingHook> profiling;
  if (profiler) runner.add_hook(profiling.emplace(*profiler, train_batches));
  std::optional<train::PruningHook> pruning;
  if (pruner) runner.add_hook(pruning.emplace(*pruner, ctx, setup.model->parameters()));
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
    // dump_json: a data folder named with bytes that are not UTF-8 stays escaped (docs/stats.md).
    std::cout << dump_json(run_json(run, report, printer.per_epoch_json(), batch_search, pruning_json, clock.seconds()))
              << "\n";
  }
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model of the training core on an image folder");
  const DataOptions source = add_data_options(cmd, *o);
  CLI::Option* dataset = source.dataset;
  CLI::Option* data = source.data;
  CLI::Option* shards = source.shards;
  add_model_options(cmd, *o);
  auto* epochs = cmd->add_option("--epochs", o->epochs, "Epochs (default: the model's, 3 for fashion-cnn, 15 for cifar10-separable)")
                     ->check(CLI::PositiveNumber);
  auto* steps = cmd->add_option("--steps", o->steps, "Stop after N training steps instead")->check(CLI::PositiveNumber);
  epochs->excludes(steps);
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
