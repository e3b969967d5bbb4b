// LoaderBatches (sluice/loader_batches.hpp), the Loader as the epoch runner's BatchSource: every
// epoch's batches exactly as iterating the Loader gives them, an epoch cut short followed by a
// whole one, the loader's counters as InputStats, and an EpochRunner driven by it end to end.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "pipeline_support.hpp"
#include "sluice/loader_batches.hpp"
#include "sluice/sluice.hpp"
#include "sluice/train/epoch_runner.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

using test::TempDir;

class LoaderBatchesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    items_ = new std::vector<Item>(test::make_coded_items(dir_->path(), 45));
  }
  static void TearDownTestSuite() {
    delete items_;
    delete dir_;
  }
  // Shuffled per epoch, f32 NCHW as the training core takes it; 5 full batches and a short one.
  static Loader build(int prefetch = 2) {
    return Pipeline::from_items(*items_)
        .shuffle_files(3)
        .read()
        .decode_jpeg()
        .normalize({.mean = {0.5f, 0.5f, 0.5f}, .std = {0.25f, 0.25f, 0.25f}, .layout = Layout::kNCHW,
                    .dtype = DType::kF32})
        .batch(8)
        .prefetch(prefetch)
        .build({.threads = 2, .seed = 5});
  }
  static inline TempDir* dir_ = nullptr;
  static inline std::vector<Item>* items_ = nullptr;
};

// FNV-1a over a batch's bytes and labels, as test::epoch_checksum hashes a Loader's epoch.
void mix(std::uint64_t& h, const void* data, std::size_t n) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
}

std::uint64_t epoch_checksum(train::BatchSource& source, std::int64_t epoch, int* batches) {
  std::uint64_t h = 1469598103934665603ull;
  *batches = 0;
  source.start_epoch(epoch);
  while (const train::TrainBatch* b = source.next()) {
    EXPECT_TRUE(b->where.is_host());
    EXPECT_EQ(b->ready_event, nullptr);
    EXPECT_EQ(b->data.dtype, DType::kF32);
    EXPECT_EQ(b->data.shape[0], static_cast<std::int64_t>(b->labels.size()));
    mix(h, b->data.data, b->data.bytes());
    mix(h, b->labels.data(), b->labels.size_bytes());
    ++*batches;
  }
  EXPECT_EQ(source.next(), nullptr);  // and again: the end stays the end
  source.end_epoch();
  return h;
}

TEST_F(LoaderBatchesTest, EveryEpochIsTheLoadersOwn) {
  Loader adapted = build();
  Loader reference = build();
  LoaderBatches source(adapted);
  EXPECT_EQ(source.batches_per_epoch(), 6);
  int batches = 0;
  const std::uint64_t first = epoch_checksum(source, 0, &batches);
  EXPECT_EQ(batches, 6);
  EXPECT_EQ(first, test::epoch_checksum(reference, 0));
  const std::uint64_t second = epoch_checksum(source, 1, &batches);
  EXPECT_EQ(second, test::epoch_checksum(reference, 1));
  EXPECT_NE(first, second);  // reshuffled: the epoch reached the loader
}

TEST_F(LoaderBatchesTest, AnEpochCutShortGivesItsBatchBack) {
  // Two batches taken, then the epoch abandoned: the next one still delivers all of its batches,
  // the loader's own, with the ring at its smallest (one batch of prefetch).
  Loader loader = build(1);
  Loader reference = build(1);
  LoaderBatches source(loader);
  source.start_epoch(0);
  ASSERT_NE(source.next(), nullptr);
  ASSERT_NE(source.next(), nullptr);
  source.end_epoch();
  int batches = 0;
  EXPECT_EQ(epoch_checksum(source, 1, &batches), test::epoch_checksum(reference, 1));
  EXPECT_EQ(batches, 6);
  EXPECT_EQ(source.next(), nullptr);  // nothing after end_epoch until the next start_epoch
}

TEST_F(LoaderBatchesTest, InputStatsAreTheLoaders) {
  Loader loader = build();
  LoaderBatches source(loader);
  int batches = 0;
  (void)epoch_checksum(source, 0, &batches);
  const train::InputStats in = source.input_stats();
  const Stats st = loader.stats();
  double busy = 0;
  for (const StageStats& s : st.stages) busy += s.busy_seconds;
  EXPECT_GT(in.busy_seconds, 0.0);
  EXPECT_DOUBLE_EQ(in.busy_seconds, busy);
  EXPECT_EQ(in.workers, 2);
  EXPECT_EQ(in.pinned_bytes, 0u);  // no device: nothing page-locked
  EXPECT_EQ(in.host_bytes, st.memory_used);
}

TEST_F(LoaderBatchesTest, SkippingTheShortBatchTrainsOnFullOnesWhileACacheSeesEveryFile) {
  // 45 images in batches of 8: five full ones go to the loop, the sixth (5 images) is read and
  // skipped, so a memory cache of the whole set holds every item after the first epoch.
  Loader loader = Pipeline::from_items(*items_)
                      .shuffle_files(3)
                      .read()
                      .decode_jpeg()
                      .cache(MemoryCache{})
                      .normalize({.mean = {0.5f, 0.5f, 0.5f}, .std = {0.25f, 0.25f, 0.25f}})
                      .batch(8)
                      .build({.threads = 2, .seed = 5});
  LoaderBatches source(loader, ShortBatch::kSkip);
  EXPECT_EQ(source.batches_per_epoch(), 5);
  for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
    int batches = 0;
    (void)epoch_checksum(source, epoch, &batches);
    EXPECT_EQ(batches, 5) << epoch;
    const train::InputStats in = source.input_stats();
    EXPECT_EQ(in.cache_misses, 45) << "epoch " << epoch << ": the first read every file, the second none";
    EXPECT_EQ(in.cache_hits, epoch == 0 ? 0 : 45);
  }
}

// Counts what the runner hands over: every batch of every epoch, the evaluation's as well.
class CountingStep final : public train::TrainingStep {
 public:
  train::BatchResult train(const train::TrainBatch& b) override {
    return {.images = static_cast<std::int64_t>(b.labels.size())};
  }
  train::BatchResult evaluate(const train::TrainBatch& b) override {
    return {.images = static_cast<std::int64_t>(b.labels.size())};
  }
};

TEST_F(LoaderBatchesTest, DrivesAnEpochRunner) {
  Loader train_loader = build();
  Loader eval_loader = build();
  LoaderBatches train(train_loader), eval(eval_loader);
  CountingStep step;
  train::EpochRunner runner(step, train, {.epochs = 3, .max_steps = 14, .evaluation = &eval});
  const train::RunReport& r = runner.run();
  ASSERT_EQ(r.per_epoch.size(), 3u);
  EXPECT_EQ(r.steps, 14);
  EXPECT_EQ(r.images, 2 * 45 + 2 * 8);  // two epochs of 45 images, then two batches of 8
  for (const train::EpochReport& e : r.per_epoch) EXPECT_EQ(e.evaluation->images, 45);
  EXPECT_GT(r.input_busy_seconds, 0.0);
  EXPECT_EQ(r.input_workers, 2);
}

}  // namespace
}  // namespace sluice
