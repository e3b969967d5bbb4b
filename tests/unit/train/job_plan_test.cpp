// One memory limit for a training job (sluice/train/job_plan.hpp): the budgeted backing holds its
// floor and grows past it only by taking memory back from a cache; the tightest region is the
// smallest the dry run fits; the plan gives training its region, the pipelines their minimums and
// the rest to prefetch and caches, and fails below the minimums with both numbers; a real run in
// the plan's allocator stays in its region; the searches inside the job limit find the largest
// batch and the fewest micro-batches whose whole job fits.
#include "sluice/train/job_plan.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "allocator_test_support.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"
#include "sluice/train/context.hpp"
#include "sluice/train/epoch_runner.hpp"
#include "sluice/train/models.hpp"
#include "sluice/train/out_of_memory.hpp"
#include "sluice/train/trainer.hpp"

namespace sluice::train {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

// A cache stand-in in a part of the job's budget: entries of 1 MiB given back on request.
struct FakeCache {
  explicit FakeCache(std::shared_ptr<MemoryBudget> job) : part(std::make_shared<MemoryBudget>(0, std::move(job))) {
    id = part->add_reclaimer([this](std::uint64_t bytes) {
      ++calls;
      std::uint64_t freed = 0;
      while (freed < bytes && !entries.empty()) {
        freed += entries.back().bytes();
        entries.pop_back();
      }
      return freed;
    });
  }
  ~FakeCache() { part->remove_reclaimer(id); }
  void fill_all() {
    while (auto r = part->try_reserve(kMiB, MemoryUse::kCache)) entries.push_back(std::move(*r));
  }
  std::shared_ptr<MemoryBudget> part;
  std::vector<Reservation> entries;
  int id = -1;
  int calls = 0;
};

TEST(BudgetedBacking, HoldsItsFloorAndGrowsPastItOnlyByReclaiming) {
  auto job = std::make_shared<MemoryBudget>(64 * kMiB);
  FakeCache cache(job);
  Allocator allocator(make_budgeted_backing(test::FakeBacking::make(), job, {.floor = 16 * kMiB}),
                      AllocatorOptions{.mode = AllocatorMode::kGrow, .initial_region_bytes = 16 * kMiB,
                                       .growth = RegionGrowth::kRequest});
  EXPECT_EQ(job->used(MemoryUse::kTraining), 16 * kMiB);  // held before any region exists
  cache.fill_all();
  EXPECT_EQ(job->used(), 64 * kMiB);
  void* a = allocator.allocate(12 * kMiB, TensorCategory::kActivations);  // inside the floor
  EXPECT_EQ(cache.calls, 0);
  EXPECT_EQ(job->used(MemoryUse::kTraining), 16 * kMiB);
  // Past the floor: a region of the request alone, reclaimed from the cache, no more.
  void* b = allocator.allocate(10 * kMiB, TensorCategory::kActivations);
  EXPECT_EQ(cache.calls, 1);
  EXPECT_EQ(job->used(MemoryUse::kTraining), 26 * kMiB);
  EXPECT_EQ(cache.entries.size(), 38u);
  EXPECT_LE(job->peak(), 64 * kMiB);
  // Freeing the region gives the bytes past the floor back; the floor stays.
  allocator.deallocate(b);
  allocator.release_free_regions();
  EXPECT_EQ(job->used(MemoryUse::kTraining), 16 * kMiB);
  allocator.deallocate(a);
}

TEST(BudgetedBacking, RunsOutWithTheBudgetInTheReportWhenNothingCanBeReclaimed) {
  auto job = std::make_shared<MemoryBudget>(32 * kMiB);
  Allocator allocator(make_budgeted_backing(test::FakeBacking::make(), job, {.floor = 8 * kMiB}),
                      AllocatorOptions{.mode = AllocatorMode::kGrow, .initial_region_bytes = 8 * kMiB,
                                       .growth = RegionGrowth::kRequest});
  auto other = job->try_reserve(20 * kMiB, MemoryUse::kBatches);  // held, not reclaimable
  void* a = allocator.allocate(6 * kMiB, TensorCategory::kActivations);
  try {
    allocator.allocate(8 * kMiB, TensorCategory::kActivations);
    FAIL() << "expected out of memory";
  } catch (const OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find("inside a memory budget of 32.00 MiB"), std::string::npos) << e.what();
  }
  EXPECT_EQ(job->used(MemoryUse::kTraining), 8 * kMiB);  // the failed growth took nothing
  allocator.deallocate(a);
  // A floor the budget cannot hold is refused at once.
  EXPECT_THROW(make_budgeted_backing(test::FakeBacking::make(), job, {.floor = 8 * kMiB}), Error);
}

