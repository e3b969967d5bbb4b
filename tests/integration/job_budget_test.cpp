// Pipelines inside a training job's budget (BuildOptions::job_budget): a loader's reservations
// count in the job, its stats list its own uses, build() fails when the job has less room than
// the pipeline's minimum, stopping a loader leaves the job and its other parts running,
// Pipeline::plan_memory predicts build()'s minimum and the cache of a whole data set exactly, and
// the training allocator's growth takes memory back from a pipeline's memory cache.
#include <gtest/gtest.h>

#include <regex>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/loader_batches.hpp"
#include "sluice/sluice.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/backing.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

using test::TempDir;

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

// 3 classes of 40 generated 32 x 32 RGB JPEGs, as CIFAR's.
class JobBudgetTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    test::make_image_folder(dir_->path(), 3, 40, 32, 32);
  }
  static void TearDownTestSuite() { delete dir_; }

  static Pipeline pipeline(bool cached) {
    Pipeline p = Pipeline::from_folder(dir_->path().string());
    p.shuffle_files(1).read().decode_jpeg();
    if (cached) p.cache(MemoryCache{});
    p.normalize({.mean = {0.5f, 0.5f, 0.5f}, .std = {0.25f, 0.25f, 0.25f}}).batch(8, {.drop_last = true});
    return p;
  }
  static std::int64_t run_epoch(Loader& loader, std::int64_t e) {
    std::int64_t n = 0;
    for (Batch& b : loader.epoch(e)) n += b.size();
    return n;
  }

  static TempDir* dir_;
};
TempDir* JobBudgetTest::dir_ = nullptr;

TEST_F(JobBudgetTest, ALoadersReservationsCountInTheJobAndItsStatsListItsOwnUses) {
  auto job = std::make_shared<MemoryBudget>(64 * kMiB);
  auto training = job->try_reserve(8 * kMiB, MemoryUse::kTraining);
  Loader loader = pipeline(false).build({.threads = 2, .seed = 1, .job_budget = job});
  EXPECT_EQ(run_epoch(loader, 0), 120);
  const Stats st = loader.stats();
  EXPECT_EQ(st.memory_budget, 64 * kMiB);  // no cap of its own: the job's limit bounds it
  EXPECT_GT(st.memory_used, 0u);
  EXPECT_EQ(job->used(), 8 * kMiB + st.memory_used);
  EXPECT_EQ(st.memory.size(), static_cast<std::size_t>(kPipelineUseCount));
  for (const MemoryStats& m : st.memory) EXPECT_NE(m.use, "training");
}

TEST_F(JobBudgetTest, BuildFailsWhenTheJobHasLessRoomThanTheMinimumWithTheNumbers) {
  const PipelineMemoryPlan need = pipeline(false).plan_memory({.threads = 2, .seed = 1});
  auto job = std::make_shared<MemoryBudget>(need.minimum_bytes() + kMiB);
  auto training = job->try_reserve(kMiB + 1, MemoryUse::kTraining);
  try {
    (void)pipeline(false).build({.threads = 2, .seed = 1, .job_budget = job});
    FAIL() << "expected kOutOfBudget";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfBudget);
    const std::string what = e.what();
    EXPECT_NE(what.find("the pipeline needs at least " + need.explain), std::string::npos) << what;
    EXPECT_NE(what.find("raise the job's limit by 1 B"), std::string::npos) << what;
  }
  training->shrink(1);
  Loader fits = pipeline(false).build({.threads = 2, .seed = 1, .job_budget = job});
  EXPECT_EQ(run_epoch(fits, 0), 120);
}

TEST_F(JobBudgetTest, StoppingALoaderLeavesTheJobAndItsOtherPipelinesRunning) {
  auto job = std::make_shared<MemoryBudget>(64 * kMiB);
  Loader train = pipeline(false).build({.threads = 2, .seed = 1, .job_budget = job});
  {
    Loader eval = pipeline(false).build({.threads = 1, .seed = 2, .job_budget = job});
    EXPECT_EQ(run_epoch(eval, 0), 120);
  }
  EXPECT_EQ(run_epoch(train, 0), 120);
  EXPECT_TRUE(job->try_reserve(kMiB, MemoryUse::kTraining));
}

