// LoaderTuning alone: what the loader starts with (a whole batch in flight, or what the user
// fixed; the plan's prefetch depth), that nothing is tuned without threads = autotune, the period
// between decisions, and the in-flight floor at the loader's level: with a batch of 256 on 2
// threads no move of the autotuner ever lowers samples in flight below 256.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "runtime/loader_tuning.hpp"

namespace sluice::runtime {
namespace {

using Clock = std::chrono::steady_clock;

// One period in which the consumer waited `wait` of the time and the workers were busy `busy` of
// theirs, delivering `batches` batches.
std::optional<TuningSettings> period(LoaderTuning& tuning, Clock::time_point& now, double& busy_total, double wait,
                                     double busy, int batches, int threads, std::string& why) {
  for (int b = 0; b < batches; ++b) tuning.count_batch(wait / batches);
  now += std::chrono::milliseconds(500);
  busy_total += busy * 0.5 * threads;
  return tuning.tick(now, busy_total, true, why);
}

TEST(LoaderTuning, StartsWithAWholeBatchInFlightOrWhatTheUserFixed) {
  EXPECT_EQ(LoaderTuning({.threads = 2, .batch_size = 256}).initial_in_flight(), 256);
  EXPECT_EQ(LoaderTuning({.threads = 8, .batch_size = 4}).initial_in_flight(), 16);  // two per thread at least
  EXPECT_EQ(LoaderTuning({.threads = 2, .batch_size = 256, .fixed_in_flight = 3}).initial_in_flight(), 3);
  const LoaderTuning depth({.threads = 2, .batch_size = 8, .prefetch = 5, .prefetch_set = true});
  EXPECT_EQ(depth.min_prefetch(), 5);
  EXPECT_EQ(depth.start_prefetch(), 5);
  EXPECT_EQ(LoaderTuning({.threads = 2, .batch_size = 8}).min_prefetch(), 1);
}

TEST(LoaderTuning, NothingIsTunedWithoutAutotune) {
  LoaderTuning tuning({.threads = 2, .batch_size = 8, .autotune = false});
  tuning.start(2);
  Clock::time_point now = Clock::now();
  tuning.start_period(now, 0);
  double busy = 0;
  std::string why;
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(period(tuning, now, busy, 0.4, 0.3, 10, 2, why).has_value());
  EXPECT_FALSE(tuning.autotuned());
  EXPECT_FALSE(tuning.stats(16).autotuned);
  EXPECT_EQ(tuning.stats(16).prefetch, 2);
}

TEST(LoaderTuning, DecidesOncePerPeriod) {
  LoaderTuning tuning({.threads = 2, .batch_size = 2, .autotune = true});
  tuning.start(2);
  const Clock::time_point start = Clock::now();
  tuning.start_period(start, 0);
  EXPECT_FALSE(tuning.due(start + LoaderTuning::kPeriod / 2));
  EXPECT_TRUE(tuning.due(start + LoaderTuning::kPeriod));
  std::string why;
  tuning.count_batch(0.2);
  EXPECT_FALSE(tuning.tick(start + LoaderTuning::kPeriod / 2, 0.1, true, why).has_value());
  // Starved with idle workers: more in flight (4 per thread at most).
  const auto moved = tuning.tick(start + LoaderTuning::kPeriod, 0.1, true, why);
  ASSERT_TRUE(moved.has_value());
  EXPECT_GT(moved->in_flight, 4);
  EXPECT_LE(moved->in_flight, 8);
  EXPECT_NE(why.find("in flight"), std::string::npos) << why;
  EXPECT_EQ(tuning.stats(moved->in_flight).decisions, 1);
}

TEST(LoaderTuning, ABatchOf256OnTwoThreadsNeverDropsBelow256InFlight) {
  LoaderTuning tuning({.threads = 2, .batch_size = 256, .autotune = true});
  ASSERT_EQ(tuning.initial_in_flight(), 256);
  tuning.start(2);
  Clock::time_point now = Clock::now();
  tuning.start_period(now, 0);
  double busy = 0;
  std::string why;
  int moves = 0;
  // Starved periods (moves: deeper prefetch), a falling rate (undo), quiet ones: whatever the
  // autotuner does, in flight stays at the loader's choice or above.
  const double waits[] = {0.4, 0.4, 0.4, 0.0, 0.4, 0.4, 0.0, 0.4};
  const int batches[] = {10, 10, 4, 10, 10, 3, 10, 10};
  for (int i = 0; i < 8; ++i) {
    if (const auto s = period(tuning, now, busy, waits[i], 0.5, batches[i], 2, why)) {
      ++moves;
      EXPECT_GE(s->in_flight, 256) << why;
    }
    EXPECT_GE(tuning.autotuner()->settings().in_flight, 256);
  }
  EXPECT_GE(moves, 2);  // the test made the autotuner move, and undo
}

}  // namespace
}  // namespace sluice::runtime
