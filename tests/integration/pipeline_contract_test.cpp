// The pipeline's contract, end to end through the public API: every sample arrives once with its
// label, in order; batches are identical at 1, 2 and 8 threads; shards are disjoint and cover the
// epoch; held batches are never overwritten (backpressure); unordered mode delivers the same set.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <numeric>
#include <optional>
#include <set>

#include "pipeline_support.hpp"
#include "sluice/sluice.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

using test::TempDir;

class CodedItems : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    items_ = new std::vector<Item>(test::make_coded_items(dir_->path(), 103));
  }
  static void TearDownTestSuite() {
    delete items_;
    delete dir_;
  }
  // Collects (label, index decoded from the pixels) per sample, in delivery order.
  // The samples of an epoch, without padding.
  static std::vector<std::pair<int, int>> run(Pipeline pipeline, BuildOptions options, std::int64_t epoch = 0) {
    Loader loader = pipeline.build(options);
    std::vector<std::pair<int, int>> seen;
    for (Batch& b : loader.epoch(epoch)) {
      const auto* px = static_cast<const std::uint8_t*>(b.data().data);
      const std::size_t sample = static_cast<std::size_t>(b.data().shape[1] * b.data().shape[2] * b.data().shape[3]);
      for (std::int64_t i = 0; i < b.size() - b.padding(); ++i) {
        // Centre pixel of an NHWC u8 sample.
        const std::size_t centre = (static_cast<std::size_t>(b.data().shape[1] / 2) * b.data().shape[2] + b.data().shape[2] / 2) * 3;
        seen.emplace_back(b.labels()[static_cast<std::size_t>(i)], test::index_of_colour(px + i * sample + centre));
      }
    }
    return seen;
  }
  static inline TempDir* dir_ = nullptr;
  static inline std::vector<Item>* items_ = nullptr;
};

TEST_F(CodedItems, EverySampleOnceInOrderWithItsLabel) {
  const auto seen = run(Pipeline::from_items(*items_).read().decode_jpeg().batch(10), {.threads = 2});
  ASSERT_EQ(seen.size(), 103u);
  for (int i = 0; i < 103; ++i) {
    EXPECT_EQ(seen[static_cast<std::size_t>(i)].first, i);
    EXPECT_EQ(seen[static_cast<std::size_t>(i)].second, i);
  }
}

TEST_F(CodedItems, PartialLastBatchIsKeptOrDropped) {
  Loader keep = Pipeline::from_items(*items_).read().decode_jpeg().batch(10).build({.threads = 2});
  EXPECT_EQ(keep.batches_per_epoch(), 11);
  std::vector<std::int64_t> sizes;
  for (Batch& b : keep.epoch(0)) sizes.push_back(b.size());
  EXPECT_EQ(sizes.back(), 3);
  EXPECT_EQ(sizes.size(), 11u);

  Loader drop = Pipeline::from_items(*items_).read().decode_jpeg().batch(10, {.drop_last = true}).build({.threads = 2});
  EXPECT_EQ(drop.batches_per_epoch(), 10);
  int count = 0;
  for (Batch& b : drop.epoch(0)) {
    EXPECT_EQ(b.size(), 10);
    ++count;
  }
  EXPECT_EQ(count, 10);
}

TEST_F(CodedItems, ShuffledEpochsArePermutationsThatDifferPerEpoch) {
  auto pipe = Pipeline::from_items(*items_).shuffle_files(7).read().decode_jpeg().shuffle(16).batch(8);
  const auto e0 = run(pipe, {.threads = 2}, 0);
  const auto e1 = run(pipe, {.threads = 2}, 1);
  EXPECT_EQ(e0, run(pipe, {.threads = 1}, 0));
  EXPECT_NE(e0, e1);
  for (const auto* e : {&e0, &e1}) {
    std::set<int> labels;
    for (auto [label, decoded] : *e) {
      EXPECT_EQ(label, decoded);
      labels.insert(label);
    }
    EXPECT_EQ(labels.size(), 103u);
  }
}

TEST_F(CodedItems, ShardsAreDisjointAndCoverTheEpoch) {
  for (int world : {2, 3}) {
    std::multiset<int> all;
    for (int rank = 0; rank < world; ++rank) {
      const auto seen = run(Pipeline::from_items(*items_).shard(rank, world).shuffle_files(3).read().decode_jpeg().batch(7),
                            {.threads = 2}, 5);
      for (auto [label, decoded] : seen) {
        EXPECT_EQ(label, decoded);
        all.insert(label);
      }
    }
    ASSERT_EQ(all.size(), 103u);
    EXPECT_EQ(std::set<int>(all.begin(), all.end()).size(), 103u);
  }
}

