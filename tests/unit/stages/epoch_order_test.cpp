// Epoch order: shards are disjoint and cover the set, the file shuffle changes every epoch and
// is a pure function of (seed, epoch), the shuffle buffer is bounded and a permutation. Tar shards
// (groups): an epoch reads one shard after another, shard order and the order inside each shard
// change every epoch, and a rank's part is a contiguous run.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <set>

#include "sluice/core/error.hpp"
#include "sluice/core/rng.hpp"
#include "stages/source/epoch_order.hpp"

namespace sluice::stages {
namespace {

// The epoch's samples on this rank, without padding.
std::vector<std::int64_t> order_of(EpochOrderOptions options, std::int64_t epoch) {
  EpochOrder order(options);
  std::vector<std::int64_t> out;
  const EpochSlice slice = order.compute(epoch, out);
  out.resize(static_cast<std::size_t>(slice.real));
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

TEST(EpochOrder, FirstGroupIsTheGroupOfTheEpochsFirstItem_ForRankZeroOfAnyWorld) {
  // 13 shards of uneven sizes (one empty): the first item's shard, from the shard count alone.
  const std::vector<std::int64_t> groups = {0, 5, 9, 9, 20, 21, 30, 44, 50, 51, 60, 70, 77, 80};
  const auto group_of = [&](std::int64_t item) {
    return static_cast<std::uint32_t>(std::upper_bound(groups.begin(), groups.end(), item) - groups.begin() - 1);
  };
  std::set<std::uint32_t> firsts;
  for (const std::optional<std::uint64_t> seed : {std::optional<std::uint64_t>{}, std::optional<std::uint64_t>{3},
                                                  std::optional<std::uint64_t>{5}, std::optional<std::uint64_t>{77}}) {
    for (const std::int64_t epoch : {0, 1, 4}) {
      for (const int world : {1, 2, 3}) {
        const auto out = order_of({.items = 80, .shard_rank = 0, .shard_world = world, .file_seed = seed, .groups = groups,
                                   .split = ShardSplit::kShards},
                                  epoch);
        ASSERT_FALSE(out.empty());
        EXPECT_EQ(EpochOrder::first_group(seed, groups.size() - 1, epoch), group_of(out.front()))
            << "seed " << seed.value_or(0) << " epoch " << epoch << " world " << world;
      }
      firsts.insert(EpochOrder::first_group(seed, groups.size() - 1, epoch));
    }
  }
  EXPECT_GT(firsts.size(), 2u) << "the first shard follows the seed and the epoch";
  EXPECT_EQ(EpochOrder::first_group({}, groups.size() - 1, 0), 0u);
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

// The old folder order, computed the way it was before the order learned about groups: a folder's
// shuffled epochs must not change (saved states and published checksums rely on them).
TEST(EpochOrder, FolderFileShuffleIsTheFisherYatesItAlwaysWas) {
  std::vector<std::int64_t> expected(1000);
  std::iota(expected.begin(), expected.end(), 0);
  CounterRng rng(derive_key(42, 0x66696c65), 3, 0);
  for (std::int64_t i = 999; i > 0; --i) {
    std::swap(expected[static_cast<std::size_t>(i)], expected[rng.below(static_cast<std::uint64_t>(i + 1))]);
  }
  EXPECT_EQ(order_of({.items = 1000, .file_seed = 42}, 3), expected);
  std::vector<std::int64_t> rank1;
  for (std::size_t i = 1; i < expected.size(); i += 4) rank1.push_back(expected[i]);
  EXPECT_EQ(order_of({.items = 1000, .shard_rank = 1, .shard_world = 4, .file_seed = 42}, 3), rank1);
}

// Shards of sizes 100, 37, 250, 1, 112 (500 items).
const std::vector<std::int64_t> kGroups = {0, 100, 137, 387, 388, 500};

int group_of(std::int64_t item) {
  return static_cast<int>(std::upper_bound(kGroups.begin(), kGroups.end(), item) - kGroups.begin()) - 1;
}

TEST(EpochOrder, ShardGroupsAreReadOneAfterAnotherInANewOrderEachEpoch) {
  std::vector<std::vector<int>> group_orders;
  for (std::int64_t epoch = 0; epoch < 4; ++epoch) {
    const auto out = order_of({.items = 500, .file_seed = 7, .groups = kGroups}, epoch);
    ASSERT_EQ(std::set<std::int64_t>(out.begin(), out.end()).size(), 500u);  // a permutation
    std::vector<int> groups;
    for (const std::int64_t item : out) {
      if (groups.empty() || groups.back() != group_of(item)) groups.push_back(group_of(item));
    }
    EXPECT_EQ(groups.size(), 5u) << "each shard read in one run";
    group_orders.push_back(groups);
    // Inside a shard the items are shuffled too.
    const auto first = std::find_if(out.begin(), out.end(), [](std::int64_t i) { return group_of(i) == 2; });
    EXPECT_FALSE(std::is_sorted(first, first + 250)) << epoch;
    EXPECT_EQ(out, order_of({.items = 500, .file_seed = 7, .groups = kGroups}, epoch));  // pure function
  }
  EXPECT_NE(group_orders[0], group_orders[1]);
  EXPECT_NE(group_orders[1], group_orders[2]);
  // Without a seed: the shards and their members in order.
  const auto plain = order_of({.items = 500, .groups = kGroups}, 2);
  std::vector<std::int64_t> identity(500);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(plain, identity);
}

TEST(EpochOrder, ShardGroupsSplitIntoContiguousRunsOfEqualSize) {
  for (const int world : {2, 3, 5, 8}) {
    for (std::int64_t epoch = 0; epoch < 3; ++epoch) {
      const auto all = order_of({.items = 500, .file_seed = 11, .groups = kGroups}, epoch);
      std::vector<std::int64_t> joined;
      for (int rank = 0; rank < world; ++rank) {
        const auto part = order_of({.items = 500, .shard_rank = rank, .shard_world = world, .file_seed = 11, .groups = kGroups,
                                    .split = ShardSplit::kShards},
                                   epoch);
        EXPECT_EQ(static_cast<std::int64_t>(part.size()), 500 / world + (rank < 500 % world ? 1 : 0));
        joined.insert(joined.end(), part.begin(), part.end());
      }
      EXPECT_EQ(joined, all) << world << " ranks, epoch " << epoch;  // contiguous runs of the epoch's order
    }
  }
}

TEST(EpochOrder, MemoryBytesCoversWhatComputeHolds) {
  const EpochOrderOptions one{.items = 100000, .file_seed = 1, .shuffle_buffer = 64};
  const EpochOrderOptions four{.items = 100000, .shard_rank = 1, .shard_world = 4, .file_seed = 1};
  EXPECT_GE(EpochOrder::memory_bytes(one), 8u * 100000);
  EXPECT_LT(EpochOrder::memory_bytes(one), 8u * 100000 + 4096);  // no second copy with one rank
  EXPECT_GE(EpochOrder::memory_bytes(four), 8u * 25000 + 4u * 100000);
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
