// Autotuner: raises samples in flight when workers idle while the consumer waits, deepens the
// prefetch for bursty gaps only while the budget has room, leaves a satisfied consumer alone,
// undoes a move that lowered the rate, and respects what the user fixed.
#include <gtest/gtest.h>

#include "runtime/autotuner.hpp"

namespace sluice::runtime {
namespace {

TuningSample period(double wait, double busy_fraction, std::int64_t batches = 10, bool room = true) {
  return TuningSample{.seconds = 1.0, .batches = batches, .consumer_wait_seconds = wait,
                      .worker_busy_seconds = busy_fraction * 2.0, .prefetch_can_grow = room};
}

TEST(Autotuner, StarvedConsumerWithIdleWorkersGetsMoreInFlight) {
  Autotuner tuner({.threads = 2, .max_in_flight = 8}, {1, 1});
  std::string why;
  const auto s = tuner.update(period(0.5, 0.5), why);
  EXPECT_GT(s.in_flight, 1);
  EXPECT_NE(why.find("in flight"), std::string::npos);
}

TEST(Autotuner, SatisfiedConsumerChangesNothingAndSettles) {
  Autotuner tuner({.threads = 2, .max_in_flight = 8}, {2, 2});
  std::string why;
  for (int i = 0; i < 20; ++i) EXPECT_EQ(tuner.update(period(0.0, 0.6), why), (TuningSettings{2, 2}));
  EXPECT_EQ(tuner.decisions(), 0);
  EXPECT_EQ(tuner.quiet_periods(), 20);
}

TEST(Autotuner, SaturatedWorkersAreNotHelpedByMoreOfAnything) {
  Autotuner tuner({.threads = 2, .max_in_flight = 8}, {2, 1});
  std::string why;
  EXPECT_EQ(tuner.update(period(0.4, 0.97), why), (TuningSettings{2, 1}));
}

TEST(Autotuner, PrefetchGrowsOnlyWithRoomAndAfterInFlightIsMaxed) {
  Autotuner tuner({.threads = 2, .max_in_flight = 2, .max_prefetch = 4}, {2, 1});
  std::string why;
  EXPECT_EQ(tuner.update(period(0.2, 0.6, 10, false), why).prefetch, 1);  // no room in the budget
  EXPECT_EQ(tuner.update(period(0.2, 0.6, 10, true), why).prefetch, 2);
}

TEST(Autotuner, AMoveThatLowersTheRateIsUndoneAndRests) {
  Autotuner tuner({.threads = 2, .max_in_flight = 8}, {1, 1});
  std::string why;
  tuner.update(period(0.5, 0.5, 10), why);
  EXPECT_GT(tuner.settings().in_flight, 1);
  const auto undone = tuner.update(period(0.5, 0.5, 5), why);  // rate halved
  EXPECT_EQ(undone.in_flight, 1);
  EXPECT_NE(why.find("undo"), std::string::npos);
  // The direction rests: the next starved periods try prefetch instead.
  const auto next = tuner.update(period(0.5, 0.5, 10), why);
  EXPECT_EQ(next.in_flight, 1);
  EXPECT_EQ(next.prefetch, 2);
}

// a batch of 256 on 2 threads starts with 256 samples in flight; the ceiling of 4 x
// threads (8) used to clamp the autotuner's copy, and the first move of any kind applied 8.
TEST(Autotuner, NeverLowersInFlightBelowTheLoadersChoice) {
  Autotuner tuner({.threads = 2, .min_in_flight = 256, .max_in_flight = 8, .max_prefetch = 4}, {256, 1});
  EXPECT_EQ(tuner.settings().in_flight, 256);
  std::string why;
  const auto moved = tuner.update(period(0.5, 0.5, 10), why);  // starved, idle: a prefetch move
  EXPECT_EQ(moved.prefetch, 2) << why;
  EXPECT_EQ(moved.in_flight, 256);
  const auto undone = tuner.update(period(0.5, 0.5, 2), why);  // the rate fell: undone
  EXPECT_NE(why.find("undo"), std::string::npos);
  EXPECT_EQ(undone.in_flight, 256);
  for (int i = 0; i < 20; ++i) EXPECT_GE(tuner.update(period(0.5, 0.5, 10), why).in_flight, 256);
}

TEST(Autotuner, InFlightGrowsFromTheFloorWhenTheCeilingIsAbove) {
  Autotuner tuner({.threads = 8, .min_in_flight = 16, .max_in_flight = 32}, {16, 1});
  std::string why;
  const auto s = tuner.update(period(0.5, 0.1), why);
  EXPECT_GT(s.in_flight, 16);
  EXPECT_LE(s.in_flight, 32);
  tuner.update(period(0.5, 0.1, 1), why);  // the move lowered the rate: back to the floor, no lower
  EXPECT_EQ(tuner.settings().in_flight, 16);
}

TEST(Autotuner, FixedKnobsStayFixed) {
  Autotuner tuner({.threads = 2, .max_in_flight = 8, .tune_in_flight = false, .tune_prefetch = false}, {1, 1});
  std::string why;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(tuner.update(period(0.9, 0.1), why), (TuningSettings{1, 1}));
}

}  // namespace
}  // namespace sluice::runtime
