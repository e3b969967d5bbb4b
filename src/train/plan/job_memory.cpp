// JobMemoryHook: each epoch's peaks of the job's budgets and parts, its caches' hits, the unused rest.
#include <algorithm>

#include "sluice/core/error.hpp"
#include "sluice/train/epoch_runner.hpp"
#include "sluice/train/job_plan.hpp"

namespace sluice::train {

JobMemoryHook::JobMemoryHook(const JobPlan& plan, const JobBudgets& budgets, std::vector<Pipeline> pipelines)
    : plan_(plan), budgets_(budgets), pipelines_(std::move(pipelines)) {
  if (pipelines_.size() != plan_.pipelines.size()) {
    throw Error(ErrorCode::kInvalidArgument, "JobMemoryHook: " + std::to_string(pipelines_.size()) +
                                                 " pipelines for a plan of " + std::to_string(plan_.pipelines.size()));
  }
}

void JobMemoryHook::on_epoch_begin(std::int64_t epoch) {
  (void)epoch;
  budgets_.device->reset_peak();
  if (budgets_.host != budgets_.device) budgets_.host->reset_peak();
  at_start_.clear();
  for (const Pipeline& p : pipelines_) {
    if (p.part) p.part->reset_peak();
    at_start_.push_back(p.source != nullptr ? p.source->input_stats() : InputStats{});
  }
}

void JobMemoryHook::on_epoch_end(EpochReport& report) {
  JobMemoryReport r;
  const MemoryBudget& device = *budgets_.device;
  const MemoryBudget& host = *budgets_.host;
  r.memory_limit = plan_.memory_limit;
  r.host_memory_limit = plan_.host_memory_limit;
  r.separate_host = plan_.separate_host();
  r.peak_bytes = device.peak();
  r.host_peak_bytes = r.separate_host ? host.peak() : r.peak_bytes;
  for (std::size_t u = 0; u < r.peak_by_use.size(); ++u) {
    const auto use = static_cast<MemoryUse>(u);
    r.peak_by_use[u] = use == MemoryUse::kTraining ? device.peak(use) : host.peak(use);
  }
  r.parts.push_back(JobPartReport{.name = "training", .share_bytes = plan_.training_bytes,
                                  .peak_bytes = device.peak(MemoryUse::kTraining), .device = r.separate_host});
  if (plan_.offload_bytes > 0 || host.peak(MemoryUse::kOffload) > 0) {
    r.parts.push_back(JobPartReport{.name = "offloaded state", .share_bytes = plan_.offload_bytes,
                                    .peak_bytes = host.peak(MemoryUse::kOffload)});
  }
  bool cache_short = false;
  bool filling = false;
  for (std::size_t i = 0; i < pipelines_.size(); ++i) {
    const Pipeline& p = pipelines_[i];
    const PipelineShare& share = plan_.pipelines[i];
    r.parts.push_back(JobPartReport{.name = p.name, .share_bytes = share.bytes(),
                                    .peak_bytes = p.part ? p.part->peak() : 0});
    if (p.source == nullptr || share.cache_bytes == 0) continue;
    const InputStats now = p.source->input_stats();
    const InputStats& then = at_start_.size() > i ? at_start_[i] : InputStats{};
    JobCacheReport c{.pipeline = p.name, .hits = now.cache_hits - then.cache_hits,
                     .misses = now.cache_misses - then.cache_misses, .bytes = now.cache_bytes,
                     .share_bytes = share.cache_bytes, .dropped = now.cache_dropped - then.cache_dropped};
    cache_short = cache_short || share.cache_bytes < share.needs.cache_set_bytes;
    filling = filling || c.misses > 0;
    r.caches.push_back(c);
  }
  const std::uint64_t limit = r.separate_host ? r.host_memory_limit : r.memory_limit;
  const std::uint64_t peak = r.separate_host ? r.host_peak_bytes : r.peak_bytes;
  r.unused_bytes = limit > peak ? limit - peak : 0;
  r.unused_reason = plan_.unused_reason;
  if (limit == 0) {
    r.unused_reason = "no host limit";
  } else if (filling && !cache_short) {
    r.unused_reason = "the caches were still filling (each is sized for its whole data set)";
  } else if (filling) {
    r.unused_reason = "the caches are full and hold part of their data sets; the rest is the other parts' headroom "
                      "at their planned peaks";
  }
  report.job_memory = std::move(r);
}

}  // namespace sluice::train
