// Pipelines on tar shards: exactly the batches of the same images as a folder (same
// bytes and labels, batch by batch, at 1 and 3 threads; the same samples when shuffled), every
// damaged-tar case under both error policies, resume mid-shard, shard(rank, world) as contiguous
// equal runs, and the item table counted in the budget and in build()'s minimum.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "pipeline_support.hpp"
#include "shard_support.hpp"
#include "sluice/core/units.hpp"
#include "sluice/pipeline/json_spec.hpp"
#include "sluice/sluice.hpp"
#include "stages/source/source.hpp"
#include "batch_hashes.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

using test::batch_hashes;
using test::hash_batch;
using test::hash_bytes;

namespace fs = std::filesystem;
using test::TempDir;

// Each sample's bytes hashed with its label, sorted: which samples an epoch delivered.
std::vector<std::uint64_t> sample_hashes(Loader& loader, std::int64_t epoch) {
  std::vector<std::uint64_t> out;
  for (Batch& b : loader.epoch(epoch)) {
    const std::size_t bytes = b.data().bytes() / static_cast<std::size_t>(b.size());
    for (int i = 0; i < b.size(); ++i) {
      const std::int32_t label = b.labels()[static_cast<std::size_t>(i)];
      out.push_back(hash_bytes(&label, sizeof label, hash_bytes(static_cast<const std::uint8_t*>(b.data().data) + i * bytes, bytes)));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

Pipeline& augment(Pipeline& p) {
  return p.read().decode_jpeg().random_crop(24, {.padding = 4}).flip_horizontal().normalize(
      {.mean = {}, .std = {}, .layout = Layout::kNHWC, .dtype = DType::kU8});
}

// A generated image folder (4 classes of 30) and the same as 8 shards of 15 samples.
class ShardedFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    test::make_image_folder(dir_ / "folder", 4, 30, 40, 30);
    shards_ = test::shard_folder(dir_ / "folder", dir_ / "shards", 15);
    ASSERT_EQ(shards_.size(), 8u);
  }
  std::string pattern() const { return (dir_ / "shards" / "train-{000000..000007}.tar").string(); }
  Pipeline folder() const { return Pipeline::from_folder((dir_ / "folder").string()); }
  Pipeline sharded() const { return Pipeline::from_shards(pattern()); }

  TempDir dir_;
  std::vector<fs::path> shards_;
};

TEST_F(ShardedFolder, ShardsGiveTheFoldersBatches_PadCrop_1And3Threads) {
  for (const int threads : {1, 3}) {
    Pipeline a = folder();
    Pipeline b = sharded();
    Loader from_folder = augment(a).batch(16).build({.threads = threads, .seed = 4});
    Loader from_shards = augment(b).batch(16).build({.threads = threads, .seed = 4});
    ASSERT_EQ(from_shards.samples_per_epoch(), 120);
    for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
      const auto expected = batch_hashes(from_folder, epoch);
      EXPECT_EQ(batch_hashes(from_shards, epoch), expected) << threads << " threads, epoch " << epoch;
    }
  }
}

TEST_F(ShardedFolder, ShuffledShardsDeliverTheSameSamplesInTheirOwnOrder) {
  Pipeline a = folder();
  Pipeline b = sharded();
  Loader from_folder = augment(a.shuffle_files(8)).batch(16).build({.threads = 2, .seed = 4});
  Loader from_shards = augment(b.shuffle_files(8)).batch(16).build({.threads = 2, .seed = 4});
  // Augmentations are keyed on the item, and items are the same in both: the same samples.
  EXPECT_EQ(sample_hashes(from_shards, 1), sample_hashes(from_folder, 1));
  EXPECT_NE(batch_hashes(from_shards, 1), batch_hashes(from_folder, 1));  // the shard-wise order
  Pipeline c = sharded();
  Loader again = augment(c.shuffle_files(8)).batch(16).build({.threads = 1, .seed = 4});
  EXPECT_EQ(batch_hashes(again, 1), batch_hashes(from_shards, 1));
  EXPECT_NE(batch_hashes(again, 2), batch_hashes(from_shards, 1));
}