PlanConfig fashion(std::int64_t batch) {
  return PlanConfig{.train = TrainConfig{.model = "fashion-cnn", .batch = batch}, .threads = 2, .eval_batch = 0};
}

TEST(TightestRegion, IsTheSmallestSingleRegionTheDryRunFits) {
  for (const std::int64_t batch : {16, 64}) {
    const std::uint64_t region = tightest_region(fashion(batch), std::uint64_t{1} << 30);
    ASSERT_GT(region, 0u);
    EXPECT_EQ(region % Allocator::kGranularity, 0u);
    PlanConfig at = fashion(batch);
    at.allocator = AllocatorOptions{.mode = AllocatorMode::kPreallocate, .limit = region};
    const TrainingMemoryPlan fits = plan_peak(at);
    EXPECT_TRUE(fits.fits) << batch;
    EXPECT_GE(region, fits.peak_in_use_bytes);
    at.allocator.limit = region - Allocator::kGranularity;
    EXPECT_FALSE(plan_peak(at).fits) << batch << ": " << region << " is not the tightest";
    // And far tighter than the doubling allocator's regions.
    EXPECT_LT(region, plan_peak(fashion(batch)).reserved_bytes) << batch;
  }
  EXPECT_EQ(tightest_region(fashion(64), 4 * kMiB), 0u);  // below its peak in use: none fits
}

// Pipelines as a loader's memory plan would give them: a ring of 3 slots of batch x 3 KiB, two
// workers' buffers, indices; 4 MiB of decoded images; read for `passes` epochs.
std::vector<PipelineNeeds> toy_pipelines(std::int64_t batch, std::int64_t passes) {
  PipelineNeeds train{.name = "training pipeline", .slot_bytes = static_cast<std::uint64_t>(batch) * 3072,
                      .start_slots = 1, .cache_set_bytes = 4 * kMiB, .passes = passes};
  train.minimum[static_cast<std::size_t>(MemoryUse::kBatches)] = 3 * train.slot_bytes;
  train.minimum[static_cast<std::size_t>(MemoryUse::kReadBuffers)] = 2 * 8192;
  train.minimum[static_cast<std::size_t>(MemoryUse::kDecodeBuffers)] = 2 * 65536;
  train.minimum[static_cast<std::size_t>(MemoryUse::kShuffle)] = 100000;
  PipelineNeeds eval = train;
  eval.name = "evaluation pipeline";
  eval.slot_bytes = 256 * 3072;
  eval.minimum[static_cast<std::size_t>(MemoryUse::kBatches)] = 3 * eval.slot_bytes;
  eval.cache_set_bytes = kMiB;
  return {train, eval};
}

JobConfig job_config(std::uint64_t limit, std::int64_t batch, std::int64_t passes = 3) {
  return JobConfig{.train = TrainConfig{.model = "fashion-cnn", .batch = batch}, .threads = 2, .eval_batch = 0,
                   .memory_limit = limit,
                   .pipelines = [passes](std::int64_t b) { return toy_pipelines(b, passes); }};
}

TEST(JobPlan, GivesTrainingItsTightestRegionThePipelinesTheirMinimumsAndTheRestToCaches) {
  const JobPlan plan = plan_job(job_config(64 * kMiB, 32));
  ASSERT_TRUE(plan.fits) << plan.failure;
  EXPECT_FALSE(plan.hand_split);
  EXPECT_EQ(plan.training_bytes, tightest_region(fashion(32), 64 * kMiB));
  EXPECT_EQ(plan.allocator.initial_region_bytes, plan.training_bytes);
  EXPECT_EQ(plan.allocator.limit, 0u);  // growth past the region goes to the budget, not to a cap
  ASSERT_EQ(plan.pipelines.size(), 2u);
  for (const PipelineShare& p : plan.pipelines) {
    EXPECT_EQ(p.prefetch_bytes, p.needs.slot_bytes);           // the start slot beyond the minimum
    EXPECT_EQ(p.cache_bytes, p.needs.cache_set_bytes) << p.needs.name;  // the whole set fits
  }
  EXPECT_EQ(plan.host_bytes() + plan.unused_bytes, 64 * kMiB);
  EXPECT_NE(plan.unused_reason.find("cached whole"), std::string::npos) << plan.unused_reason;
  const std::string text = plan.explain();
  for (const char* part : {"training", "training pipeline", "evaluation pipeline", "+ cache", "+ prefetch", "unused",
                           "batches", "read_buffers"}) {
    EXPECT_NE(text.find(part), std::string::npos) << part << " in\n" << text;
  }
}

