// The autotuner's rules and its hill-climb check.
#include "runtime/autotuner.hpp"

#include <algorithm>
#include <cstdio>

namespace sluice::runtime {

namespace {
constexpr double kStarved = 0.03;      // the consumer waited more than 3% of the period
constexpr double kSaturated = 0.90;    // workers busy at least 90% of the time
constexpr double kWorse = 0.90;        // a move that leaves less than 90% of the rate is undone
constexpr int kBlockPeriods = 8;       // how long a failed direction rests
}  // namespace

Autotuner::Autotuner(TuningLimits limits, TuningSettings start) : limits_(limits), settings_(start) {
  limits_.min_in_flight = std::max(1, limits_.min_in_flight);
  limits_.max_in_flight = std::max(limits_.max_in_flight, limits_.min_in_flight);
  settings_.in_flight = std::clamp(settings_.in_flight, limits_.min_in_flight, limits_.max_in_flight);
  settings_.prefetch = std::clamp(settings_.prefetch, limits_.min_prefetch, limits_.max_prefetch);
}

TuningSettings Autotuner::update(const TuningSample& s, std::string& why) {
  why.clear();
  if (s.seconds <= 0) return settings_;
  const double rate = static_cast<double>(s.batches) / s.seconds;
  const double wait = s.consumer_wait_seconds / s.seconds;
  const double busy = s.worker_busy_seconds / (s.seconds * limits_.threads);
  in_flight_blocked_ = std::max(0, in_flight_blocked_ - 1);
  prefetch_blocked_ = std::max(0, prefetch_blocked_ - 1);

  char text[160];
  // Judge the last move first.
  if (pending_ != Move::kNone) {
    const Move judged = pending_;
    pending_ = Move::kNone;
    if (rate < kWorse * rate_before_move_) {
      std::snprintf(text, sizeof text, "undo: rate fell from %.1f to %.1f batches/s", rate_before_move_, rate);
      why = text;
      settings_ = before_move_;
      (judged == Move::kMoreInFlight ? in_flight_blocked_ : prefetch_blocked_) = kBlockPeriods;
      ++decisions_;
      quiet_ = 0;
      return settings_;
    }
  }

  Move move = Move::kNone;
  if (wait > kStarved) {
    if (limits_.tune_in_flight && busy < kSaturated && settings_.in_flight < limits_.max_in_flight &&
        in_flight_blocked_ == 0) {
      move = Move::kMoreInFlight;  // workers idle while the consumer waits: too little submitted
    } else if (limits_.tune_prefetch && busy < kSaturated && settings_.prefetch < limits_.max_prefetch &&
               s.prefetch_can_grow && prefetch_blocked_ == 0) {
      move = Move::kMorePrefetch;  // enough submitted, still gaps: bursts a deeper buffer absorbs
    }
  }
  if (move == Move::kNone) {
    ++quiet_;
    return settings_;
  }
  before_move_ = settings_;
  rate_before_move_ = rate;
  pending_ = move;
  if (move == Move::kMoreInFlight) {
    settings_.in_flight = std::min(limits_.max_in_flight, std::max(settings_.in_flight + 1, settings_.in_flight * 3 / 2));
    std::snprintf(text, sizeof text, "in flight %d -> %d: consumer waited %.0f%%, workers busy %.0f%%",
                  before_move_.in_flight, settings_.in_flight, 100 * wait, 100 * busy);
  } else {
    settings_.prefetch += 1;
    std::snprintf(text, sizeof text, "prefetch %d -> %d: consumer waited %.0f%%, workers busy %.0f%%",
                  before_move_.prefetch, settings_.prefetch, 100 * wait, 100 * busy);
  }
  why = text;
  ++decisions_;
  quiet_ = 0;
  return settings_;
}

}  // namespace sluice::runtime
