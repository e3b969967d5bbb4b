// `sluice train`'s text and JSON reports: the plan, the epoch lines, the summary, the --json object.
#include "cli/train_report.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "cli/train_job.hpp"
#include "sluice/core/error.hpp"
#include "sluice/train/category.hpp"

namespace sluice::cli {
namespace {

using nlohmann::json;

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
    j[std::string(to_string(static_cast<TensorCategory>(i)))] = stats.by_category[i].peak_in_use_bytes;
  }
  return j;
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

// "90.89%", or "not measured" without an evaluation.
std::string accuracy_text(const std::optional<train::BatchResult>& evaluation) {
  if (!evaluation) return "not measured";
  char text[32];
  std::snprintf(text, sizeof text, "%.2f%%", 100.0 * evaluation->accuracy());
  return text;
}

json epoch_json(const train::EpochReport& r, const train::Trainer& trainer, std::int64_t epoch_number) {
  const std::optional<train::BatchResult>& test = r.evaluation;
  json j{{"epoch", epoch_number}, {"steps", r.steps}, {"images", r.train.images},
         {"loss", r.train.mean_loss()}, {"train_accuracy", r.train.accuracy()},
         {"test_loss", test ? json(test->mean_loss()) : json(nullptr)},
         {"test_accuracy", test ? json(test->accuracy()) : json(nullptr)},
         {"seconds", r.seconds}, {"train_seconds", r.step_seconds},
         {"wait_seconds", r.wait_seconds}, {"eval_seconds", r.evaluation_seconds},
         {"train_images_per_sec", r.train_images_per_sec()}, {"pipeline_images_per_sec", r.input_images_per_sec()},
         {"learning_rate", trainer.learning_rate()},
         {"peak_device_bytes", r.memory.peak_in_use_bytes}, {"reserved_bytes", r.memory.reserved_bytes},
         {"peak_in_use_bytes", r.memory.peak_in_use_bytes}, {"peak_reserved_bytes", r.memory.reserved_bytes},
         {"peak_by_category", category_json(r.memory)}};
  j.update(precision_json(trainer.precision_stats()));
  if (r.pruning) {
    j["sparsity"] = r.pruning->sparsity;
    j["target_sparsity"] = r.pruning->target_sparsity;
  }
  if (r.job_memory) j["job_memory"] = job_memory_json(*r.job_memory);
  return j;
}

}  // namespace

void print_run_plan(const TrainRun& run) {
  const TrainOptions& o = run.options;
  train::Sequential& model = *run.setup.model;
  std::cout << "sluice train: " << run.model.name << " (" << model.parameter_count() << " parameters) on "
            << run.data.string() << ", " << to_string(run.device) << " with " << run.ctx.threads()
            << " training thread(s), " << o.loader_threads << " loader thread(s)\n"
            << "  " << run.setup.optimizer->describe() << ", cosine schedule with " << run.steps / 20
            << " warmup steps; batch " << o.batch << ", " << run.epochs << " epoch(s) of " << run.steps_per_epoch
            << " steps" << (o.steps > 0 ? " (--steps)" : "") << "; precision "
            << train::to_string(run.setup.trainer.precision) << "\n"
            << "  memory: "
            << (run.job != nullptr && !run.job->hand_split
                    ? "one region of " + sluice::format_bytes(run.job->training_bytes) +
                          " planned (--memory-limit); growth past it takes from the caches"
                    : describe_memory(run.memory) + " (--memory)")
            << (o.profile.empty() ? std::string() : ", profiling to " + o.profile) << "\n";
  if (run.job != nullptr) std::cout << "  the job's memory, planned before step 1:\n" << job_plan_text(*run.job);
  const std::string micro_batches =
      std::to_string(o.accumulate) + " micro-batches of " + std::to_string(o.batch / o.accumulate);
  std::cout << "  accumulation: " << (o.accumulate == 1 ? std::string("none") : micro_batches)
            << "; gradient checkpointing: " << run.checkpoint.to_string();
  if (run.checkpoint.enabled()) {
    std::cout << " (segments of " << std::min(run.checkpoint.segment_length(model.size()), model.size()) << " of "
              << model.size() << " layers)";
  }
  std::cout << "\n";
  if (run.pruner != nullptr) {
    const train::PolynomialDecay& s = run.pruner->schedule();
    std::cout << "  magnitude pruning of " << run.pruner->masks().size() << " weight tensors to sparsity "
              << s.final_sparsity << ": polynomial decay (power " << s.power << ") over steps " << s.begin_step
              << "-" << s.end_step << ", masks updated every " << s.frequency << " steps\n";
  }
}