TEST(JobPlan, ATighterLimitCachesPartOfTheDataSetAndNothingIsLeft) {
  const JobPlan roomy = plan_job(job_config(64 * kMiB, 32));
  const std::uint64_t minimums = roomy.host_bytes() - roomy.pipelines[0].cache_bytes - roomy.pipelines[1].cache_bytes;
  const JobPlan plan = plan_job(job_config(minimums + 2 * kMiB, 32));
  ASSERT_TRUE(plan.fits) << plan.failure;
  EXPECT_EQ(plan.pipelines[0].cache_bytes, 2 * kMiB);  // the training pipeline's cache first
  EXPECT_EQ(plan.pipelines[1].cache_bytes, 0u);
  EXPECT_EQ(plan.unused_bytes, 0u);
  EXPECT_EQ(plan.host_bytes(), minimums + 2 * kMiB);
}

TEST(JobPlan, OnePassCachesNothing) {
  const JobPlan plan = plan_job(job_config(64 * kMiB, 32, 1));
  ASSERT_TRUE(plan.fits);
  for (const PipelineShare& p : plan.pipelines) EXPECT_EQ(p.cache_bytes, 0u);
  EXPECT_NE(plan.unused_reason.find("never be read"), std::string::npos) << plan.unused_reason;
}

TEST(JobPlan, BelowTheMinimumsItFailsWithBothNumbersAndWhatToChange) {
  const JobPlan roomy = plan_job(job_config(64 * kMiB, 32));
  const std::uint64_t need = roomy.training_bytes + roomy.pipelines[0].needs.minimum_bytes() +
                             roomy.pipelines[1].needs.minimum_bytes();
  const JobPlan exact = plan_job(job_config(need, 32));
  EXPECT_TRUE(exact.fits) << exact.failure;
  EXPECT_EQ(exact.unused_bytes, 0u);
  const JobPlan plan = plan_job(job_config(need - 1, 32));
  ASSERT_FALSE(plan.fits);
  for (const std::string& s : {std::string("the job needs at least ") + format_bytes(need),
                               "the training step " + format_bytes(roomy.training_bytes),
                               "training pipeline " + format_bytes(roomy.pipelines[0].needs.minimum_bytes()),
                               std::string("raise it to ") + format_bytes(need) + " (" + std::to_string(need) + " bytes)",
                               std::string("--accumulate"), std::string("--checkpoint"), std::string("--loader-threads")}) {
    EXPECT_NE(plan.failure.find(s), std::string::npos) << s << " in: " << plan.failure;
  }
}

TEST(JobPlan, AHandSplitKeepsTheUsersAllocatorAndFailsWhenTheStepDoesNotFitIt) {
  JobConfig config = job_config(64 * kMiB, 32);
  config.allocator = AllocatorOptions{.mode = AllocatorMode::kPreallocate, .limit = 40 * kMiB};
  const JobPlan plan = plan_job(config);
  ASSERT_TRUE(plan.fits) << plan.failure;
  EXPECT_TRUE(plan.hand_split);
  EXPECT_EQ(plan.training_bytes, 40 * kMiB);
  EXPECT_EQ(plan.allocator.mode, AllocatorMode::kPreallocate);
  config.allocator->limit = 4 * kMiB;
  const JobPlan small = plan_job(config);
  EXPECT_FALSE(small.fits);
  EXPECT_NE(small.failure.find("does not fit its share"), std::string::npos) << small.failure;
}

TEST(JobPlan, OnADeviceTheHostSideIsItsOwnLimit) {
  // The CUDA backend's workspaces (cuBLAS's included) are planned: more than the CPU's 64 MiB.
  JobConfig config = job_config(128 * kMiB, 32);
  config.device = cuda(0);  // planned on the meta backend: no device needed
  config.host_memory_limit = 16 * kMiB;
  const JobPlan plan = plan_job(config);
  ASSERT_TRUE(plan.fits) << plan.failure;
  EXPECT_NE(plan.training.backend.find("cuda:0"), std::string::npos) << plan.training.backend;
  EXPECT_TRUE(plan.separate_host());
  EXPECT_EQ(plan.device_unused_bytes, 128 * kMiB - plan.training_bytes);
  EXPECT_EQ(plan.host_bytes() + plan.unused_bytes, 16 * kMiB);  // training is not in it
  config.host_memory_limit = 2 * kMiB;
  const JobPlan small = plan_job(config);
  EXPECT_FALSE(small.fits);
  EXPECT_NE(small.failure.find("--host-memory-limit"), std::string::npos) << small.failure;
  // A host limit is refused on the CPU.
  JobConfig cpu = job_config(64 * kMiB, 32);
  cpu.host_memory_limit = kMiB;
  EXPECT_THROW(plan_job(cpu), Error);
}