TEST_F(CodedItems, UnorderedDeliversTheSameSamples) {
  const auto seen = run(Pipeline::from_items(*items_).read().decode_jpeg().batch(4), {.threads = 2, .ordered = false});
  std::vector<int> labels;
  for (auto [label, decoded] : seen) {
    EXPECT_EQ(label, decoded);
    labels.push_back(label);
  }
  std::sort(labels.begin(), labels.end());
  std::vector<int> expected(103);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(labels, expected);
}

TEST_F(CodedItems, HeldBatchesAreNotOverwrittenAndProductionWaits) {
  Loader loader = Pipeline::from_items(*items_).read().decode_jpeg().batch(5).prefetch(1).build({.threads = 2});
  std::vector<Batch> held;
  std::vector<std::vector<std::uint8_t>> copies;
  int batches = 0;
  for (Batch& b : loader.epoch(0)) {
    ++batches;
    if (held.size() < 2) {  // keep the first two batches for the whole epoch
      const auto* p = static_cast<const std::uint8_t*>(b.data().data);
      copies.emplace_back(p, p + b.data().bytes());
      held.push_back(std::move(b));
    }
  }
  EXPECT_EQ(batches, 21);
  for (std::size_t i = 0; i < held.size(); ++i) {
    const auto* p = static_cast<const std::uint8_t*>(held[i].data().data);
    EXPECT_TRUE(std::equal(copies[i].begin(), copies[i].end(), p)) << "held batch " << i << " was overwritten";
    EXPECT_EQ(held[i].index(), static_cast<std::int64_t>(i));
  }
}

TEST_F(CodedItems, BreakingOutOfAnEpochAndStartingAnotherWorks) {
  Loader loader = Pipeline::from_items(*items_).read().decode_jpeg().batch(4).build({.threads = 2});
  int n = 0;
  for (Batch& b : loader.epoch(0)) {
    (void)b;
    if (++n == 3) break;
  }
  std::int64_t samples = 0;
  for (Batch& b : loader.epoch(1)) samples += b.size();
  EXPECT_EQ(samples, 103);
}

TEST_F(CodedItems, AConsumerThatThrowsMidEpochLeavesTheLoaderUsable) {
  Loader loader = Pipeline::from_items(*items_).read().decode_jpeg().batch(4).prefetch(3).build({.threads = 2});
  for (int round = 0; round < 3; ++round) {
    try {
      int n = 0;
      for (Batch& b : loader.epoch(round)) {
        (void)b;
        if (++n == 5) throw std::runtime_error("the training step failed");
      }
      FAIL();
    } catch (const std::runtime_error&) {
    }
  }
  std::int64_t samples = 0;
  for (Batch& b : loader.epoch(3)) samples += b.size();
  EXPECT_EQ(samples, 103);
}

TEST_F(CodedItems, DestroyingTheLoaderMidEpochDoesNotHang) {
  // Workers are busy with the batches ahead (prefetch 4) when the loader goes: the destructor must
  // stop them promptly, and the batch the consumer holds must survive it intact (batches share
  // the loader's slots). Under ASan this is also the use-after-free check of that order.
  for (int i = 0; i < 5; ++i) {
    std::optional<Loader> loader(Pipeline::from_items(*items_).read().decode_jpeg().batch(3).prefetch(4).build({.threads = 2}));
    auto range = loader->epoch(0);
    auto it = range.begin();
    ++it;
    Batch held = std::move(*it);
    const auto start = std::chrono::steady_clock::now();
    loader.reset();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 10.0) << "destroying the loader mid-epoch took " << seconds << " s";
    ASSERT_TRUE(held.valid());
    EXPECT_EQ(held.index(), 1);
    ASSERT_EQ(held.size(), 3);
    const auto* px = static_cast<const std::uint8_t*>(held.data().data);
    const auto& shape = held.data().shape;
    const std::size_t sample = static_cast<std::size_t>(shape[1] * shape[2] * shape[3]);
    const std::size_t centre = (static_cast<std::size_t>(shape[1] / 2) * shape[2] + shape[2] / 2) * 3;
    for (std::int64_t s = 0; s < 3; ++s) {
      EXPECT_EQ(held.labels()[static_cast<std::size_t>(s)], 3 + s);
      EXPECT_EQ(test::index_of_colour(px + static_cast<std::size_t>(s) * sample + centre), 3 + s);
    }
  }
}

