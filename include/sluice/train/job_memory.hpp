// JobMemoryReport: one epoch of a training job under one memory limit (sluice/train/job_plan.hpp),
// as the epoch's report carries it (EpochReport::job_memory, filled by JobMemoryHook in
// sluice/train/epoch_runner.hpp): the limit, each part's peak and share, the caches' hits, and
// what the limit held that nothing claimed.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "sluice/memory/budget.hpp"

namespace sluice::train {

struct JobPartReport {
  std::string name;             // "training", "training pipeline", "evaluation pipeline", "offloaded state"
  std::uint64_t share_bytes = 0;  // what the plan gave it
  std::uint64_t peak_bytes = 0;   // the most it held against the limit during the epoch
  bool device = false;            // counted in the device's limit (CUDA), else the host's
};

struct JobCacheReport {
  std::string pipeline;
  std::int64_t hits = 0;    // during the epoch
  std::int64_t misses = 0;  // each a file read
  std::uint64_t bytes = 0;  // held at the epoch's end
  std::uint64_t share_bytes = 0;
  std::int64_t dropped = 0;  // entries given back during the epoch (to working memory or training)

  double hit_rate() const {
    return hits + misses > 0 ? static_cast<double>(hits) / static_cast<double>(hits + misses) : 0.0;
  }
};

struct JobMemoryReport {
  std::uint64_t memory_limit = 0;       // the process's (CPU) or the device's (CUDA)
  std::uint64_t host_memory_limit = 0;  // CUDA: the host side's; 0: unbounded
  bool separate_host = false;
  std::uint64_t peak_bytes = 0;       // accounted peak in memory_limit's budget over the epoch
  std::uint64_t host_peak_bytes = 0;  // CUDA: in the host budget's
  // The peak per use (training, cache, batches, ...) of the budget the pipelines are in.
  std::array<std::uint64_t, static_cast<std::size_t>(MemoryUse::kCount)> peak_by_use{};
  std::vector<JobPartReport> parts;
  std::vector<JobCacheReport> caches;
  // memory_limit's budget (the host's on a device, when bounded) minus its peak: held by the
  // limit and never claimed during the epoch, and why.
  std::uint64_t unused_bytes = 0;
  std::string unused_reason;
};

}  // namespace sluice::train
