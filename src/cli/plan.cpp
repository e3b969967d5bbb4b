// `sluice plan`: the training allocator's peak in use for `sluice train`'s flags, predicted by a
// dry run of the real training step (sluice/train/planner.hpp) in milliseconds, without data,
// computation or the memory itself; for --device cuda:N without a GPU too (the CUDA backend's
// workspaces are modelled, src/train/cuda/cuda_workspace.hpp). --batch auto: the largest batch whose dry run fits
// --memory's limit. --json ends stdout with one object.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cli/commands.hpp"
#include "cli/console.hpp"
#include "cli/train_job.hpp"
#include "cli/train_options.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"
#include "sluice/train/batch_search.hpp"
#include "sluice/train/models.hpp"
#include "sluice/train/planner.hpp"

namespace sluice::cli {
namespace {

using nlohmann::json;

// --memory-limit: the whole job's plan for train's flags (the data flags say where the data is;
// the pipelines' memory plans probe a few of its files). --batch auto and --accumulate auto: the
// planner's answers inside the job. Exits 1, after the report, when the job does not fit.
void run_job_plan(TrainOptions o) {
  if (o.data.empty() && o.dataset.empty() && o.shards.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "--memory-limit plans the input pipelines too: give --data DIR (or "
                                             "--dataset, or --shards) as to sluice train");
  }
  const DeviceId device = parse_device(o.device);  // cuda:N needs no GPU: its workspaces are modelled
  const JobLimits limits = parse_job_limits(o, device);
  Splits data = data_splits(o);
  const std::string where = data.where;
  apply_model_defaults(o);
  o.batch = parse_batch(o.batch_text);
  o.accumulate = parse_accumulate(o.accumulate_text);
  if (o.accumulate == 0 && o.batch == 0) {
    throw Error(ErrorCode::kInvalidArgument, "--accumulate auto keeps --batch as the effective batch: give a number");
  }
  const int threads = o.threads > 0 ? o.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const Stopwatch clock;
  JobPipelines pipelines(o, std::move(data), device);
  int searched = 0;
  const std::string under = " fits --memory-limit " + o.memory_limit;
  if (o.batch == 0) {
    const int granularity = std::max(1, o.accumulate);
    o.batch = std::max(2, granularity);
    const std::int64_t most = std::clamp<std::int64_t>(pipelines.training_items(), o.batch, 65536);
    o.batch = static_cast<int>(train::planned_job_batch(job_config(o, limits, device, threads, pipelines),
                                                        {.min_batch = o.batch, .max_batch = most, .granularity = granularity},
                                                        &searched));
    if (o.batch == 0) throw Error(ErrorCode::kOutOfBudget, "--batch auto: not even a batch of 2" + under);
  } else if (o.accumulate == 0) {
    o.accumulate = 1;
    o.accumulate = train::planned_job_accumulation(job_config(o, limits, device, threads, pipelines), &searched);
    if (o.accumulate == 0) throw Error(ErrorCode::kOutOfBudget, "--accumulate auto: not even micro-batches of 1" + under);
  }
  const train::JobPlan plan = train::plan_job(job_config(o, limits, device, threads, pipelines));
  const double seconds = clock.seconds();
  std::cout << "sluice plan: the whole job of sluice train: " << o.model << " on " << where << ", batch "
            << o.batch << (o.batch_text == "auto" ? " (--batch auto)" : "") << ", accumulate " << o.accumulate
            << (o.accumulate_text == "auto" ? " (--accumulate auto)" : "") << ", " << o.optimizer << ", " << threads
            << " training thread(s), " << o.loader_threads << " loader thread(s), " << o.epochs << " epoch(s)\n"
            << job_plan_text(plan);
  if (!plan.fits) std::cout << "  DOES NOT FIT: " << plan.failure << "\n";
  std::cout << "  (" << plan.dry_runs + searched << " dry run(s) in " << format_seconds(seconds) << ")\n";
  if (o.json) {
    const json result{{"model", o.model}, {"batch", o.batch}, {"batch_auto", o.batch_text == "auto"},
                      {"accumulate", o.accumulate}, {"accumulate_auto", o.accumulate_text == "auto"},
                      {"optimizer", o.optimizer}, {"threads", threads}, {"loader_threads", o.loader_threads},
                      {"epochs", o.epochs}, {"job_plan", job_plan_json(plan)}, {"fits", plan.fits},
                      {"dry_runs", plan.dry_runs + searched}, {"seconds", seconds}};
    std::cout << result.dump() << "\n";
  }
  if (!plan.fits) throw Error(ErrorCode::kOutOfBudget, "the job does not fit --memory-limit " + o.memory_limit + ": " + plan.failure);
}

void run_plan(TrainOptions o) {
  const DeviceId device = parse_device(o.device);  // cuda:N needs no GPU: its workspaces are modelled
  if (!o.memory_limit.empty()) {
    run_job_plan(std::move(o));
    return;
  }
  apply_model_defaults(o);  // the same model and epochs as train would run
  const train::ModelInfo& info = train::model_info(o.model);
  const AllocatorOptions memory = parse_memory(o.memory);
  int batch = parse_batch(o.batch_text);
  o.accumulate = parse_accumulate(o.accumulate_text);
  if (o.accumulate == 0) {
    throw Error(ErrorCode::kInvalidArgument, "sluice plan: --accumulate auto is for train (plan a number)");
  }
  const int epochs = o.epochs;
  const int threads = o.threads > 0 ? o.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));

  Stopwatch clock;
  train::PlanConfig pc;
  pc.train = train_config(o, batch == 0 ? 2 : batch, 0);
  pc.device = device;
  pc.threads = threads;
  pc.allocator = memory;
  pc.eval_batch = o.no_eval ? 0 : kEvalBatch;
  pc.epochs = epochs;
  int plans = 0;
  if (batch == 0) {
    if (memory.limit == 0) {
      throw Error(ErrorCode::kInvalidArgument, "--batch auto needs a memory limit to fit: --memory grow:LIMIT or prealloc:SIZE");
    }
    batch = static_cast<int>(train::planned_max_batch(pc, {.min_batch = 2, .max_batch = 65536}, &plans));
    if (batch == 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  "--batch auto: not even a batch of 2 fits --memory " + o.memory +
                      (o.no_eval ? std::string() : " with the evaluation (batch " + std::to_string(kEvalBatch) +
                                                       "); --no-eval plans the training steps alone"));
    }
    pc.train.batch = batch;
  }
  const train::TrainingMemoryPlan plan = train::plan_peak(pc);
  ++plans;
  const double seconds = clock.seconds();

  json by_category = json::object();
  std::string text;
  for (std::size_t i = 0; i < kTensorCategoryCount; ++i) {
    const std::string name(to_string(static_cast<TensorCategory>(i)));
    by_category[name] = plan.peak_by_category[i];
    if (plan.peak_by_category[i] > 0) text += "\n    " + name + ": " + format_bytes(plan.peak_by_category[i]);
  }
  std::cout << "sluice plan: " << info.name << " (" << plan.parameters << " parameters), batch " << batch
            << (o.batch_text == "auto" ? " (--batch auto)" : "") << ", " << o.optimizer << ", "
            << (device.is_host() ? std::to_string(threads) + " thread(s)" : to_string(device)) << ", memory "
            << describe_memory(memory) << "\n  planned for: " << plan.backend << "\n"
            << "  predicted peak in use: " << format_bytes(plan.peak_in_use_bytes) << " (" << plan.peak_in_use_bytes
            << " B; `sluice train` reports it as peak_device_bytes)\n"
            << "  training steps alone: " << format_bytes(plan.step_peak_in_use_bytes)
            << (o.no_eval ? std::string(" (--no-eval)")
                          : "; with the evaluation (batch " + std::to_string(kEvalBatch) + ")")
            << "\n  peak per category (each at its own highest):" << text << "\n"
            << "  reserved by the allocator: " << format_bytes(plan.reserved_bytes) << "\n";
  if (!plan.fits) std::cout << "  DOES NOT FIT: " << plan.failure << "\n";
  std::cout << "  (" << plans << " dry run(s) in " << format_seconds(seconds) << ")\n";
  if (o.json) {
    const json result{
        {"model", info.name},
        {"batch", batch},
        {"batch_auto", o.batch_text == "auto"},
        {"optimizer", o.optimizer},
        {"threads", threads},
        {"device", to_string(device)},
        {"backend", plan.backend},
        {"epochs_simulated", std::min(epochs, 2)},
        {"eval_batch", pc.eval_batch},
        {"memory",
         {{"mode", memory.mode == AllocatorMode::kPreallocate ? "prealloc" : "grow"},
          {"limit_bytes", memory.limit},
          {"text", o.memory}}},
        {"parameters", plan.parameters},
        {"predicted_peak_bytes", plan.peak_in_use_bytes},
        {"predicted_step_peak_bytes", plan.step_peak_in_use_bytes},
        {"predicted_reserved_bytes", plan.reserved_bytes},
        {"by_category", by_category},
        {"fits", plan.fits},
        {"failure", plan.fits ? json(nullptr) : json(plan.failure)},
        {"dry_runs", plans},
        {"seconds", seconds},
    };
    std::cout << result.dump() << "\n";
  }
  // A plan that does not fit is a failure of the command (exit 1), after its report.
  if (!plan.fits) {
    throw Error(ErrorCode::kOutOfBudget, "the training step does not fit --memory " + o.memory + " (the plan above says where)");
  }
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "Predict the training allocator's peak in use for `sluice train`'s flags, without running it; "
              "with --memory-limit, the whole job's plan (training, pipelines and caches)");
  add_model_options(cmd, *o);
  add_data_options(cmd, *o);
  cmd->add_option("--epochs", o->epochs,
                  "Epochs of the run (default: the model's, as train); from 2 on the evaluation's workspace carries over")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", o->json, "End stdout with one JSON object");
  cmd->callback([o] { run_plan(*o); });
}

}  // namespace sluice::cli
