// Epoch order: shards are disjoint and cover the set, the file shuffle changes every epoch and
// is a pure function of (seed, epoch), the shuffle buffer is bounded and a permutation.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "sluice/core/error.hpp"
#include "sluice/core/rng.hpp"
#include "stages/epoch_order.hpp"

namespace sluice::stages {
namespace {

std::vector<std::int64_t> order_of(EpochOrderOptions options, std::int64_t epoch) {
  EpochOrder order(options);
  std::vector<std::int64_t> out;
  order.compute(epoch, out);
  return out;
}

TEST(EpochOrder, WithoutShuffleIsIdentity) {
  const auto out = order_of({.items = 10}, 3);
  std::vector<std::int64_t> expected(10);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(out, expected);
}

TEST(EpochOrder, ShardsAreDisjointAndCoverEveryEpoch) {
  for (int world : {1, 2, 3, 7}) {
    for (std::int64_t epoch : {0, 1, 5}) {
      std::vector<int> seen(103, 0);
      for (int rank = 0; rank < world; ++rank) {
        const auto out = order_of({.items = 103, .shard_rank = rank, .shard_world = world, .file_seed = 9}, epoch);
        EXPECT_LE(std::abs(static_cast<long>(out.size()) - 103 / world), 1);
        for (auto i : out) ++seen[static_cast<std::size_t>(i)];
      }
      for (int count : seen) ASSERT_EQ(count, 1) << "world " << world << " epoch " << epoch;
    }
  }
}

TEST(EpochOrder, FileShuffleIsSeededAndChangesEachEpoch) {
  const EpochOrderOptions options{.items = 1000, .file_seed = 42};
  const auto e0 = order_of(options, 0);
  EXPECT_EQ(e0, order_of(options, 0));
  EXPECT_NE(e0, order_of(options, 1));
  auto other_seed = options;
  other_seed.file_seed = 43;
  EXPECT_NE(e0, order_of(other_seed, 0));
  auto sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  for (std::int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[static_cast<std::size_t>(i)], i);
}

TEST(EpochOrder, ShuffleBufferIsABoundedPermutation) {
  for (std::int64_t k : {2, 16, 100, 5000}) {
    const auto out = order_of({.items = 1000, .shuffle_buffer = k, .shuffle_seed = 3}, 2);
    auto sorted = out;
    std::sort(sorted.begin(), sorted.end());
    for (std::int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[static_cast<std::size_t>(i)], i);
    // An element can leave the buffer only after it entered: input i appears at output >= i - k + 1.
    for (std::size_t pos = 0; pos < out.size(); ++pos) {
      ASSERT_LT(out[pos], static_cast<std::int64_t>(pos) + k) << "k " << k;
    }
    EXPECT_NE(out, order_of({.items = 1000, .shuffle_buffer = k, .shuffle_seed = 3}, 3));
  }
}

TEST(EpochOrder, ShuffleBufferMatchesASampleLevelBuffer) {
  // Reference: the same algorithm run on values, as a streaming sample buffer would.
  const std::int64_t n = 300;
  const std::int64_t k = 32;
  const auto out = order_of({.items = n, .shuffle_buffer = k, .shuffle_seed = 11}, 4);
  CounterRng rng(derive_key(11, 0x62756666), 4, 0);
  std::vector<std::int64_t> buffer;
  std::vector<std::int64_t> expected;
  std::int64_t next = 0;
  while (next < k) buffer.push_back(next++);
  while (!buffer.empty()) {
    const auto slot = static_cast<std::size_t>(rng.below(buffer.size()));
    expected.push_back(buffer[slot]);
    if (next < n) {
      buffer[slot] = next++;
    } else {
      buffer[slot] = buffer.back();
      buffer.pop_back();
    }
  }
  EXPECT_EQ(out, expected);
}

TEST(EpochOrder, BadShardIsAConfigurationError) {
  EXPECT_THROW(EpochOrder({.items = 10, .shard_rank = 2, .shard_world = 2}), Error);
  EXPECT_THROW(EpochOrder({.items = 10, .shard_rank = 0, .shard_world = 0}), Error);
}

TEST(EpochOrder, ComputeReusesStorage) {
  EpochOrder order({.items = 5000, .file_seed = 1, .shuffle_buffer = 64});
  std::vector<std::int64_t> out;
  order.compute(0, out);
  const auto* data = out.data();
  for (int e = 1; e < 5; ++e) order.compute(e, out);
  EXPECT_EQ(out.data(), data);
}

}  // namespace
}  // namespace sluice::stages
