// The loader's tuning: starting knobs, the autotuner's limits and its measuring periods.
#include "runtime/loader_tuning.hpp"

#include <algorithm>

#include "runtime/batch_ring.hpp"

namespace sluice::runtime {

LoaderTuning::LoaderTuning(const TuningInputs& inputs) : inputs_(inputs) {
  initial_in_flight_ = inputs_.fixed_in_flight > 0 ? inputs_.fixed_in_flight
                                                   : std::max(2 * inputs_.threads, inputs_.batch_size);
  min_prefetch_ = inputs_.prefetch_set ? inputs_.prefetch : 1;
  prefetch_ = inputs_.prefetch;
}

void LoaderTuning::start(int prefetch) {
  prefetch_ = prefetch;
  if (!inputs_.autotune) return;
  // The autotuner starts from the fixed defaults when the budget allowed them, so tuning can only
  // improve on what an untuned pipeline gets, and it may only add samples in flight: a batch of
  // 256 on 2 threads keeps its 256 whatever the 4-per-thread ceiling says.
  autotuner_ = std::make_unique<Autotuner>(
      TuningLimits{.threads = inputs_.threads,
                   .min_in_flight = initial_in_flight_,
                   .max_in_flight = 4 * inputs_.threads,
                   .min_prefetch = min_prefetch_,
                   .max_prefetch = inputs_.prefetch_set ? inputs_.prefetch : kMaxPrefetch,
                   .tune_in_flight = inputs_.fixed_in_flight == 0,
                   .tune_prefetch = !inputs_.prefetch_set && !inputs_.fixed_depth},
      TuningSettings{initial_in_flight_, prefetch});
}

void LoaderTuning::start_period(std::chrono::steady_clock::time_point now, double busy_seconds) {
  period_start_ = now;
  period_batches_ = 0;
  period_wait_ = 0;
  period_busy_start_ = busy_seconds;
}

void LoaderTuning::count_batch(double waited_seconds) {
  period_wait_ += waited_seconds;
  ++period_batches_;
}

std::optional<TuningSettings> LoaderTuning::tick(std::chrono::steady_clock::time_point now, double busy_seconds,
                                                 bool prefetch_can_grow, std::string& why) {
  why.clear();
  if (!due(now)) return std::nullopt;
  const double seconds = std::chrono::duration<double>(now - period_start_).count();
  const TuningSample sample{
      .seconds = seconds,
      .batches = period_batches_,
      .consumer_wait_seconds = period_wait_,
      .worker_busy_seconds = busy_seconds - period_busy_start_,
      .prefetch_can_grow = prefetch_can_grow,
  };
  const TuningSettings before = autotuner_->settings();
  const TuningSettings after = autotuner_->update(sample, why);
  start_period(now, busy_seconds);
  if (after == before) return std::nullopt;
  return after;
}

TuningStats LoaderTuning::stats(int in_flight) const {
  return TuningStats{in_flight, prefetch(), autotuner_ != nullptr, autotuner_ ? autotuner_->decisions() : 0};
}

}  // namespace sluice::runtime
