// Remote shards under cache_limit 0 (docs/remote.md, "Streaming through memory"), against
// tests/support/remote_server.py on 127.0.0.1: with index files beside the shards, each shard
// streams into a buffer reserved from the memory budget and nothing is written to disk; the
// batches are those of the shards on disk at 1 and 2 threads and on a mid-epoch resume; the
// shard buffers alive at once stay inside the window the loader reserved, and are all freed once
// the epoch has read them; without index files build() fails saying what is missing.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "batch_hashes.hpp"
#include "pipeline_support.hpp"
#include "remote_server.hpp"
#include "shard_support.hpp"
#include "sluice/sluice.hpp"
#include "stages/remote/remote_shards.hpp"
#include "stages/source/read_file.hpp"
#include "stages/source/source.hpp"
#include "stages/tar/shard_fetcher.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using test::batch_hashes;
using test::hash_bytes;
using test::RemoteServer;
using test::TempDir;

Pipeline& augment(Pipeline& p) {
  return p.read().decode_jpeg().random_crop(24, {.padding = 4}).flip_horizontal().normalize(
      {.mean = {}, .std = {}, .layout = Layout::kNHWC, .dtype = DType::kU8}).batch(8);
}

std::set<std::string> files_under(const fs::path& root) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) out.insert(e.path().string());
  return out;
}

// 4 classes of 30 generated images as 24 shards of 5 under root/shards; `indexed`: with the
// index files beside them, as `sluice inspect --shards` leaves them.
class RemoteMemoryStream : public ::testing::Test {
 protected:
  void SetUp() override {
    test::make_image_folder(dir_ / "root" / "folder", 4, 30, 40, 30);
    test::shard_folder(dir_ / "root" / "folder", dir_ / "root" / "shards", 5);
  }
  void index_beside_shards() const {
    (void)stages::load_dataset(spec::Shards{{local_pattern()}, ShardIndex::kBesideShard, ShardBy::kShards, {}});
  }
  std::string local_pattern() const { return (dir_ / "root" / "shards" / "train-{000000..000023}.tar").string(); }
  std::string http_pattern(const RemoteServer& server) const { return server.url("/shards/train-{000000..000023}.tar"); }
  // A cache folder that must never come to exist.
  RemoteOptions streamed() const {
    return {.cache_dir = (dir_ / "never").string(), .cache_limit = 0, .timeout_s = 2.0, .retries = 6};
  }
  Loader build(const std::string& pattern, const RemoteOptions& r, int threads) const {
    Pipeline p = Pipeline::from_shards(pattern, {.index = ShardIndex::kMemoryOnly, .remote = r});
    return augment(p.shuffle_files(5)).build({.threads = threads, .seed = 3});
  }
  std::uint64_t shard_bytes() const {
    std::uint64_t n = 0;
    for (const auto& e : fs::directory_iterator(dir_ / "root" / "shards")) {
      if (e.path().extension() == ".tar") n += fs::file_size(e.path());
    }
    return n;
  }

  TempDir dir_;
};

TEST_F(RemoteMemoryStream, GivesTheLocalBatches_1And2Threads_AndResumeMidEpoch_WritingNothing) {
  index_beside_shards();
  const RemoteServer server(dir_ / "root");
  const std::vector<std::uint64_t> expected = [&] {
    Loader local = build(local_pattern(), {}, 2);
    return batch_hashes(local, 1);
  }();
  const std::set<std::string> before = files_under(dir_.path());
  for (const int threads : {1, 2}) {
    Loader loader = build(http_pattern(server), streamed(), threads);
    // Epoch 0 first: the buffers are let go of and streamed again for epoch 1.
    EXPECT_FALSE(batch_hashes(loader, 0).empty());
    EXPECT_EQ(batch_hashes(loader, 1), expected) << threads << " threads";
    EXPECT_GT(test::memory_used(loader.stats(), "remote"), stages::remote::remote_buffer_bytes()) << "the shard window is reserved";
  }
  // Resumed mid-epoch: the rest of the same epoch.
  Loader first = build(http_pattern(server), streamed(), 2);
  std::vector<std::uint64_t> got;
  for (Batch& b : first.epoch(1)) {
    got.push_back(hash_bytes(b.labels().data(), b.labels().size_bytes(), hash_bytes(b.data().data, b.data().bytes())));
    if (got.size() == 5) break;
  }
  const std::vector<std::uint8_t> state = first.state();
  Loader second = build(http_pattern(server), streamed(), 1);
  second.restore(state);
  for (const std::uint64_t h : batch_hashes(second, 1)) got.push_back(h);
  EXPECT_EQ(got, expected);
  EXPECT_FALSE(fs::exists(dir_ / "never")) << "a cache folder was made";
  EXPECT_EQ(files_under(dir_.path()), before) << "a file was written";
}

TEST_F(RemoteMemoryStream, BuffersAliveAtOnceStayInsideTheReservedWindowAndAreFreedWhenRead) {
  index_beside_shards();
  const RemoteServer server(dir_ / "root");
  stages::Dataset data =
      stages::load_dataset(spec::Shards{{http_pattern(server)}, ShardIndex::kMemoryOnly, ShardBy::kShards, streamed()},
                           nullptr, true);
  auto* fetcher = dynamic_cast<stages::OnDemandShards*>(data.fetcher.get());
  ASSERT_NE(fetcher, nullptr);
  // No shuffle buffer: a read straddles at most 2 shards, plus the read-ahead.
  const std::uint64_t window = fetcher->reserve_window(8);
  ASSERT_LT(window, shard_bytes()) << "a window holding every shard could not be exceeded";
  std::vector<std::int64_t> order(static_cast<std::size_t>(data.items.size()));
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int64_t>(i);
  fetcher->fetch(order, {});
  // Two readers, each taking every other item, slower than the stream on 127.0.0.1: without the
  // window every shard would be in memory at once.
  std::vector<std::thread> readers;
  std::atomic<int> failures{0};
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&, r] {
      stages::ItemReader reader(nullptr);
      AlignedBuffer buffer;
      for (std::size_t i = static_cast<std::size_t>(r); i < order.size(); i += 2) {
        try {
          EXPECT_FALSE(reader.read(data.items, order[i], buffer, 1 << 20).empty());
        } catch (const Error& e) {
          ADD_FAILURE() << e.what();
          failures.fetch_add(1);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    });
  }
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(fetcher->memory_peak(), 0u);
  EXPECT_LE(fetcher->memory_peak(), window) << "of " << shard_bytes() << " bytes of shards";
  fetcher->stop();
  EXPECT_EQ(fetcher->memory_held(), 0u) << "a shard's buffer outlived its reads";
  EXPECT_FALSE(fs::exists(dir_ / "never"));
}

TEST_F(RemoteMemoryStream, WithoutIndexFilesBuildFailsSayingWhatIsMissing) {
  const RemoteServer server(dir_ / "root");  // no index files beside the shards
  try {
    (void)build(http_pattern(server), streamed(), 2);
    ADD_FAILURE() << "build() went through";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(".sluice-idx"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir_ / "never"));
}

}  // namespace
}  // namespace sluice
