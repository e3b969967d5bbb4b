// Remote shards split among ranks (docs/distributed.md, docs/remote.md): split by shards, a rank
// of several fetches only the shards its part of each epoch reads (counted on the test server:
// exactly the index files and those shards' bytes), with the batches of the same rank over the
// same shards on disk; without index files on the server it fetches every shard, as before; a
// shard that cannot be fetched when an epoch reaches it is a bad sample under both policies;
// Loader::cancel ends an epoch's wait on the network at once.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "remote_server.hpp"
#include "shard_support.hpp"
#include "sluice/sluice.hpp"
#include "stages/source/epoch_order.hpp"
#include "stages/source/source.hpp"
#include "batch_hashes.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

using test::batch_hashes;
using test::hash_bytes;

namespace fs = std::filesystem;
using test::RemoteServer;
using test::TempDir;

constexpr int kWorld = 4;
constexpr int kBatch = 8;
constexpr std::uint64_t kFileSeed = 5;

// The server's byte count once `expected` is reached, or what it is after 5 s: an epoch may end
// before the tail of a shard it reads only part of has streamed in.
std::int64_t bytes_once(const RemoteServer& server, std::int64_t expected) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  std::int64_t n = server.stat("bytes");
  while (n != expected && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    n = server.stat("bytes");
  }
  return n;
}

Loader build(Pipeline p, int rank, OnError on_error = OnError::kFail) {
  return p.shard(rank, kWorld).shuffle_files(kFileSeed).read().decode_jpeg().random_crop(24, {.padding = 4})
      .normalize({.mean = {}, .std = {}, .layout = Layout::kNHWC, .dtype = DType::kU8})
      .batch(kBatch)
      .build({.threads = 2, .on_error = on_error, .seed = 3});
}

// 4 classes of 30 generated images as 8 shards of 15, served from root/shards; each shard's
// index file written beside it (what indexing a local set once leaves there).
class RemoteRanks : public ::testing::Test {
 protected:
  void SetUp() override {
    test::make_image_folder(dir_ / "folder", 4, 30, 40, 30);
    test::shard_folder(dir_ / "folder", dir_ / "root" / "shards", 15);
    local_ = stages::load_dataset(spec::Shards{{local_pattern()}, ShardIndex::kBesideShard, ShardBy::kShards, {}});
    for (const auto& shard : local_.items.shards()) {
      ASSERT_TRUE(fs::exists(shard.path + ".sluice-idx")) << shard.path;
      shard_bytes_.push_back(fs::file_size(shard.path));
      index_bytes_ += fs::file_size(shard.path + ".sluice-idx");
    }
  }
  std::string local_pattern() const { return (dir_ / "root" / "shards" / "train-{000000..000007}.tar").string(); }
  std::string http_pattern(const RemoteServer& server) const { return server.url("/shards/train-{000000..000007}.tar"); }
  // Each rank its own cache folder, as ranks on different nodes.
  RemoteOptions remote(int rank, int retries = 6) const {
    return {.cache_dir = (dir_ / ("cache" + std::to_string(rank))).string(), .cache_limit = 64 << 20, .timeout_s = 5,
            .retries = retries};
  }
  // The shards that rank `rank`'s part of `epoch` reads, from the epoch order itself.
  std::set<std::int32_t> shards_read(int rank, std::int64_t epoch) const {
    stages::EpochOrder order({.items = local_.items.size(), .shard_rank = rank, .shard_world = kWorld,
                              .file_seed = kFileSeed, .groups = local_.items.shard_starts(), .batch = kBatch,
                              .split = stages::ShardSplit::kShards});
    std::vector<std::int64_t> items;
    const stages::EpochSlice slice = order.compute(epoch, items);
    std::set<std::int32_t> out;
    for (std::int64_t i = 0; i < slice.real; ++i) out.insert(local_.items.locate(items[static_cast<std::size_t>(i)]).shard);
    return out;
  }
  std::uint64_t bytes_of(const std::set<std::int32_t>& shards) const {
    std::uint64_t n = 0;
    for (const std::int32_t s : shards) n += shard_bytes_[static_cast<std::size_t>(s)];
    return n;
  }
  std::uint64_t set_bytes() const { return bytes_of({0, 1, 2, 3, 4, 5, 6, 7}); }

  TempDir dir_;
  stages::Dataset local_;
  std::vector<std::uint64_t> shard_bytes_;
  std::uint64_t index_bytes_ = 0;
};