TEST(PipelineDeterminism, TrainTransformChecksumsEqualAt1And2And8Threads) {
  SLUICE_REQUIRE_DATASET(dir, "wallpaper-crops");
  std::vector<Item> items;
  for (int i = 0; i < 96; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "photo_%04d.jpg", i * 10);
    items.push_back(Item{(dir / name).string(), i});
  }
  auto pipe = Pipeline::from_items(items)
                  .shuffle_files(11)
                  .read()
                  .decode_jpeg()
                  .random_resized_crop(64)
                  .flip_horizontal(0.5)
                  .normalize({{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}, Layout::kNCHW, DType::kF16})
                  .shuffle(20)
                  .batch(16);
  std::uint64_t reference = 0;
  for (int threads : {1, 2, 8}) {
    Loader loader = pipe.build({.threads = threads, .seed = 5});
    const std::uint64_t e0 = test::epoch_checksum(loader, 0);
    const std::uint64_t e1 = test::epoch_checksum(loader, 1);
    EXPECT_NE(e0, e1);
    if (threads == 1) reference = e0;
    EXPECT_EQ(e0, reference) << threads << " threads";
  }
  Loader other_seed = pipe.build({.threads = 2, .seed = 6});
  EXPECT_NE(test::epoch_checksum(other_seed, 0), reference);
}

TEST(PipelineDeterminism, CifarChecksumsEqualAcrossThreadCounts) {
  SLUICE_REQUIRE_DATASET(dir, "cifar10/test");
  auto pipe = Pipeline::from_folder(dir.string())
                  .shuffle_files(1)
                  .read()
                  .decode_jpeg()
                  .random_crop(32, {.padding = 4})
                  .flip_horizontal()
                  .normalize({{0.49f, 0.48f, 0.45f}, {0.25f, 0.24f, 0.26f}, Layout::kNCHW, DType::kF32})
                  .batch(128);
  std::set<std::uint64_t> sums;
  for (int threads : {1, 2, 8}) {
    Loader loader = pipe.build({.threads = threads});
    EXPECT_EQ(loader.batches_per_epoch(), 79);
    sums.insert(test::epoch_checksum(loader, 0));
  }
  EXPECT_EQ(sums.size(), 1u);
}

TEST(PipelineDeterminism, CachesPrefetchAndToDeviceDoNotChangeAugmentations) {
  SLUICE_REQUIRE_DATASET(dir, "imagenette-val");
  // Every 8th photograph (about 490): enough for caches to fill and hit and for prefetch to run
  // ahead, small enough to run eight epochs under ThreadSanitizer (scripts/sanitize tsan).
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<Item> items;
  for (std::size_t i = 0; i < files.size(); i += 8) items.push_back(Item{files[i].string(), static_cast<int>(i % 10)});
  const auto run = [&](bool cache, bool extras) {
    Pipeline p = Pipeline::from_items(items).shuffle_files(3).read();
    if (cache) p.cache(MemoryCache{});
    p.decode_jpeg().random_resized_crop(48).flip_horizontal().normalize().batch(64);
    if (extras) p.prefetch(3).to_device(host());
    Loader loader = p.build({.threads = 2, .seed = 8});
    return std::make_pair(test::epoch_checksum(loader, 0), test::epoch_checksum(loader, 1));
  };
  const auto plain = run(false, false);
  EXPECT_EQ(run(true, false), plain);  // epoch 0 fills the cache, epoch 1 hits it
  EXPECT_EQ(run(false, true), plain);
  EXPECT_EQ(run(true, true), plain);
}

TEST(PipelineStats, CountsStagesAndSamples) {
  SLUICE_REQUIRE_DATASET(dir, "imagenette-val");
  Loader loader = Pipeline::from_folder(dir.string()).read().decode_jpeg().resize_shorter(64).center_crop(56).batch(64).build({.threads = 2});
  std::int64_t n = 0;
  for (Batch& b : loader.epoch(0)) {
    EXPECT_EQ(b.data().shape, (Shape{b.size(), 56, 56, 3}));
    n += b.size();
    if (n >= 640) break;
  }
  const Stats s = loader.stats();
  EXPECT_GE(s.samples, 640);
  ASSERT_EQ(s.stages.size(), 4u);
  EXPECT_EQ(s.stages[0].name, "read");
  EXPECT_GE(s.stages[0].items, 640);
  EXPECT_GT(s.stages[1].busy_seconds, 0.0);
  EXPECT_EQ(s.threads, 2);
  EXPECT_EQ(s.skipped, 0);
}

}  // namespace
}  // namespace sluice