EpochPrinter::EpochPrinter(const TrainRun& run)
    : run_(run),
      progress_("train", static_cast<std::uint64_t>(run.steps * run.options.batch), images_,
                stderr_is_terminal() && !run.options.json) {}

void EpochPrinter::on_epoch_begin(std::int64_t epoch) {
  (void)epoch;
  epoch_cpu_start_ = cpu_seconds();
}

void EpochPrinter::on_step_begin(std::int64_t step) {
  (void)step;
  if (InterruptGuard::interrupted()) throw Error(ErrorCode::kCancelled, "interrupted");
}

void EpochPrinter::on_step_end(const train::StepReport& step) {
  images_.fetch_add(static_cast<std::uint64_t>(step.result.images), std::memory_order_relaxed);
}

void EpochPrinter::on_epoch_end(train::EpochReport& r) {
  per_epoch_.push_back(epoch_json(r, run_.trainer, r.epoch + 1));
  const std::uint64_t hwm = resident_peak_bytes();
  per_epoch_.back()["vm_hwm_bytes"] = hwm;
  per_epoch_.back()["rss_above_baseline_bytes"] = hwm - std::min(hwm, run_.baseline_rss_bytes);
  // The process's CPU time over the epoch, its evaluation included: on a shared machine a
  // steadier measure of its work than wall time.
  per_epoch_.back()["cpu_seconds"] = cpu_seconds() - epoch_cpu_start_;
  progress_.finish();
  char line[320];
  std::snprintf(line, sizeof line,
                "  epoch %lld/%lld: loss %.4f, test accuracy %s, train %.0f images/s, pipeline %.0f images/s, "
                "waited %.2f s for data, %s (+%s eval)\n",
                static_cast<long long>(r.epoch + 1), static_cast<long long>(run_.epochs), r.train.mean_loss(),
                accuracy_text(r.evaluation).c_str(), r.train_images_per_sec(), r.input_images_per_sec(),
                r.wait_seconds, format_seconds(r.seconds).c_str(), format_seconds(r.evaluation_seconds).c_str());
  std::cout << line << "    memory: in use at peak " << format_bytes(r.memory.peak_in_use_bytes) << " (live tensors: "
            << category_text(r.memory) << "); reserved " << format_bytes(r.memory.reserved_bytes)
            << " (regions the allocator holds, in use or free)\n";
  if (r.job_memory) std::cout << "    " << job_memory_text(*r.job_memory) << "\n";
  const train::PrecisionStats ps = run_.trainer.precision_stats();
  if (ps.precision != train::Precision::kF32) std::cout << "    precision: " << precision_text(ps) << "\n";
  std::cout << std::flush;
  if (r.pruning) {
    std::snprintf(line, sizeof line, "    pruning: sparsity %.2f%% of the prunable weights (target %.2f%%)\n",
                  100.0 * r.pruning->sparsity, 100.0 * r.pruning->target_sparsity);
    std::cout << line << std::flush;
  }
}