TEST_F(RemoteRanks, SplitByShardsEachRankFetchesOnlyTheShardsItReads_2Threads) {
  const RemoteServer server(dir_ / "root");
  std::uint64_t all_ranks = 0;
  for (int rank = 0; rank < kWorld; ++rank) {
    Loader local = build(Pipeline::from_shards(local_pattern(), {.index = ShardIndex::kMemoryOnly}), rank);
    const std::vector<std::uint64_t> expected0 = batch_hashes(local, 0);
    const std::vector<std::uint64_t> expected1 = batch_hashes(local, 1);

    const std::int64_t bytes = server.stat("bytes");
    const std::int64_t gets = server.stat("object_gets");
    Loader loader = build(Pipeline::from_shards(http_pattern(server), {.remote = remote(rank)}), rank);
    const std::set<std::int32_t> read0 = shards_read(rank, 0);
    EXPECT_LE(read0.size(), 3u);  // 30 of the 120 samples: two whole shards, or parts of three
    // build()'s end starts streaming the rank's epoch-0 shards and no others, before any epoch.
    EXPECT_EQ(bytes_once(server, bytes + static_cast<std::int64_t>(index_bytes_ + bytes_of(read0))) - bytes,
              static_cast<std::int64_t>(index_bytes_ + bytes_of(read0))) << "rank " << rank << " before its epoch";
    EXPECT_EQ(batch_hashes(loader, 0), expected0) << "rank " << rank;
    EXPECT_EQ(bytes_once(server, bytes + static_cast<std::int64_t>(index_bytes_ + bytes_of(read0))) - bytes,
              static_cast<std::int64_t>(index_bytes_ + bytes_of(read0))) << "rank " << rank;
    EXPECT_EQ(server.stat("object_gets") - gets, static_cast<std::int64_t>(8 + read0.size()));

    // The next epoch's file shuffle gives the rank other shards: it fetches those it lacks.
    EXPECT_EQ(batch_hashes(loader, 1), expected1) << "rank " << rank;
    std::set<std::int32_t> read = read0;
    for (const std::int32_t s : shards_read(rank, 1)) read.insert(s);
    EXPECT_EQ(bytes_once(server, bytes + static_cast<std::int64_t>(index_bytes_ + bytes_of(read))) - bytes,
              static_cast<std::int64_t>(index_bytes_ + bytes_of(read))) << "rank " << rank;
    all_ranks += bytes_of(read0);
  }
  // Over the ranks, epoch 0's shards were fetched about once (the shards at runs' ends twice),
  // where fetching every shard on every rank took 4 times the set.
  EXPECT_LT(all_ranks, set_bytes() * 3 / 2);
}

TEST_F(RemoteRanks, WithoutIndexFilesOnTheServerEveryRankFetchesEveryShard) {
  for (const auto& shard : local_.items.shards()) fs::remove(shard.path + ".sluice-idx");
  const RemoteServer server(dir_ / "root");
  Loader local = build(Pipeline::from_shards(local_pattern(), {.index = ShardIndex::kMemoryOnly}), 2);
  Loader loader = build(Pipeline::from_shards(http_pattern(server), {.remote = remote(2)}), 2);
  EXPECT_EQ(server.stat("bytes"), static_cast<std::int64_t>(set_bytes()));
  EXPECT_EQ(batch_hashes(loader, 0), batch_hashes(local, 0));
  EXPECT_EQ(server.stat("object_gets"), 16);  // 8 index files answered 404, 8 shards
}

TEST_F(RemoteRanks, AShardFailingWhenAnEpochReachesItIsABadSampleUnderBothPolicies) {
  const RemoteServer server(dir_ / "root");
  // The rank's first epoch-0 shard is reset on every transfer (not its index file: build() works).
  const std::int32_t lost = *shards_read(1, 0).begin();
  const std::string name = fs::path(local_.items.shards()[static_cast<std::size_t>(lost)].path).filename().string();
  server.faults(R"({"reset_every": 1, "only_end": ")" + name + R"("})");
  try {
    Loader loader = build(Pipeline::from_shards(http_pattern(server), {.remote = remote(1, 1)}), 1);
    (void)batch_hashes(loader, 0);
    ADD_FAILURE() << "kFail went past a shard that could not be fetched";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/shards/" + name + ":"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("could not be fetched"), std::string::npos) << e.what();
  }
  Loader loader = build(Pipeline::from_shards(http_pattern(server), {.remote = remote(1, 1)}), 1, OnError::kSkip);
  EXPECT_EQ(batch_hashes(loader, 0).size(), static_cast<std::size_t>(loader.batches_per_epoch()));
  EXPECT_GT(loader.stats().skipped, 0);
}

TEST_F(RemoteRanks, CancelEndsAnEpochsFetchPromptly) {
  const RemoteServer server(dir_ / "root");
  // The shards (not their index files) would take 20 s to start: build()'s stream of epoch 0's
  // first shards waits on them.
  server.faults(R"({"latency_ms": 20000, "only_end": ".tar"})");
  Loader loader = build(Pipeline::from_shards(http_pattern(server), {.remote = remote(0)}), 0);
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    loader.cancel();
  });
  const auto started = std::chrono::steady_clock::now();
  try {
    (void)batch_hashes(loader, 0);
    ADD_FAILURE() << "the epoch ran through a cancel";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCancelled) << e.what();
  }
  canceller.join();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_LT(waited, 2.0);
  // The cancel is taken: the loader runs the epoch once the server answers again.
  server.faults("{}");
  Loader local = build(Pipeline::from_shards(local_pattern(), {.index = ShardIndex::kMemoryOnly}), 0);
  EXPECT_EQ(batch_hashes(loader, 0), batch_hashes(local, 0));
}

}  // namespace
}  // namespace sluice