// Caches key a member by shard:member (disk) or by its index (memory): their batches equal the
// uncached pipeline's, and the second epoch is served from them.
TEST_F(ShardedFolder, MemoryAndDiskCachesServeShardsLikeFolders) {
  Pipeline plain = sharded();
  Loader uncached = augment(plain).batch(16).build({.threads = 2, .seed = 4});
  const auto expected = batch_hashes(uncached, 1);
  for (const bool disk : {false, true}) {
    Pipeline p = sharded();
    p.read();
    if (disk) {
      p.cache(DiskCache{(dir_ / "shards.cache").string()});
    } else {
      p.cache(MemoryCache{});
    }
    p.decode_jpeg().random_crop(24, {.padding = 4}).flip_horizontal().normalize(
        {.mean = {}, .std = {}, .layout = Layout::kNHWC, .dtype = DType::kU8});
    Loader cached = p.batch(16).build({.threads = 2, .seed = 4});
    (void)batch_hashes(cached, 0);
    EXPECT_EQ(batch_hashes(cached, 1), expected) << (disk ? "disk" : "memory");
    EXPECT_EQ(cached.stats().cache.hits, 120) << (disk ? "disk" : "memory");
  }
}

// The JSON spec the C API and the Python module take: {"source": {"shards": ...}} builds the
// pipeline the builder makes.
TEST_F(ShardedFolder, JsonSpecWithShardsGivesTheBuildersBatches) {
  const std::string text = R"({"source": {"shards": {"path": "shards/train-*.tar", "index": "memory"}},
      "shuffle_files": {"seed": 8},
      "stages": ["read", "decode_jpeg", {"random_crop": {"size": 24, "padding": 4}}, "flip_horizontal",
                 {"normalize": {"layout": "nhwc", "dtype": "u8"}}, {"batch": {"size": 16}}],
      "build": {"threads": 2, "seed": 4}})";
  const PipelineDocument doc = parse_pipeline_json(text, dir_.path().string());
  Loader from_json = Pipeline(doc.spec).build(doc.build);
  Pipeline b = Pipeline::from_shards((dir_ / "shards" / "train-*.tar").string(), {.index = ShardIndex::kMemoryOnly});
  Loader from_builder = augment(b.shuffle_files(8)).batch(16).build({.threads = 2, .seed = 4});
  EXPECT_EQ(batch_hashes(from_json, 2), batch_hashes(from_builder, 2));
}

TEST_F(ShardedFolder, ResumeMidShardGivesTheUninterruptedBatches) {
  auto build = [this](int threads) {
    Pipeline p = sharded();
    return augment(p.shuffle_files(3)).shuffle(20).batch(8).build({.threads = threads, .seed = 6});
  };
  Loader full = build(2);
  (void)batch_hashes(full, 0);
  const auto expected = batch_hashes(full, 1);
  Loader first = build(3);
  (void)batch_hashes(first, 0);
  std::vector<std::uint64_t> got;
  for (Batch& b : first.epoch(1)) {
    got.push_back(hash_batch(b));
    if (got.size() == 5) break;  // 40 samples: inside the third shard of the epoch
  }
  const std::vector<std::uint8_t> state = first.state();
  Loader second = build(1);
  second.restore(state);
  ASSERT_EQ(second.resume_epoch(), 1);
  for (Batch& b : second.epoch(1)) got.push_back(hash_batch(b));
  EXPECT_EQ(got, expected);
}

TEST_F(ShardedFolder, TheItemTableIsInTheBudgetAndInBuildsMinimum) {
  const stages::Dataset listed = stages::load_dataset(sharded().spec().source);
  Pipeline p = sharded();
  Loader loader = augment(p).batch(16).build({.threads = 2});
  const Stats stats = loader.stats();
  const auto items = std::find_if(stats.memory.begin(), stats.memory.end(), [](const MemoryStats& m) { return m.use == "items"; });
  ASSERT_NE(items, stats.memory.end());
  EXPECT_EQ(items->used, listed.items.bytes());
  EXPECT_GT(items->used, 0u);
  try {
    Pipeline q = sharded();
    augment(q).batch(16).build({.memory_budget = 1, .threads = 2});
    FAIL() << "built inside a 1-byte budget";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfBudget);
    EXPECT_NE(std::string(e.what()).find("+ items " + format_bytes(listed.items.bytes())), std::string::npos) << e.what();
  }
}

