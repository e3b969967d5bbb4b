// One sample on a worker: the program run, the skip policy's replacements and the skip log.
#include "runtime/sample_task.hpp"

#include <algorithm>

#include "runtime/executor.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/rng.hpp"

namespace sluice::runtime {

void SkipLog::record(const std::string& path, const std::string& cause) {
  std::lock_guard lock(mutex_);
  ++events_;
  if (paths_.insert(path).second) samples_.push_back(SkippedSample{path, cause});
}

std::int64_t SkipLog::files() const {
  std::lock_guard lock(mutex_);
  return static_cast<std::int64_t>(samples_.size());
}

std::int64_t SkipLog::events() const {
  std::lock_guard lock(mutex_);
  return events_;
}

void SkipLog::add_stats(Stats& stats) const {
  std::lock_guard lock(mutex_);  // one snapshot: the three agree
  stats.skipped = static_cast<std::int64_t>(samples_.size());
  stats.skip_events = events_;
  stats.skipped_samples = samples_;
}

SampleTask::SampleTask(const stages::SampleProgram& program, const stages::ItemTable& items, MemoryBudget& budget,
                       SampleTaskOptions options)
    : program_(program), items_(items), options_(options) {
  // Before any batch slot: each worker holds the working memory the plan gave it from the start.
  for (int i = 0; i < options_.threads; ++i) workspaces_.push_back(program_.make_workspace(budget, options_.share));
}

std::exception_ptr SampleTask::run(std::int64_t epoch, std::int64_t position, std::span<const std::int64_t> epoch_items,
                                   std::int64_t real, const SampleTarget& target) {
  // oneTBB gives a one-thread arena two slots and its worker may use either; both map to the one
  // workspace (at concurrency 1 they never run at once), so its buffers stay warm.
  const int worker = Executor::current_worker() % options_.threads;
  if (worker < 0 || worker >= static_cast<int>(workspaces_.size())) {
    return std::make_exception_ptr(Error(ErrorCode::kInternal,
        "sample task ran on worker slot " + std::to_string(worker) + " outside the pool"));
  }
  std::exception_ptr error =
      run_on(*workspaces_[static_cast<std::size_t>(worker)], epoch, position, epoch_items, real, target);
  if (position < real) samples_done_.fetch_add(1, std::memory_order_relaxed);
  return error;
}

std::exception_ptr SampleTask::run_on(stages::SampleProgram::Workspace& ws, std::int64_t epoch, std::int64_t position,
                                      std::span<const std::int64_t> epoch_items, std::int64_t real,
                                      const SampleTarget& target) {
  std::int64_t item = epoch_items[static_cast<std::size_t>(position)];
  CounterRng replacement(options_.skip_key, static_cast<std::uint64_t>(position), static_cast<std::uint32_t>(epoch));
  for (std::uint32_t attempt = 0;; ++attempt) {
    try {
      program_.run(items_, item, stages::SampleKey{epoch, item, attempt}, ws, target.data);
      *target.label = items_.label(item);
      return nullptr;
    } catch (const Error& e) {
      const bool skippable = options_.on_error == OnError::kSkip && e.code() != ErrorCode::kInternal &&
                             e.code() != ErrorCode::kCancelled && e.code() != ErrorCode::kOutOfBudget;
      if (!skippable) return std::current_exception();
      if (position < real) skips_.record(e.path(), e.cause());
      if (attempt + 1 >= static_cast<std::uint32_t>(kMaxReplacements)) {
        return std::make_exception_ptr(Error(ErrorCode::kCorruptData,
                                             std::to_string(kMaxReplacements) +
                                                 " replacements in a row were bad too: the data set looks unreadable, "
                                                 "check it with `sluice inspect`; last error: " + e.what()));
      }
      // Any other sample position of the epoch, never this one (whose item just failed) nor padding.
      const auto positions = static_cast<std::uint64_t>(std::max<std::int64_t>(real, 1));
      const bool own = position < real;
      std::uint64_t other = replacement.below(own && positions > 1 ? positions - 1 : positions);
      if (own && positions > 1 && other >= static_cast<std::uint64_t>(position)) ++other;
      item = epoch_items[static_cast<std::size_t>(other)];
    } catch (...) {
      return std::current_exception();
    }
  }
}

double SampleTask::busy_seconds() const {
  std::int64_t ns = 0;
  for (const auto& ws : workspaces_) {
    for (const auto& b : ws->counters.busy_ns) ns += b.load(std::memory_order_relaxed);
  }
  return static_cast<double>(ns) * 1e-9;
}

void SampleTask::add_stats(Stats& stats) const {
  for (int stage = 0; stage < stages::StageCounters::kStageCount; ++stage) {
    StageStats s;
    s.name = stages::StageCounters::name(stage);
    for (const auto& ws : workspaces_) {
      s.busy_seconds += static_cast<double>(ws->counters.busy_ns[stage].load(std::memory_order_relaxed)) * 1e-9;
      s.items += ws->counters.items[stage].load(std::memory_order_relaxed);
      s.bytes += ws->counters.bytes[stage].load(std::memory_order_relaxed);
    }
    stats.stages.push_back(std::move(s));
  }
  stats.samples = samples_done_.load(std::memory_order_relaxed);
  skips_.add_stats(stats);
}

}  // namespace sluice::runtime