void print_summary(const TrainRun& run, const train::RunReport& report, double seconds) {
  std::cout << "sluice train: test accuracy " << accuracy_text(report.last_evaluation()) << " after "
            << run.trainer.steps() << " steps in " << format_seconds(seconds) << " ("
            << format_seconds(cpu_seconds()) << " of CPU time); "
            << static_cast<std::int64_t>(report.train_images_per_sec())
            << " training images/s; memory: peak in use " << format_bytes(report.peak_in_use_bytes) << ", reserved "
            << format_bytes(report.peak_reserved_bytes) << " ("
            << (run.job != nullptr && !run.job->hand_split ? "one region planned, growth from the caches"
                                                           : describe_memory(run.memory))
            << ")";
  if (run.job != nullptr) {
    std::uint64_t peak = 0;
    for (const train::EpochReport& e : report.per_epoch) {
      if (e.job_memory) peak = std::max(peak, e.job_memory->separate_host ? e.job_memory->host_peak_bytes : e.job_memory->peak_bytes);
    }
    std::cout << "; job: peak " << sluice::format_bytes(peak) << " of --memory-limit " << sluice::format_bytes(run.job->memory_limit);
  }
  std::cout << "\n";
}

json run_json(const TrainRun& run, const train::RunReport& report, const json& per_epoch, const json& batch_search,
              const json& pruning, double seconds) {
  const TrainOptions& o = run.options;
  json by_category = json::object();
  for (std::size_t i = 0; i < kTensorCategoryCount; ++i) {
    by_category[std::string(to_string(static_cast<TensorCategory>(i)))] = report.peak_by_category[i];
  }
  const std::optional<train::BatchResult> test = report.last_evaluation();
  json result{
      {"model", run.model.name}, {"data", run.data.string()}, {"device", to_string(run.device)},
      {"threads", run.ctx.threads()}, {"loader_threads", o.loader_threads},
      {"batch", o.batch}, {"accumulate", o.accumulate}, {"micro_batch", o.batch / o.accumulate},
      {"checkpoint", run.checkpoint.to_string()}, {"epochs", static_cast<int>(per_epoch.size())},
      {"steps", run.trainer.steps()}, {"optimizer", o.optimizer},
      {"precision", std::string(train::to_string(run.setup.trainer.precision))},
      {"learning_rate", run.setup.learning_rate}, {"seed", o.seed},
      {"parameters", run.setup.model->parameter_count()}, {"images", report.images},
      {"seconds", seconds}, {"cpu_seconds", cpu_seconds()},
      {"train_seconds", report.step_seconds}, {"wall_train_seconds", report.wall_seconds},
      {"test_accuracy", test ? json(test->accuracy()) : json(nullptr)},
      {"test_loss", test ? json(test->mean_loss()) : json(nullptr)},
      {"warmup_steps", o.warmup_steps},
      {"final_loss", per_epoch.empty() ? 0.0 : per_epoch.back()["loss"].get<double>()},
      {"train_images_per_sec", report.train_images_per_sec()},
      {"pipeline_images_per_sec", report.input_images_per_sec()},
      {"peak_device_bytes", report.peak_in_use_bytes}, {"reserved_bytes", report.peak_reserved_bytes},
      {"peak_in_use_bytes", report.peak_in_use_bytes}, {"peak_reserved_bytes", report.peak_reserved_bytes},
      {"memory", {{"mode", run.memory.mode == AllocatorMode::kPreallocate ? "prealloc" : "grow"},
                  {"limit_bytes", run.memory.limit}, {"text", o.memory}}},
      {"batch_search", batch_search},
      {"profile", o.profile.empty() ? json(nullptr) : json(o.profile)},
      {"peak_by_category", by_category},
      {"per_epoch", per_epoch},
  };
  result.update(precision_json(run.trainer.precision_stats()));
  if (!pruning.is_null()) result["pruning"] = pruning;
  const std::uint64_t hwm = resident_peak_bytes();
  result["baseline_rss_bytes"] = run.baseline_rss_bytes;
  result["peak_rss_bytes"] = hwm;
  if (run.job != nullptr) result["job_plan"] = job_plan_json(*run.job);
  if (const Allocator* h = run.setup.optimizer->host_state_allocator()) {
    result["offload"] = {{"what", o.offload}, {"host_state_bytes", h->stats().in_use_bytes},
                         {"host_reserved_bytes", h->stats().reserved_bytes},
                         {"host_memory", run.device.is_cuda() ? "pinned" : "pageable"}};
  }
  return result;
}

}  // namespace sluice::cli