// 96 coded items (label = index, colour = index) in 6 shards of 16.
class CodedShards : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::vector<Item> items = test::make_coded_items(dir_.path(), 96);
    for (int s = 0; s < 6; ++s) {
      std::vector<test::TarMember> members;
      for (int i = 16 * s; i < 16 * (s + 1); ++i) {
        char key[16];
        std::snprintf(key, sizeof key, "k%d", 1000 + i);
        members.push_back({std::string(key) + ".jpg", test::read_bytes(items[static_cast<std::size_t>(i)].path)});
        members.push_back({std::string(key) + ".cls", test::text_bytes(std::to_string(i))});
      }
      layouts_.push_back(test::make_tar(members));
      char name[16];
      std::snprintf(name, sizeof name, "c-%d.tar", s);
      test::write_bytes(dir_ / name, layouts_.back().bytes);
    }
  }
  std::vector<std::int32_t> labels(Loader& loader, std::int64_t epoch) {
    std::vector<std::int32_t> out;
    for (Batch& b : loader.epoch(epoch)) out.insert(out.end(), b.labels().begin(), b.labels().end());
    return out;
  }
  Loader build(int rank, int world, int threads, OnError on_error = OnError::kFail) const {
    return Pipeline::from_shards((dir_ / "c-{0..5}.tar").string())
        .shard(rank, world)
        .shuffle_files(12)
        .read()
        .decode_jpeg()
        .batch(5)
        .build({.threads = threads, .on_error = on_error, .seed = 1});
  }

  TempDir dir_;
  std::vector<test::TarLayout> layouts_;
};

TEST_F(CodedShards, RanksGetContiguousEqualRunsThatCoverTheEpoch) {
  for (const int world : {2, 4, 8}) {
    Loader all = build(0, 1, 2);
    const std::vector<std::int32_t> epoch = labels(all, 3);
    std::vector<std::int32_t> joined;
    for (int rank = 0; rank < world; ++rank) {
      Loader one = build(rank, world, 1 + rank % 3);
      const std::vector<std::int32_t> part = labels(one, 3);
      EXPECT_EQ(static_cast<int>(part.size()), 96 / world);
      // With as many shards as ranks or more, a rank reads at most two shards per shard it owns.
      std::set<int> shards;
      for (const std::int32_t l : part) shards.insert(l / 16);
      if (world <= 6) {
        EXPECT_LE(static_cast<int>(shards.size()), 6 / world + 1) << world;
      }
      joined.insert(joined.end(), part.begin(), part.end());
    }
    EXPECT_EQ(joined, epoch) << world << " ranks";
  }
}

// Damage one shard three ways (the cases a damaged shard set shows); the others stay whole.
enum class Damage { kCutMember, kBadChecksum, kLargerThanTheFile };

class DamagedShard : public CodedShards, public ::testing::WithParamInterface<Damage> {
 protected:
  void SetUp() override {
    CodedShards::SetUp();
    std::vector<std::uint8_t> bytes = layouts_[2].bytes;
    const auto& headers = layouts_[2].headers;  // member 2k is key k's jpg, 2k + 1 its cls
    switch (GetParam()) {
      case Damage::kCutMember:
        bytes.resize(headers[20] + 512 + 100);  // inside k1042.jpg
        break;
      case Damage::kBadChecksum:
        bytes[headers[10] + 3] ^= 0x01;  // k1037.jpg's name
        break;
      case Damage::kLargerThanTheFile:
        test::set_size_field(bytes, headers[20], bytes.size() * 2);
        break;
    }
    test::write_bytes(dir_ / "c-2.tar", bytes);
  }
};

TEST_P(DamagedShard, SkipReplacesAndCountsFailThrowsNamingShardAndMember) {
  Loader skip = build(0, 1, 2, OnError::kSkip);
  const std::vector<std::int32_t> got = labels(skip, 0);
  EXPECT_EQ(static_cast<std::int64_t>(got.size()), skip.samples_per_epoch());  // full batches
  const Stats stats = skip.stats();
  EXPECT_GE(stats.skipped, 1);
  for (const SkippedSample& s : stats.skipped_samples) {
    EXPECT_NE(s.path.find("c-2.tar:"), std::string::npos) << s.path << ": " << s.cause;
  }
  for (const std::int32_t l : got) EXPECT_TRUE(l / 16 != 2 || l < 42 || GetParam() == Damage::kBadChecksum) << l;

  Loader fail = build(0, 1, 2, OnError::kFail);
  try {
    for (Batch& b : fail.epoch(0)) (void)b;
    FAIL() << "a damaged shard read without error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
    EXPECT_NE(e.path().find("c-2.tar:"), std::string::npos) << e.what();
    const std::string cause = e.cause();
    EXPECT_TRUE(cause.find("cut") != std::string::npos || cause.find("checksum") != std::string::npos ||
                cause.find("no image") != std::string::npos)
        << cause;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, DamagedShard,
                         ::testing::Values(Damage::kCutMember, Damage::kBadChecksum, Damage::kLargerThanTheFile),
                         [](const auto& info) {
                           switch (info.param) {
                             case Damage::kCutMember: return std::string("CutMember");
                             case Damage::kBadChecksum: return std::string("BadHeaderChecksum");
                             default: return std::string("MemberLargerThanTheFile");
                           }
                         });

}  // namespace
}  // namespace sluice