// Real steps of fashion-cnn on zeros.
void train_steps(Allocator& allocator, std::int64_t batch, int steps) {
  Context ctx(allocator, ContextOptions{.threads = 2});
  TrainSetup s = make_training(ctx, TrainConfig{.model = "fashion-cnn", .batch = batch});
  Trainer trainer(ctx, *s.model, *s.optimizer, s.trainer);
  std::vector<float> data(static_cast<std::size_t>(batch * 28 * 28), 0.0f);
  std::vector<std::int32_t> labels(static_cast<std::size_t>(batch), 0);
  for (int i = 0; i < steps; ++i) trainer.step({data.data(), DType::kF32, {batch, 1, 28, 28}}, labels, host());
}

TEST(JobPlan, ARealRunStaysInThePlannedRegionAndALargerBatchReclaimsFromTheCache) {
  const JobPlan plan = plan_job(job_config(96 * kMiB, 32));
  ASSERT_TRUE(plan.fits) << plan.failure;
  const JobBudgets budgets(plan);
  FakeCache cache(budgets.host);
  std::unique_ptr<Allocator> allocator = budgets.make_training_allocator(plan);
  cache.fill_all();
  train_steps(*allocator, 32, 2);
  EXPECT_EQ(allocator->stats().regions, 1u);
  EXPECT_EQ(allocator->stats().reserved_bytes, plan.training_bytes);
  EXPECT_EQ(cache.calls, 0);
  // A step the plan did not see (a batch twice as large) takes its memory back from the cache.
  train_steps(*allocator, 64, 1);
  EXPECT_GE(cache.calls, 1);
  EXPECT_GT(allocator->stats().regions, 1u);
  EXPECT_LE(budgets.host->peak(), 96 * kMiB);
}

TEST(JobPlan, TheOffloadedStateIsPlannedAndHeldInTheHostBudget) {
  JobConfig config = job_config(96 * kMiB, 32);
  config.train.optimizer = "adam";
  config.train.offload = true;
  const JobPlan plan = plan_job(config);
  ASSERT_TRUE(plan.fits) << plan.failure;
  EXPECT_GT(plan.offload_bytes, 0u);
  EXPECT_NE(plan.explain().find("offloaded state"), std::string::npos);
  const JobBudgets budgets(plan);
  std::unique_ptr<Allocator> allocator = budgets.make_training_allocator(plan);
  Context ctx(*allocator, ContextOptions{.threads = 2});
  TrainSetup s = make_training(ctx, config.train);
  s.optimizer->set_host_state_budget(budgets.host);
  Trainer trainer(ctx, *s.model, *s.optimizer, s.trainer);
  std::vector<float> data(32 * 28 * 28, 0.0f);
  std::vector<std::int32_t> labels(32, 0);
  trainer.step({data.data(), DType::kF32, {32, 1, 28, 28}}, labels, host());
  ASSERT_NE(s.optimizer->host_state_allocator(), nullptr);
  EXPECT_EQ(budgets.host->used(MemoryUse::kOffload), s.optimizer->host_state_allocator()->stats().reserved_bytes);
  EXPECT_EQ(budgets.host->used(MemoryUse::kOffload), plan.offload_bytes);  // as planned
}

// A pipeline stand-in with a cache: every batch is a hit after the first epoch, a miss in it.
class CachedSource final : public BatchSource {
 public:
  explicit CachedSource(std::shared_ptr<MemoryBudget> part) : part_(std::move(part)) {}
  std::int64_t batches_per_epoch() const override { return 2; }
  void start_epoch(std::int64_t epoch) override {
    epoch_ = epoch;
    next_ = 0;
  }
  const TrainBatch* next() override {
    if (next_ == 2) return nullptr;
    ++next_;
    (epoch_ == 0 ? misses_ : hits_) += 8;
    if (epoch_ == 0) cache_.push_back(*part_->try_reserve(kMiB, MemoryUse::kCache));
    batch_ = TrainBatch{.data = TensorView{data_.data(), DType::kF32, {8, 1, 2, 2}},
                        .labels = std::span<const std::int32_t>(labels_.data(), 8)};
    return &batch_;
  }
  InputStats input_stats() const override {
    return {.cache_hits = hits_, .cache_misses = misses_, .cache_bytes = cache_.size() * kMiB};
  }

