// The epoch's split among ranks and its resume at another world size, as index arithmetic: a job
// of W ranks is simulated by computing every rank's order. Samples mode: the union of the ranks'
// s-th batches (global step s) is the same at every world size for one global batch, and a run
// stopped at W and resumed at W' delivers every sample once with the uninterrupted run's global
// steps. Shards mode: each rank reads a contiguous run, and a resume at W' still delivers every
// remaining sample exactly once. Every rank yields as many batches; padding fills the short ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <span>
#include <vector>

#include "stages/source/epoch_order.hpp"

namespace sluice::stages {
namespace {

struct Job {
  std::int64_t items = 0;
  std::int64_t global_batch = 24;
  bool drop_last = false;
  ShardSplit split = ShardSplit::kSamples;
  std::int64_t buffer = 0;
  std::vector<std::int64_t> groups;

  EpochOrderOptions options(int rank, int world) const {
    return EpochOrderOptions{.items = items,
                             .shard_rank = rank,
                             .shard_world = world,
                             .file_seed = 17,
                             .shuffle_buffer = buffer,
                             .shuffle_seed = 5,
                             .groups = groups,
                             .batch = global_batch / world,
                             .drop_last = drop_last,
                             .split = split};
  }
};

// Global steps (sorted samples of every rank's batch, padding left out) from `from` on, of epoch
// `epoch` at `world` ranks after `done`; checks that every rank has as many batches and that
// only each rank's last batch holds padding, at its end.
std::map<std::int64_t, std::vector<std::int64_t>> run_steps(const Job& job, int world, std::int64_t epoch,
                                                             std::span<const EpochSegment> done,
                                                             std::int64_t stop = INT64_MAX) {
  std::map<std::int64_t, std::vector<std::int64_t>> steps;
  std::int64_t batches = -1;
  const std::int64_t b = job.global_batch / world;
  for (int rank = 0; rank < world; ++rank) {
    EpochOrder order(job.options(rank, world));
    std::vector<std::int64_t> out;
    const EpochSlice slice = order.compute(epoch, done, out);
    EXPECT_EQ(static_cast<std::int64_t>(out.size()), slice.positions);
    if (batches >= 0) {
      EXPECT_EQ(slice.batches, batches) << "rank " << rank << " of " << world;
    }
    batches = slice.batches;
    EXPECT_GE(slice.real, slice.positions - b) << "padding beyond the last batch";
    for (std::int64_t k = slice.skip; k < slice.batches && slice.first_step + k < stop; ++k) {
      auto& step = steps[slice.first_step + k];
      for (std::int64_t i = k * b; i < std::min((k + 1) * b, slice.real); ++i) step.push_back(out[static_cast<std::size_t>(i)]);
    }
  }
  for (auto& [s, v] : steps) std::sort(v.begin(), v.end());
  return steps;
}

// Every item once over `delivered`; under drop_last, fewer than one global batch missing.
void expect_exactly_once(const Job& job, const std::vector<std::int64_t>& delivered, const std::string& what) {
  std::set<std::int64_t> unique(delivered.begin(), delivered.end());
  EXPECT_EQ(unique.size(), delivered.size()) << what << ": a sample delivered twice";
  const auto missing = job.items - static_cast<std::int64_t>(unique.size());
  if (job.drop_last) {
    EXPECT_GE(missing, 0) << what;
    EXPECT_LT(missing, job.global_batch) << what;
  } else {
    EXPECT_EQ(missing, 0) << what;
  }
}

std::vector<std::int64_t> flatten(const std::map<std::int64_t, std::vector<std::int64_t>>& steps) {
  std::vector<std::int64_t> out;
  for (const auto& [s, v] : steps) out.insert(out.end(), v.begin(), v.end());
  return out;
}

TEST(EpochSplit, GlobalStepsAreTheSameAtEveryWorldSize) {
  for (const bool drop_last : {false, true}) {
    for (const std::int64_t buffer : {std::int64_t{0}, std::int64_t{40}}) {
      const Job job{.items = 2017, .global_batch = 840, .drop_last = drop_last, .buffer = buffer};
      const auto one = run_steps(job, 1, 2, {});
      EXPECT_EQ(one.size(), drop_last ? 2u : 3u);
      expect_exactly_once(job, flatten(one), "one rank");
      for (int world = 2; world <= 8; ++world) {
        EXPECT_EQ(run_steps(job, world, 2, {}), one) << world << " ranks, drop_last " << drop_last;
      }
    }
  }
}

TEST(EpochSplit, EveryRankHasAsManyBatchesAndPaddingOnlyAtTheEnd) {
  for (const ShardSplit split : {ShardSplit::kSamples, ShardSplit::kShards}) {
    for (const std::int64_t items : {std::int64_t{1}, std::int64_t{7}, std::int64_t{97}, std::int64_t{240}}) {
      for (const int world : {1, 2, 3, 4, 6, 8}) {
        if (items < world) continue;
        const Job job{.items = items, .global_batch = 24, .split = split};
        const auto steps = run_steps(job, world, 0, {});  // checks equal batch counts
        expect_exactly_once(job, flatten(steps), std::to_string(world) + " ranks");
        // The padded positions repeat the rank's own samples.
        EpochOrder order(job.options(world - 1, world));
        std::vector<std::int64_t> out;
        const EpochSlice slice = order.compute(0, out);
        EXPECT_EQ(slice.positions, (items + world - 1) / world);
        for (std::int64_t i = slice.real; i < slice.positions && slice.real > 0; ++i) {
          EXPECT_NE(std::find(out.begin(), out.begin() + slice.real, out[static_cast<std::size_t>(i)]),
                    out.begin() + slice.real);
        }
      }
    }
  }
}

// A run at `world` stopped after `stop` global steps of epoch 1, resumed at `next`.
void check_resume(const Job& job, int world, int next, std::int64_t stop) {
  const std::string what = std::to_string(world) + " -> " + std::to_string(next) + " ranks after " +
                           std::to_string(stop) + " steps, drop_last " + std::to_string(job.drop_last) + ", buffer " +
                           std::to_string(job.buffer) + (job.split == ShardSplit::kShards ? ", shards" : ", samples");
  const auto before = run_steps(job, world, 1, {}, stop);
  const EpochSegment segment{world, stop};
  const auto after = run_steps(job, next, 1, std::span(&segment, 1));
  std::vector<std::int64_t> delivered = flatten(before);
  const std::vector<std::int64_t> rest = flatten(after);
  delivered.insert(delivered.end(), rest.begin(), rest.end());
  expect_exactly_once(job, delivered, what);
  if (job.split == ShardSplit::kSamples) {
    auto uninterrupted = run_steps(job, 1, 1, {});
    uninterrupted.erase(uninterrupted.begin(), uninterrupted.lower_bound(stop));
    EXPECT_EQ(after, uninterrupted) << what;
  } else if (world == next) {
    auto uninterrupted = run_steps(job, world, 1, {});
    uninterrupted.erase(uninterrupted.begin(), uninterrupted.lower_bound(stop));
    EXPECT_EQ(after, uninterrupted) << what << ": the same world continues its runs";
  }
}

TEST(EpochSplit, ResumeAtAnyWorldSizeDeliversEverySampleOnce) {
  const std::vector<std::int64_t> groups = {0, 40, 41, 100, 160, 173, 230, 251};  // 7 tar shards
  for (const ShardSplit split : {ShardSplit::kSamples, ShardSplit::kShards}) {
    for (const bool drop_last : {false, true}) {
      for (const std::int64_t buffer : {std::int64_t{0}, std::int64_t{16}}) {
        Job job{.items = 251, .global_batch = 24, .drop_last = drop_last, .split = split, .buffer = buffer};
        if (split == ShardSplit::kShards) job.groups = groups;
        for (const int world : {1, 2, 3, 4, 6, 8}) {
          const std::int64_t steps = static_cast<std::int64_t>(run_steps(job, world, 1, {}).size());
          for (const int next : {1, 2, 3, 4, 6, 8}) {
            for (const std::int64_t stop : {std::int64_t{1}, steps / 2, steps - 1}) check_resume(job, world, next, stop);
          }
        }
      }
    }
  }
}

TEST(EpochSplit, ShardsModeSurvivesAChainOfResizes) {
  const Job job{.items = 251, .global_batch = 24, .split = ShardSplit::kShards, .groups = {0, 40, 41, 100, 160, 173, 230, 251}};
  // 8 ranks for 2 steps, then 3 ranks for 1 step, then 6 ranks for 2, then 4 to the end.
  const std::vector<EpochSegment> chain = {{8, 2}, {3, 1}, {6, 2}};
  std::vector<std::int64_t> delivered;
  for (std::size_t k = 0; k < chain.size(); ++k) {
    const auto part = run_steps(job, chain[k].world, 0, std::span(chain.data(), k), chain[k].steps + [&] {
      std::int64_t before = 0;
      for (std::size_t j = 0; j < k; ++j) before += chain[j].steps;
      return before;
    }());
    ASSERT_EQ(static_cast<std::int64_t>(part.size()), chain[k].steps);
    const auto v = flatten(part);
    delivered.insert(delivered.end(), v.begin(), v.end());
  }
  const auto rest = flatten(run_steps(job, 4, 0, chain));
  delivered.insert(delivered.end(), rest.begin(), rest.end());
  expect_exactly_once(job, delivered, "8 -> 3 -> 6 -> 4 ranks");
}

TEST(EpochSplit, ShardsModeKeepsEachRanksReadsInFewShards) {
  // 16 shards of 16: at 4 ranks each rank reads 4 whole shards; by samples, every shard.
  std::vector<std::int64_t> groups;
  for (int g = 0; g <= 16; ++g) groups.push_back(16 * g);
  for (const ShardSplit split : {ShardSplit::kShards, ShardSplit::kSamples}) {
    const Job job{.items = 256, .global_batch = 32, .split = split, .groups = groups};
    EpochOrder order(job.options(1, 4));
    std::vector<std::int64_t> out;
    order.compute(0, out);
    std::set<std::int64_t> shards;
    for (const std::int64_t item : out) shards.insert(item / 16);
    EXPECT_EQ(shards.size(), split == ShardSplit::kShards ? 4u : 16u);
  }
}

}  // namespace
}  // namespace sluice::stages
