// The streaming read-ahead depth (stages/remote/http_transport.hpp's read_ahead_depth, what
// TransferLimits::tune_depth keeps in flight): from given latency, bandwidth and object size, its
// bounds, and how it follows the measurements as they move.
#include <gtest/gtest.h>

#include "stages/remote/http_transport.hpp"

namespace sluice::stages::remote {
namespace {

constexpr double kMiB = 1 << 20;

TEST(ReadAheadDepth, CoversTheBytesArrivingWhileARequestWaitsForItsFirstByte) {
  // 40 ms at 100 MiB/s brings 4 MiB while a request waits: 8 MiB shards need one more in
  // flight, 1 MiB shards four more, 512 KiB ones eight more.
  EXPECT_EQ(read_ahead_depth(0.040, 100 * kMiB, 8 * kMiB, 16), 2);
  EXPECT_EQ(read_ahead_depth(0.040, 100 * kMiB, 1 * kMiB, 16), 5);
  EXPECT_EQ(read_ahead_depth(0.040, 100 * kMiB, 0.5 * kMiB, 16), 9);
  // A part of an object rounds up: 4.1 MiB over 1 MiB objects needs five more.
  EXPECT_EQ(read_ahead_depth(0.041, 100 * kMiB, 1 * kMiB, 16), 6);
}

TEST(ReadAheadDepth, StaysBetweenTwoAndTheMost) {
  EXPECT_EQ(read_ahead_depth(0.0001, 1 * kMiB, 100 * kMiB, 8), 2) << "a fast nearby server still overlaps two";
  EXPECT_EQ(read_ahead_depth(1.0, 1000 * kMiB, 1 * kMiB, 8), 8) << "never past the connections";
  EXPECT_EQ(read_ahead_depth(1.0, 1000 * kMiB, 1 * kMiB, 1), 1) << "one connection: one transfer";
  // Nothing measured yet (no first byte, no byte, no announced size): the starting two.
  EXPECT_EQ(read_ahead_depth(0, 100 * kMiB, 1 * kMiB, 8), 2);
  EXPECT_EQ(read_ahead_depth(0.040, 0, 1 * kMiB, 8), 2);
  EXPECT_EQ(read_ahead_depth(0.040, 100 * kMiB, 0, 8), 2);
  EXPECT_EQ(read_ahead_depth(-1, -1, -1, 8), 2);
}

TEST(ReadAheadDepth, FollowsTheMeasurementsAsTheyMove) {
  // Rising latency or bandwidth deepens it, larger objects make it shallower, and it comes back
  // when they go back: it is a function of the measurements, not of its own history.
  int last = read_ahead_depth(0.010, 50 * kMiB, 1 * kMiB, 64);
  for (const double latency : {0.040, 0.080, 0.160, 0.320}) {
    const int depth = read_ahead_depth(latency, 50 * kMiB, 1 * kMiB, 64);
    EXPECT_GT(depth, last) << latency << " s";
    last = depth;
  }
  last = read_ahead_depth(0.040, 10 * kMiB, 1 * kMiB, 64);
  for (const double bandwidth : {40 * kMiB, 160 * kMiB, 640 * kMiB}) {
    const int depth = read_ahead_depth(0.040, bandwidth, 1 * kMiB, 64);
    EXPECT_GT(depth, last) << bandwidth << " B/s";
    last = depth;
  }
  last = read_ahead_depth(0.040, 100 * kMiB, 0.25 * kMiB, 64);
  for (const double size : {0.5 * kMiB, 1 * kMiB, 2 * kMiB}) {
    const int depth = read_ahead_depth(0.040, 100 * kMiB, size, 64);
    EXPECT_LT(depth, last) << size << " bytes";
    last = depth;
  }
  EXPECT_EQ(read_ahead_depth(0.010, 50 * kMiB, 1 * kMiB, 64), read_ahead_depth(0.010, 50 * kMiB, 1 * kMiB, 64));
}

}  // namespace
}  // namespace sluice::stages::remote