 private:
  std::shared_ptr<MemoryBudget> part_;
  std::vector<Reservation> cache_;
  std::int64_t epoch_ = 0, next_ = 0, hits_ = 0, misses_ = 0;
  std::vector<float> data_ = std::vector<float>(32, 0.0f);
  std::vector<std::int32_t> labels_ = std::vector<std::int32_t>(8, 0);
  TrainBatch batch_;
};

class NoStep final : public TrainingStep {
 public:
  BatchResult train(const TrainBatch& b) override { return {.images = static_cast<std::int64_t>(b.labels.size())}; }
  BatchResult evaluate(const TrainBatch& b) override { return {.images = static_cast<std::int64_t>(b.labels.size())}; }
};

TEST(JobMemoryHook, ReportsEachEpochsLimitPartsPeaksCacheHitsAndTheUnusedRest) {
  JobPlan plan = plan_job(job_config(64 * kMiB, 32));
  ASSERT_TRUE(plan.fits) << plan.failure;
  const JobBudgets budgets(plan);
  std::unique_ptr<Allocator> allocator = budgets.make_training_allocator(plan);
  std::shared_ptr<MemoryBudget> train_part = budgets.pipeline_part();
  std::shared_ptr<MemoryBudget> eval_part = budgets.pipeline_part();
  CachedSource source(train_part);
  NoStep step;
  EpochRunner runner(step, source, {.epochs = 2, .allocator = allocator.get()});
  JobMemoryHook hook(plan, budgets, {{"training pipeline", train_part, &source}, {"evaluation pipeline", eval_part, nullptr}});
  runner.add_hook(hook);
  const RunReport& run = runner.run();
  ASSERT_EQ(run.per_epoch.size(), 2u);
  for (const EpochReport& e : run.per_epoch) {
    ASSERT_TRUE(e.job_memory) << e.epoch;
    const JobMemoryReport& j = *e.job_memory;
    EXPECT_EQ(j.memory_limit, 64 * kMiB);
    ASSERT_GE(j.parts.size(), 3u);
    EXPECT_EQ(j.parts[0].name, "training");
    EXPECT_EQ(j.parts[0].share_bytes, plan.training_bytes);
    EXPECT_EQ(j.parts[0].peak_bytes, plan.training_bytes);  // the floor is held the whole time
    EXPECT_EQ(j.parts[1].name, "training pipeline");
    EXPECT_EQ(j.parts[1].peak_bytes, 2 * kMiB);             // its cache, its only reservation
    EXPECT_EQ(j.peak_bytes, plan.training_bytes + 2 * kMiB);
    EXPECT_EQ(j.unused_bytes, 64 * kMiB - j.peak_bytes);
    ASSERT_EQ(j.caches.size(), 1u);
    EXPECT_EQ(j.caches[0].hits + j.caches[0].misses, 16);  // this epoch's, not the run's
    EXPECT_EQ(j.caches[0].hit_rate(), e.epoch == 0 ? 0.0 : 1.0);
    EXPECT_EQ(j.peak_by_use[static_cast<std::size_t>(MemoryUse::kCache)], 2 * kMiB);
  }
}

TEST(JobSearch, FindsTheLargestBatchWhoseWholeJobFits) {
  const std::uint64_t limit = 48 * kMiB;
  const BatchSearchResult r = find_job_batch(job_config(limit, 2), {.min_batch = 2, .max_batch = 4096});
  ASSERT_GT(r.batch, 2);
  EXPECT_GT(r.planner_guess, 0);
  EXPECT_LE(r.trials.size(), 6u);
  EXPECT_TRUE(plan_job(job_config(limit, r.batch)).fits) << r.batch;
  EXPECT_FALSE(plan_job(job_config(limit, r.batch + 1)).fits) << r.batch + 1;
  for (const BatchTrial& t : r.trials) EXPECT_EQ(t.fits, t.batch <= r.batch) << t.batch;
}

TEST(JobSearch, FindsTheFewestMicroBatchesWhoseWholeJobFits) {
  const std::uint64_t limit = 40 * kMiB;
  JobConfig config = job_config(limit, 128);
  const AccumulationSearchResult r = find_job_accumulation(config);
  ASSERT_GT(r.accumulate, 1);
  EXPECT_EQ(r.batch, 128);
  config.train.accumulate = r.accumulate;
  EXPECT_TRUE(plan_job(config).fits);
  config.train.accumulate = r.accumulate / 2;
  EXPECT_FALSE(plan_job(config).fits);
}

}  // namespace
}  // namespace sluice::train
