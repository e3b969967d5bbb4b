// Autotuner: chooses samples in flight and prefetch depth from what the pipeline measures, every
// period, inside the CPU budget (the worker threads) and the RAM budget (a prefetch batch is only
// added if the budget has room for it).
//
// Like tf.data's autotuner it works from a model of where time goes rather than blind trials:
// a starved consumer with idle workers means too few samples in flight; a starved consumer with
// busy workers and a bursty pattern means too shallow a prefetch; a consumer that never waits
// needs nothing more. Each move is then checked like a hill climb: if the delivered rate drops
// in the next period, the move is undone and that direction is not tried again for a while.
// Pure logic, no clock and no threads, so tests can drive it with made-up measurements.
#pragma once

#include <cstdint>
#include <string>

namespace sluice::runtime {

struct TuningSettings {
  int in_flight = 1;  // samples submitted to workers and not finished, at most
  int prefetch = 1;   // batches prepared ahead of the consumer's
  friend bool operator==(const TuningSettings&, const TuningSettings&) = default;
};

struct TuningLimits {
  int threads = 1;
  // The loader's own choice of samples in flight (a whole batch, or what the user fixed) is the
  // floor: the autotuner only ever adds to it. A ceiling below the floor is raised to it.
  int min_in_flight = 1;
  int max_in_flight = 4;
  int min_prefetch = 1;
  int max_prefetch = 8;
  bool tune_in_flight = true;
  bool tune_prefetch = true;
};

// What happened during one period.
struct TuningSample {
  double seconds = 0;
  std::int64_t batches = 0;             // delivered to the consumer
  double consumer_wait_seconds = 0;     // the consumer blocked waiting for a batch
  double worker_busy_seconds = 0;       // summed over workers
  bool prefetch_can_grow = true;        // the budget has room for one more batch
};

class Autotuner {
 public:
  Autotuner(TuningLimits limits, TuningSettings start);

  // Returns the settings for the next period; `why` says what changed and why (empty if nothing).
  TuningSettings update(const TuningSample& sample, std::string& why);

  const TuningSettings& settings() const { return settings_; }
  std::int64_t decisions() const { return decisions_; }
  // Periods since the last change: the autotuner has settled when this grows.
  int quiet_periods() const { return quiet_; }

 private:
  enum class Move : std::uint8_t { kNone, kMoreInFlight, kMorePrefetch };

  TuningLimits limits_;
  TuningSettings settings_;
  TuningSettings before_move_;
  Move pending_ = Move::kNone;      // the last move, judged in the next period
  double rate_before_move_ = 0;
  int in_flight_blocked_ = 0;       // periods to wait before trying that move again
  int prefetch_blocked_ = 0;
  std::int64_t decisions_ = 0;
  int quiet_ = 0;
};

}  // namespace sluice::runtime