TEST_F(JobBudgetTest, PlanMemoryPredictsBuildsMinimum) {
  const Pipeline p = pipeline(false);
  const PipelineMemoryPlan plan = p.plan_memory({.threads = 2, .seed = 1});
  try {
    (void)p.build({.memory_budget = 1024, .threads = 2, .seed = 1});
    FAIL() << "expected kOutOfBudget";
  } catch (const Error& e) {
    std::smatch m;
    const std::string what = e.what();
    ASSERT_TRUE(std::regex_search(what, m, std::regex("\\(([0-9]+) bytes\\)"))) << what;
    EXPECT_EQ(std::stoull(m[1].str()), plan.minimum_bytes());
  }
  EXPECT_EQ(plan.items, 120);
  EXPECT_EQ(plan.min_slots, 3);
  EXPECT_EQ(plan.start_slots, 4);  // the default prefetch depth of 2, and 2 more
  EXPECT_EQ(plan.minimum[static_cast<std::size_t>(MemoryUse::kBatches)], 3 * plan.slot_bytes);
  EXPECT_EQ(plan.decoded_set_bytes, 120u * (64 + 32 * 32 * 3));  // header and pixels per image
}

TEST(JobBudgetDataset, PlanMemoryGivesCifarsDecodedSetExactly) {
  SLUICE_REQUIRE_DATASET(data, "cifar10/test");
  const PipelineMemoryPlan plan = Pipeline::from_folder(data.string()).read().decode_jpeg().batch(64).plan_memory(
      {.threads = 1});
  EXPECT_EQ(plan.items, 10000);
  EXPECT_EQ(plan.decoded_set_bytes, 10000u * (64 + 32 * 32 * 3));
  EXPECT_GT(plan.encoded_set_bytes, 10000u * 500);  // about 920 B a file (9.2 MB for 10,000)
  EXPECT_LT(plan.encoded_set_bytes, 10000u * 2000);
}

TEST_F(JobBudgetTest, TheTrainingAllocatorsGrowthTakesMemoryBackFromAPipelinesCache) {
  // The cache holds the whole decoded set after one epoch; the allocator then grows past its
  // floor into what the cache holds, and the cache gives entries back instead of the growth
  // failing.
  const PipelineMemoryPlan need = pipeline(true).plan_memory({.threads = 2, .seed = 1});
  const std::uint64_t limit = need.minimum_bytes() + 2 * need.slot_bytes + need.decoded_set_bytes + 4 * kMiB;
  auto job = std::make_shared<MemoryBudget>(limit);
  Allocator allocator(make_budgeted_backing(make_host_backing(), job, {.floor = 2 * kMiB}),
                      AllocatorOptions{.mode = AllocatorMode::kGrow, .initial_region_bytes = 2 * kMiB,
                                       .growth = RegionGrowth::kRequest});
  void* first = allocator.allocate(kMiB, TensorCategory::kWeights);  // the floor's region
  Loader loader = pipeline(true).build({.threads = 2, .seed = 1, .job_budget = job});
  EXPECT_EQ(run_epoch(loader, 0), 120);
  const Stats filled = loader.stats();
  EXPECT_EQ(filled.cache.entries, 120);
  EXPECT_EQ(filled.cache.dropped, 0);
  const std::uint64_t free_now = job->available();
  // A block larger than what the job has free: only the cache can make room for it.
  const std::uint64_t block = free_now + 64 * 1024;
  void* p = allocator.allocate(block, TensorCategory::kActivations);
  ASSERT_NE(p, nullptr);
  const Stats after = loader.stats();
  EXPECT_GT(after.cache.dropped, 0);
  EXPECT_LT(after.cache.entries, 120);
  EXPECT_LE(job->peak(), limit);
  // The next epoch reads what the cache gave back and hits the rest.
  EXPECT_EQ(run_epoch(loader, 1), 120);
  const Stats second = loader.stats();
  EXPECT_EQ(second.cache.hits - after.cache.hits, after.cache.entries);
  allocator.deallocate(p);
  allocator.deallocate(first);
}

}  // namespace
}  // namespace sluice
