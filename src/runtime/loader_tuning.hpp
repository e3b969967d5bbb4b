// LoaderTuning: the loader's knobs (samples in flight, prefetch depth), what they start at, and
// the glue between the loader and the Autotuner: it measures each period on the consumer's
// thread (batches delivered, the consumer's wait, the workers' busy time) and asks the autotuner
// for new settings. What the user fixed stays fixed; the rest starts where an untuned pipeline
// runs and is tuned only with threads = sluice::autotune. The loader applies what it returns
// (prefetch needs ring slots, which the budget may refuse).
//
// Threads: all on the consumer's thread; prefetch() is also read by stats().
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "runtime/autotuner.hpp"
#include "sluice/pipeline/stats.hpp"

namespace sluice::runtime {

struct TuningInputs {
  int threads = 1;
  int batch_size = 1;
  int fixed_in_flight = 0;     // BuildOptions::samples_in_flight; 0: the loader chooses
  bool autotune = false;       // threads = sluice::autotune
  int prefetch = 2;            // the plan's depth: prefetch(n), or the default
  bool prefetch_set = false;   // prefetch(n) was called: the depth is the user's
  bool fixed_depth = false;    // the ring's slots are allocated once (device delivery)
};

class LoaderTuning {
 public:
  static constexpr std::chrono::milliseconds kPeriod{250};

  explicit LoaderTuning(const TuningInputs& inputs);

  // Samples in flight the loader starts with: what the user fixed, else a whole batch (at least
  // two per thread), so one batch's samples run together. The autotuner never goes below it.
  int initial_in_flight() const { return initial_in_flight_; }
  // The shallowest depth the pipeline may run at, and the one it starts at when the budget allows.
  int min_prefetch() const { return min_prefetch_; }
  int start_prefetch() const { return inputs_.prefetch; }

  // The depth the loader reached with the slots it could get; starts the autotuner from there.
  void start(int prefetch);
  int prefetch() const { return prefetch_.load(std::memory_order_relaxed); }
  void set_prefetch(int prefetch) { prefetch_.store(prefetch, std::memory_order_relaxed); }

  // Periods restart with each epoch.
  void start_period(std::chrono::steady_clock::time_point now, double busy_seconds);
  void count_batch(double waited_seconds);
  bool autotuned() const { return autotuner_ != nullptr; }
  // A period has passed since the last one started (never without the autotuner).
  bool due(std::chrono::steady_clock::time_point now) const {
    return autotuner_ != nullptr && now - period_start_ >= kPeriod;
  }
  // Once a period has passed: the autotuner's new settings, or nullopt (nothing changed, not
  // tuned, or the period is not over). `why` says what changed.
  std::optional<TuningSettings> tick(std::chrono::steady_clock::time_point now, double busy_seconds,
                                     bool prefetch_can_grow, std::string& why);

  TuningStats stats(int in_flight) const;
  const Autotuner* autotuner() const { return autotuner_.get(); }

 private:
  TuningInputs inputs_;
  int initial_in_flight_ = 1;
  int min_prefetch_ = 1;
  std::atomic<int> prefetch_{1};
  std::unique_ptr<Autotuner> autotuner_;
  std::chrono::steady_clock::time_point period_start_;
  std::int64_t period_batches_ = 0;
  double period_wait_ = 0;
  double period_busy_start_ = 0;
};

}  // namespace sluice::runtime
