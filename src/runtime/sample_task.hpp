// SampleTask: one sample of a batch, on a worker. It runs the fused sample program for the item
// at an epoch position into the sample's place in its batch, applies the error policy (under
// OnError::kSkip a bad file is replaced by another position of the same epoch, chosen from the
// seed, and logged), and returns the error that must reach the consumer instead of recording it
// anywhere: the caller keeps it with the batch. It owns the workers' workspaces (their buffers,
// attached to the budget, and their stage counters) and the skip log.
//
// Threads: run() is called by the workers at once, each with its own workspace; the skip log
// takes a lock only when a sample is skipped; the counters are relaxed atomics that stats read
// while workers run.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "sluice/memory/budget.hpp"
#include "sluice/pipeline/options.hpp"
#include "sluice/pipeline/spec.hpp"
#include "sluice/pipeline/stats.hpp"
#include "stages/source/item_table.hpp"
#include "stages/program/sample_program.hpp"

namespace sluice::runtime {

// Bad files replaced under OnError::kSkip: each file once (with its first cause), and every
// replacement. A file bad in two epochs, or a replacement that is bad too, is one more event.
class SkipLog {
 public:
  void record(const std::string& path, const std::string& cause);
  std::int64_t files() const;
  std::int64_t events() const;
  // Stats::skipped (files), skip_events and skipped_samples, from one snapshot.
  void add_stats(Stats& stats) const;

 private:
  mutable std::mutex mutex_;
  std::int64_t events_ = 0;
  std::vector<SkippedSample> samples_;  // in the order first seen
  std::set<std::string> paths_;
};

struct SampleTaskOptions {
  OnError on_error = OnError::kFail;
  std::uint64_t skip_key = 0;  // random stream that picks replacements
  int threads = 1;             // one workspace each
  stages::WorkspaceShare share;  // what each workspace reserves when it is made (the memory plan's)
};

// Where one sample goes: its bytes and its label.
struct SampleTarget {
  void* data = nullptr;
  std::int32_t* label = nullptr;
};

class SampleTask {
 public:
  // A bad sample is replaced by a random one from the same epoch; this many bad replacements in a
  // row mean the data set is unreadable, not noisy, and the run fails.
  static constexpr int kMaxReplacements = 64;

  // `program` and `items` must outlive the task; workspace buffers reserve from `budget`.
  SampleTask(const stages::SampleProgram& program, const stages::ItemTable& items, MemoryBudget& budget,
             SampleTaskOptions options);
  SampleTask(const SampleTask&) = delete;
  SampleTask& operator=(const SampleTask&) = delete;

  // Runs the sample at `position` of `epoch` (epoch_items maps positions to items) on the calling
  // worker. Positions from `real` on are padding (stages/source/epoch_order.hpp): they are not
  // counted as samples nor as skips, and a replacement is drawn from [0, real). Returns null, or the error for the consumer: any error under kFail, and under kSkip
  // one that replacing cannot cure (internal, cancelled, out of budget, or kMaxReplacements bad
  // replacements in a row). Allocates nothing unless a sample fails.
  std::exception_ptr run(std::int64_t epoch, std::int64_t position, std::span<const std::int64_t> epoch_items,
                         std::int64_t real, const SampleTarget& target);

  // Busy time of every stage on every worker, in seconds: what the autotuner compares.
  double busy_seconds() const;
  // Adds the per-stage counters, samples written and skips to `stats`.
  void add_stats(Stats& stats) const;
  const SkipLog& skips() const { return skips_; }

 private:
  std::exception_ptr run_on(stages::SampleProgram::Workspace& ws, std::int64_t epoch, std::int64_t position,
                            std::span<const std::int64_t> epoch_items, std::int64_t real, const SampleTarget& target);

  const stages::SampleProgram& program_;
  const stages::ItemTable& items_;
  SampleTaskOptions options_;
  std::vector<std::unique_ptr<stages::SampleProgram::Workspace>> workspaces_;  // (threads)
  std::atomic<std::int64_t> samples_done_{0};
  SkipLog skips_;
};

}  // namespace sluice::runtime
