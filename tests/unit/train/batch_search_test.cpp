// The batch-size search: the search logic on exact predicates, and the real search under an
// allocator limit: the batch it finds is the true largest (checked by real steps around it), in
// at most 6 trials, and no memory is left behind.
#include "sluice/train/batch_search.hpp"

#include <gtest/gtest.h>

#include <cstdio>

#include "sluice/core/error.hpp"
#include "allocator_test_support.hpp"
#include "sluice/train/allocator.hpp"

namespace sluice::train {
namespace {

BatchTrial fits_up_to(std::int64_t limit, std::int64_t b) { return BatchTrial{.batch = b, .fits = b <= limit}; }

TEST(BatchSearch, FindsTheLargestFromAnyGuess) {
  for (std::int64_t truth : {2, 3, 17, 64, 100, 1000, 4097}) {
    for (std::int64_t guess : {truth - 3, truth - 1, truth, truth + 1, truth + 5}) {
      if (guess < 1) continue;
      const BatchSearchResult r = search_max_batch([&](std::int64_t b) { return fits_up_to(truth, b); }, guess, {});
      EXPECT_EQ(r.batch, truth) << "truth " << truth << " guess " << guess;
      EXPECT_LE(r.trials.size(), 6u) << "truth " << truth << " guess " << guess;
    }
    // Without a guess: doubling from the minimum, then bisection (more trials).
    const BatchSearchResult r =
        search_max_batch([&](std::int64_t b) { return fits_up_to(truth, b); }, 0, {.max_trials = 40});
    EXPECT_EQ(r.batch, truth);
    EXPECT_LE(r.trials.size(), 26u);
  }
}

TEST(BatchSearch, RespectsGranularityAndBounds) {
  const BatchSearchOptions o{.min_batch = 2, .max_batch = 512, .granularity = 8};
  const BatchSearchResult r = search_max_batch([](std::int64_t b) { return fits_up_to(100, b); }, 50, o);
  EXPECT_EQ(r.batch, 96);
  for (const BatchTrial& t : r.trials) EXPECT_EQ(t.batch % 8, 0);
  const BatchSearchResult all = search_max_batch([](std::int64_t b) { return fits_up_to(1 << 20, b); }, 300, o);
  EXPECT_EQ(all.batch, 512);
  const BatchSearchResult none = search_max_batch([](std::int64_t b) { return fits_up_to(1, b); }, 40, o);
  EXPECT_EQ(none.batch, 0);
}

void expect_found_true_largest(AllocatorOptions options) {
  Allocator allocator(host(), options);
  Context ctx(allocator, ContextOptions{.threads = 2});
  const TrainConfig config{.model = "fashion-cnn", .optimizer = "sgd"};
  const std::uint64_t before = allocator.stats().in_use_bytes;
  const BatchSearchResult r = find_max_batch(ctx, config, {.min_batch = 2, .max_batch = 1024});
  std::printf("  limit %llu (%s): batch %lld, planner guess %lld from %d dry runs, %zu real trials:",
              static_cast<unsigned long long>(options.limit),
              options.mode == AllocatorMode::kGrow ? "grow" : "prealloc", static_cast<long long>(r.batch),
              static_cast<long long>(r.planner_guess), r.plans, r.trials.size());
  for (const BatchTrial& t : r.trials) std::printf(" %lld%s", static_cast<long long>(t.batch), t.fits ? "+" : "-");
  std::printf("\n");
  EXPECT_LE(r.trials.size(), 6u);
  ASSERT_GT(r.batch, 2);
  EXPECT_EQ(allocator.stats().in_use_bytes, before);  // no memory left behind
  allocator.check_invariants();
  // The true largest, by real steps: the found batch fits, the next ones do not.
  EXPECT_TRUE(try_batch(ctx, config, r.batch).fits);
  EXPECT_FALSE(try_batch(ctx, config, r.batch + 1).fits);
  EXPECT_FALSE(try_batch(ctx, config, r.batch + 2).fits);
  EXPECT_EQ(allocator.stats().in_use_bytes, before);
  // Without the planner: doubling from 2, then bisection, on real out-of-memory failures.
  const BatchSearchResult blind =
      find_max_batch(ctx, config, {.min_batch = 2, .max_batch = 1024, .max_trials = 20, .use_planner = false});
  std::printf("  without the planner: batch %lld in %zu real trials\n", static_cast<long long>(blind.batch),
              blind.trials.size());
  EXPECT_EQ(blind.batch, r.batch);
  EXPECT_EQ(allocator.stats().in_use_bytes, before);
}

TEST(BatchSearch, FindsTheTrueLargestUnderAGrowLimitIn6TrialsAndLeavesNothingBehind) {
  expect_found_true_largest(AllocatorOptions{.mode = AllocatorMode::kGrow, .limit = std::uint64_t{24} << 20});
}

TEST(BatchSearch, FindsTheTrueLargestInAPreallocatedRegion) {
  expect_found_true_largest(AllocatorOptions{.mode = AllocatorMode::kPreallocate, .limit = std::uint64_t{20} << 20});
}

TEST(BatchSearch, KeepsTheEffectiveBatchByRaisingAccumulation) {
  Allocator allocator(host(), AllocatorOptions{.mode = AllocatorMode::kGrow, .limit = std::uint64_t{24} << 20});
  Context ctx(allocator, ContextOptions{.threads = 2});
  const TrainConfig config{.model = "fashion-cnn", .batch = 128, .optimizer = "sgd"};
  const AccumulationSearchResult r = find_accumulation(ctx, config);
  std::printf("  batch 128 under grow:24MiB: accumulate %d (micro-batches of %lld), planner guess %d from %d dry "
              "runs, %zu real trials\n",
              r.accumulate, static_cast<long long>(128 / std::max(1, r.accumulate)), r.planner_guess, r.plans,
              r.trials.size());
  ASSERT_GT(r.accumulate, 1);
  EXPECT_EQ(128 % r.accumulate, 0);
  EXPECT_LE(r.trials.size(), 6u);
  EXPECT_EQ(allocator.stats().in_use_bytes, 0u);
  // The true smallest: it fits, the divisor below does not (real steps).
  TrainConfig c = config;
  c.accumulate = r.accumulate;
  EXPECT_TRUE(try_batch(ctx, c, 128).fits);
  c.accumulate = r.accumulate / 2;  // divisors of 128 are powers of two
  EXPECT_FALSE(try_batch(ctx, c, 128).fits);
}

TEST(BatchSearch, ATrialThatRunsOutReturnsEverything) {
  Allocator allocator(host(), AllocatorOptions{.mode = AllocatorMode::kPreallocate, .limit = std::uint64_t{8} << 20});
  Context ctx(allocator, ContextOptions{.threads = 2});
  const BatchTrial t = try_batch(ctx, TrainConfig{.model = "fashion-cnn"}, 512);
  EXPECT_FALSE(t.fits);
  EXPECT_EQ(allocator.stats().in_use_bytes, 0u);
  allocator.check_invariants();
}

TEST(BatchSearch, ResetGrowthMakesTheNextRegionsANewAllocators) {
  auto backing = test::FakeBacking::make();
  test::FakeBacking* b = backing.get();
  Allocator a(std::move(backing));
  a.deallocate(a.allocate(std::size_t{5} << 20, TensorCategory::kActivations));  // 2 MiB doubled to 8 MiB
  a.release_free_regions();
  EXPECT_TRUE(a.reset_growth());  // from 16 MiB back to 2 MiB
  void* p = a.allocate(1 << 20, TensorCategory::kActivations);
  EXPECT_EQ(b->region_sizes().back(), std::uint64_t{2} << 20);  // the first region of a new allocator
  a.deallocate(p);
}

// A block held across trials (a CUDA context's cuBLAS workspace, taken at setup): after the
// trial's regions go, growth resumes as a new allocator's would after taking that block, which is
// what the planner's dry run (it takes the same block first) assumes.
TEST(BatchSearch, ResetGrowthResumesAfterTheRegionsStillHeld) {
  auto backing = test::FakeBacking::make();
  test::FakeBacking* b = backing.get();
  Allocator a(std::move(backing));
  void* held = a.allocate(std::size_t{5} << 20, TensorCategory::kWorkspace);  // a region of 8 MiB
  a.deallocate(a.allocate(std::size_t{9} << 20, TensorCategory::kActivations));  // 16 MiB; next 32 MiB
  a.release_free_regions();
  EXPECT_TRUE(a.reset_growth());  // 32 MiB back to 16 MiB: a new allocator's next after 8 MiB
  EXPECT_FALSE(a.reset_growth());  // nothing left to change
  void* p = a.allocate(std::size_t{4} << 20, TensorCategory::kActivations);  // 3 MiB free in the held region
  EXPECT_EQ(b->region_sizes().back(), std::uint64_t{16} << 20);
  a.deallocate(p);
  a.deallocate(held);
}

TEST(BatchSearch, WithoutALimitItIsAClearError) {
  Allocator allocator(host());
  Context ctx(allocator, ContextOptions{.threads = 1});
  EXPECT_THROW(find_max_batch(ctx, TrainConfig{}), Error);
}

}  // namespace
}  // namespace sluice::train
