// What a library user of remote data meets (docs/remote.md, docs/stats.md), against
// tests/support/remote_server.py on 127.0.0.1: Loader::stats() counts this loader's requests,
// bytes, retries by cause, network wait and cache hits per source (what the server counted, not
// the process's totals); BuildOptions::stop ends build()'s fetch promptly; a list file named by
// URL whose entries are object URLs gives the batches of the same list on disk; the transfers'
// buffers are a `remote` use of the memory budget, in build()'s minimum. With index files beside
// the shards on the server, shards stream in as an epoch reads them: the batches of the shards on
// disk (1 and 2 threads, resumed mid-epoch), served before the shards have arrived whole, and a
// loader destroyed mid-stream ends at once; a later build() takes the index files from the cache
// (revalidated, so a replaced shard's new index is fetched).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "pipeline_support.hpp"
#include "remote_server.hpp"
#include "shard_support.hpp"
#include "sluice/pipeline/json_spec.hpp"
#include "sluice/sluice.hpp"
#include "stages/remote/remote_shards.hpp"
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

Pipeline& augment(Pipeline& p) {
  return p.read().decode_jpeg().random_crop(24, {.padding = 4}).flip_horizontal().normalize(
      {.mean = {}, .std = {}, .layout = Layout::kNHWC, .dtype = DType::kU8}).batch(8);
}

const SourceStats* source_named(const Stats& stats, const std::string& name) {
  for (const SourceStats& s : stats.sources) {
    if (s.source == name) return &s;
  }
  return nullptr;
}

std::int64_t retries_of(const SourceStats& s, const std::string& cause) {
  for (const auto& [c, n] : s.retries) {
    if (c == cause) return n;
  }
  ADD_FAILURE() << "no retry cause " << cause;
  return -1;
}

// 4 classes of 30 generated images as 8 shards of 15 under root/shards, and the images
// themselves under root/folder with a list of them, root/list.txt (paths relative to it).
class RemoteLibrary : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::vector<fs::path> files = test::make_image_folder(dir_ / "root" / "folder", 4, 30, 40, 30);
    test::shard_folder(dir_ / "root" / "folder", dir_ / "root" / "shards", 15);
    std::ofstream list(dir_ / "root" / "list.txt");
    for (std::size_t i = 0; i < files.size(); i += 3) {
      list << fs::relative(files[i], dir_ / "root").string() << '\t' << (i % 4) << '\n';
    }
  }
  std::string local_pattern() const { return (dir_ / "root" / "shards" / "train-{000000..000007}.tar").string(); }
  std::string http_pattern(const RemoteServer& server) const { return server.url("/shards/train-{000000..000007}.tar"); }
  RemoteOptions remote(const std::string& cache = "cache") const {
    return {.cache_dir = (dir_ / cache).string(), .cache_limit = 64 << 20, .timeout_s = 2.0, .retries = 6};
  }
  // `shuffled`: shuffle_files(5), which orders the shards and the samples inside each anew.
  Loader build_shards(const std::string& pattern, const RemoteOptions& r, BuildOptions options = {},
                      bool shuffled = true) const {
    Pipeline p = Pipeline::from_shards(pattern, {.index = ShardIndex::kMemoryOnly, .remote = r});
    options.threads = 2;
    options.seed = 3;
    return augment(shuffled ? p.shuffle_files(5) : p).build(options);
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

TEST_F(RemoteLibrary, StatsCountThisLoadersRequestsBytesRetriesAndCacheHitsPerSource) {
  const RemoteServer server(dir_ / "root");
  const std::string origin = "http://127.0.0.1:" + std::to_string(server.port());
  server.faults(R"({"status_every": 2, "status": 503, "only_end": ".tar"})");  // each shard's first GET: 503
  Loader cold = build_shards(http_pattern(server), remote());
  (void)batch_hashes(cold, 0);
  const Stats stats = cold.stats();
  ASSERT_EQ(stats.sources.size(), 1u);
  const SourceStats* s = source_named(stats, origin);
  ASSERT_NE(s, nullptr) << stats.sources[0].source;
  EXPECT_EQ(s->requests, server.stat("requests") - 1);  // the server counts this /__stats request too
  EXPECT_EQ(s->bytes, shard_bytes());
  EXPECT_EQ(static_cast<std::int64_t>(s->bytes), server.stat("bytes"));
  EXPECT_EQ(retries_of(*s, "http_status"), 8);  // one per shard
  EXPECT_EQ(retries_of(*s, "reset"), 0);
  EXPECT_EQ(s->cache_misses, 8);
  EXPECT_EQ(s->cache_hits, 0);
  EXPECT_EQ(s->failures, 0);
  EXPECT_GT(s->network_wait_seconds, 0.5);  // eight Retry-After waits of 1 s, overlapping
  const std::string json = stats_to_json(stats);
  EXPECT_NE(json.find("\"sources\":[{\"source\":\"" + origin + "\",\"requests\":"), std::string::npos) << json;

  // A second loader over the warm cache counts its own requests only: the index files it looks
  // for (none here, 404) and 8 revalidations, which are hits; no body bytes.
  server.faults("{}");
  Loader warm = build_shards(http_pattern(server), remote());
  const Stats warm_stats = warm.stats();
  const SourceStats* w = source_named(warm_stats, origin);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->requests, 16);
  EXPECT_EQ(w->bytes, 0u);
  EXPECT_EQ(w->cache_hits, 8);
  EXPECT_EQ(w->cache_misses, 0);
  EXPECT_EQ(retries_of(*w, "http_status"), 0);

  Loader local = build_shards(local_pattern(), {});
  EXPECT_TRUE(local.stats().sources.empty());
  EXPECT_NE(stats_to_json(local.stats()).find("\"sources\":[]"), std::string::npos);
}

TEST_F(RemoteLibrary, BuildOptionsStopEndsBuildsFetchPromptly) {
  const RemoteServer server(dir_ / "root");
  server.faults(R"({"latency_ms": 20000})");  // every shard would take 20 s to start
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop.store(true);
  });
  const auto started = std::chrono::steady_clock::now();
  try {
    (void)build_shards(http_pattern(server), remote(), {.stop = [&] { return stop.load(); }});
    ADD_FAILURE() << "build() ran through its stop";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCancelled) << e.what();
  }
  stopper.join();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_LT(waited, 2.0);
  // Nothing half-fetched is left in the cache folder: its marker only.
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir_ / "cache")) entries += e.path().filename().string()[0] == '.' ? 0 : 1;
  EXPECT_LE(entries, 1);

  // The same build without a stop, once the server answers, runs to its end.
  server.faults("{}");
  Loader loader = build_shards(http_pattern(server), remote(), {.stop = [] { return false; }});
  EXPECT_EQ(loader.batches_per_epoch(), 15);
}

TEST_F(RemoteLibrary, AListNamedByUrlGivesTheBatchesOfTheSameListOnDisk) {
  const RemoteServer server(dir_ / "root");
  const auto hashes = [&](const std::string& list, const RemoteOptions& r, int threads) {
    Pipeline p = Pipeline::from_list(list, {.remote = r});
    Loader loader = augment(p.shuffle(64)).build({.threads = threads, .seed = 9});
    return batch_hashes(loader, 0);
  };
  const auto local = hashes((dir_ / "root" / "list.txt").string(), {}, 1);
  ASSERT_EQ(local.size(), 5u);  // 40 entries
  const std::int64_t gets = server.stat("object_gets");
  EXPECT_EQ(hashes(server.url("/list.txt"), remote(), 1), local);
  EXPECT_EQ(server.stat("object_gets") - gets, 41);  // the list and its 40 objects
  EXPECT_EQ(hashes(server.url("/list.txt"), remote(), 2), local);  // from the cache, 2 threads

  // A local list may name objects by URL too; a JSON spec carries the list's remote options.
  {
    std::ifstream in(dir_ / "root" / "list.txt");
    std::ofstream out(dir_ / "urls.txt");
    for (std::string line; std::getline(in, line);) out << server.url("/" + line) << '\n';
  }
  EXPECT_EQ(hashes((dir_ / "urls.txt").string(), remote("cache2"), 2), local);
  const std::string spec = to_json(Pipeline::from_list(server.url("/list.txt"), {.remote = remote()}).spec(), {});
  EXPECT_EQ(to_json(parse_pipeline_json(spec)), spec);
  EXPECT_NE(spec.find("\"remote\""), std::string::npos) << spec;

  // A missing object fails build() at once, naming its URL.
  {
    std::ofstream out(dir_ / "root" / "bad.txt");
    out << "folder/nothing.jpg\t0\n";
  }
  try {
    (void)hashes(server.url("/bad.txt"), remote(), 1);
    ADD_FAILURE() << "a list naming a missing object built";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/folder/nothing.jpg: HTTP 404"), std::string::npos) << e.what();
  }
}

TEST_F(RemoteLibrary, TransferBuffersAreARemoteUseOfTheBudgetInBuildsMinimum) {
  const RemoteServer server(dir_ / "root");
  const std::uint64_t buffers = stages::remote::remote_buffer_bytes();
  ASSERT_GT(buffers, 0u);
  Pipeline remote_p = Pipeline::from_shards(http_pattern(server), {.index = ShardIndex::kMemoryOnly, .remote = remote()});
  augment(remote_p);
  const PipelineMemoryPlan plan = remote_p.plan_memory({.threads = 2});
  EXPECT_EQ(plan.minimum[static_cast<std::size_t>(MemoryUse::kRemote)], buffers);
  EXPECT_NE(plan.explain.find("remote "), std::string::npos) << plan.explain;
  std::uint64_t minimum = 0;
  for (const std::uint64_t m : plan.minimum) minimum += m;

  Loader loader = remote_p.build({.memory_budget = minimum + (8 << 20), .threads = 2});
  (void)batch_hashes(loader, 0);
  const Stats stats = loader.stats();
  EXPECT_EQ(test::memory_used(stats, "remote"), buffers);
  EXPECT_LE(stats.memory_peak, minimum + (8 << 20));

  // A budget without room for them fails build() naming the remote use.
  try {
    (void)remote_p.build({.memory_budget = minimum - 1, .threads = 2});
    ADD_FAILURE() << "built below its minimum";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfBudget);
    EXPECT_NE(std::string(e.what()).find("remote"), std::string::npos) << e.what();
  }
  try {
    (void)remote_p.build({.memory_budget = buffers - 1, .threads = 2});
    ADD_FAILURE() << "fetched without room for its buffers";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfBudget);
    EXPECT_NE(std::string(e.what()).find("remote transfers' buffers"), std::string::npos) << e.what();
  }

  // Local shards hold none.
  Pipeline local_p = Pipeline::from_shards(local_pattern(), {.index = ShardIndex::kMemoryOnly});
  Loader local = augment(local_p).build({.threads = 2});
  EXPECT_EQ(test::memory_used(local.stats(), "remote"), 0u);
}

// The shards' index files beside them on the server (what indexing the local set once leaves).
class RemoteStreaming : public RemoteLibrary {
 protected:
  void SetUp() override {
    RemoteLibrary::SetUp();
    const stages::Dataset indexed =
        stages::load_dataset(spec::Shards{{local_pattern()}, ShardIndex::kBesideShard, ShardBy::kShards, {}});
    for (const auto& shard : indexed.items.shards()) index_bytes_ += fs::file_size(shard.path + ".sluice-idx");
    ASSERT_GT(index_bytes_, 0u);
  }
  std::vector<std::uint64_t> local_hashes(std::int64_t epoch) const {
    Loader loader = build_shards(local_pattern(), {});
    return batch_hashes(loader, epoch);
  }
  // The loader's counters for the server's origin: the set and its index files, each byte once
  // (the server saw the same count), and one cache miss per shard.
  void expect_every_shard_fetched_once(Loader& loader, const RemoteServer& server, const std::string& origin) const {
    const Stats stats = loader.stats();
    const SourceStats* s = source_named(stats, origin);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->bytes, shard_bytes() + index_bytes_);
    EXPECT_EQ(static_cast<std::int64_t>(s->bytes), server.stat("bytes"));
    EXPECT_EQ(s->cache_misses, 8);
  }
  std::uint64_t index_bytes_ = 0;
};

TEST_F(RemoteStreaming, StreamedShardsGiveTheLocalBatches_1And2Threads_AndResumeMidEpoch) {
  const RemoteServer server(dir_ / "root");
  const auto expected = local_hashes(1);
  for (const int threads : {1, 2}) {
    const std::int64_t bytes = server.stat("bytes");
    Pipeline p = Pipeline::from_shards(http_pattern(server), {.index = ShardIndex::kMemoryOnly, .remote = remote("c" + std::to_string(threads))});
    Loader loader = augment(p.shuffle_files(5)).build({.threads = threads, .seed = 3});
    EXPECT_GE(server.stat("bytes") - bytes, static_cast<std::int64_t>(index_bytes_));
    EXPECT_EQ(batch_hashes(loader, 1), expected) << threads << " threads";
  }
  // Resumed mid-epoch by a loader with a cold cache of its own: the rest of the same epoch.
  Loader first = build_shards(http_pattern(server), remote("r1"));
  std::vector<std::uint64_t> got;
  for (Batch& b : first.epoch(1)) {
    got.push_back(hash_bytes(b.labels().data(), b.labels().size_bytes(), hash_bytes(b.data().data, b.data().bytes())));
    if (got.size() == 5) break;
  }
  const std::vector<std::uint8_t> state = first.state();
  Loader second = build_shards(http_pattern(server), remote("r2"), {.threads = 1});
  second.restore(state);
  for (const std::uint64_t h : batch_hashes(second, 1)) got.push_back(h);
  EXPECT_EQ(got, expected);
}

// On a cold cache the memory plan can read only epoch 0's first shard (fetched with the index
// files); the header probes the other shards miss are taken from that shard's items instead, so
// the plan sizes (and set-up faults in) a worker's buffers from as many headers as the shard
// has (15 here), not from the few of its items that the evenly spread probes fall on (5).
TEST_F(RemoteStreaming, OnAColdCacheTheMemoryPlanProbesTheFetchedShardInTheOthersPlace) {
  const RemoteServer server(dir_ / "root");
  Pipeline local_p = Pipeline::from_shards(local_pattern(), {.index = ShardIndex::kMemoryOnly});
  EXPECT_EQ(augment(local_p.shuffle_files(5)).plan_memory({.threads = 2}).probed, 32);
  Pipeline remote_p = Pipeline::from_shards(http_pattern(server), {.index = ShardIndex::kMemoryOnly, .remote = remote("plan")});
  const PipelineMemoryPlan plan = augment(remote_p.shuffle_files(5)).plan_memory({.threads = 2});
  EXPECT_EQ(plan.probed, 15);
  const PipelineMemoryPlan local = local_p.plan_memory({.threads = 2});
  for (const MemoryUse use : {MemoryUse::kReadBuffers, MemoryUse::kDecodeBuffers}) {  // the same images: the same shares
    EXPECT_EQ(plan.minimum[static_cast<std::size_t>(use)], local.minimum[static_cast<std::size_t>(use)]) << to_string(use);
  }
}

// Each shard's first GET cut half-way and its resumed GET finding a new ETag: every shard starts
// over while the epoch reads it, and the epoch still gives the local batches. (A read racing the
// restart is shown alone by RemoteShards.AnEtagChangeMidStreamKeepsTheBytesAReadSawArrived.)
TEST_F(RemoteStreaming, ShardsWhoseEtagChangesMidStreamStartOverToTheLocalBatches) {
  const RemoteServer server(dir_ / "root");
  const std::string origin = "http://127.0.0.1:" + std::to_string(server.port());
  server.faults(R"({"reset_every": 2, "etag_change": true, "only_end": ".tar"})");
  Loader loader = build_shards(http_pattern(server), remote());
  EXPECT_EQ(batch_hashes(loader, 0), local_hashes(0));
  const Stats stats = loader.stats();
  const SourceStats* s = source_named(stats, origin);
  ASSERT_NE(s, nullptr);
  // The epoch's first shard comes with the index files, one attempt: its cut GET is given up
  // there, and its stream's GET is the new object's from its start, no change to see.
  EXPECT_GE(retries_of(*s, "etag_changed"), 7);
  EXPECT_EQ(s->failures, 0);
}

TEST_F(RemoteStreaming, IndexFilesAreKeptInTheCacheAndAReplacedShardsIndexIsFetchedAgain) {
  const RemoteServer server(dir_ / "root");
  {
    Loader cold = build_shards(http_pattern(server), remote("kept"));
    (void)batch_hashes(cold, 1);  // every shard kept in the cache too
  }
  // A second build() over the same cache revalidates the index files and the shards
  // (If-None-Match) and fetches none of their bytes.
  std::int64_t bytes = server.stat("bytes");
  Loader warm = build_shards(http_pattern(server), remote("kept"));
  EXPECT_EQ(batch_hashes(warm, 1), local_hashes(1));
  EXPECT_EQ(server.stat("bytes") - bytes, 0) << "fetched what the cache holds";
  // Shard 0 replaced on the server (by shard 1's bytes, a later mtime) with its new index file:
  // the next build() reads the new index (a stale one would misplace every member of it).
  const fs::path shards = dir_ / "root" / "shards";
  fs::copy_file(shards / "train-000001.tar", shards / "train-000000.tar", fs::copy_options::overwrite_existing);
  fs::last_write_time(shards / "train-000000.tar", fs::last_write_time(shards / "train-000001.tar") + std::chrono::seconds(10));
  (void)stages::load_dataset(spec::Shards{{local_pattern()}, ShardIndex::kBesideShard, ShardBy::kShards, {}});
  bytes = server.stat("bytes");
  Loader replaced = build_shards(http_pattern(server), remote("kept"));
  EXPECT_EQ(batch_hashes(replaced, 1), local_hashes(1));
  EXPECT_EQ(server.stat("bytes") - bytes,
            static_cast<std::int64_t>(fs::file_size(shards / "train-000000.tar.sluice-idx") + fs::file_size(shards / "train-000000.tar")))
      << "fetched other than shard 0 and its new index file";
}

TEST_F(RemoteStreaming, TheCountersHoldEveryShardsEndOnceTheEpochIsOut) {
  const RemoteServer server(dir_ / "root");
  const std::string origin = "http://127.0.0.1:" + std::to_string(server.port());
  // Each transfer at a quarter of the set per second: a shard's end (after its last member)
  // follows it by a tenth of a second or so.
  server.faults("{\"bandwidth\": " + std::to_string(shard_bytes() / 4) + ", \"only_end\": \".tar\"}");
  Loader loader = build_shards(http_pattern(server), remote(), {}, false);
  (void)batch_hashes(loader, 0);
  expect_every_shard_fetched_once(loader, server, origin);
}

TEST_F(RemoteStreaming, SamplesAreServedBeforeTheirShardsHaveArrivedWhole) {
  const RemoteServer server(dir_ / "root");
  // In file order: the first batch is the first shard's first 8 samples of 15.
  Loader local = build_shards(local_pattern(), {}, {}, false);
  const auto expected = batch_hashes(local, 0);
  const std::uint64_t set = shard_bytes();
  // Each transfer at a 24th of the set per second: every shard takes about 3 s whole, the eight
  // in flight at once.
  server.faults("{\"bandwidth\": " + std::to_string(set / 24) + ", \"only_end\": \".tar\"}");
  const std::int64_t before = server.stat("bytes") + static_cast<std::int64_t>(index_bytes_);
  Loader loader = build_shards(http_pattern(server), remote(), {}, false);
  std::vector<std::uint64_t> got;
  std::int64_t at_first_batch = -1;
  for (Batch& b : loader.epoch(0)) {
    if (at_first_batch < 0) at_first_batch = server.stat("bytes") - before;
    got.push_back(hash_bytes(b.labels().data(), b.labels().size_bytes(), hash_bytes(b.data().data, b.data().bytes())));
  }
  EXPECT_EQ(got, expected);
  // Waiting for whole shards, the first batch (8 samples of its first shard's 15) would come when
  // that shard, and so every shard at the same pace, had arrived: the whole set. Streamed, it
  // comes with about half of each sent (the rest is slack for a busy machine).
  EXPECT_LT(at_first_batch, static_cast<std::int64_t>(set * 9 / 10)) << "of " << set << " bytes";
}

// build() ends by issuing the requests for the first shards epoch 0 reads, so their latency
// passes before the consumer asks for the first batch; the epoch adopts that stream (each shard
// fetched once, counted once).
TEST_F(RemoteStreaming, BuildStartsEpochZerosFirstShardsSoTheirLatencyPassesBeforeTheFirstBatch) {
  const RemoteServer server(dir_ / "root");
  const std::string origin = "http://127.0.0.1:" + std::to_string(server.port());
  const auto expected = local_hashes(0);
  server.faults(R"({"latency_ms": 1000, "only_end": ".tar"})");  // before each shard's first byte
  Loader loader = build_shards(http_pattern(server), remote());
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const auto asked = std::chrono::steady_clock::now();
  std::vector<std::uint64_t> got;
  double first_batch_s = -1;
  for (Batch& b : loader.epoch(0)) {
    if (first_batch_s < 0) first_batch_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count();
    got.push_back(hash_bytes(b.labels().data(), b.labels().size_bytes(), hash_bytes(b.data().data, b.data().bytes())));
  }
  EXPECT_EQ(got, expected);
  // Issued at the first next(), the first shard's bytes would take the whole second to start.
  EXPECT_LT(first_batch_s, 0.9);
  expect_every_shard_fetched_once(loader, server, origin);
  EXPECT_EQ(server.stat("object_gets"), 16);  // 8 index files, 8 shards: none fetched twice
}

TEST_F(RemoteStreaming, EpochZerosFirstShardComesWithTheIndexFiles) {
  const RemoteServer server(dir_ / "root");
  const std::string origin = "http://127.0.0.1:" + std::to_string(server.port());
  const auto expected = local_hashes(0);
  // Before each response's first byte, the index files' too: 1.5 s (under remote()'s 2 s no-byte
  // timeout), so that a first batch slowed by a busy machine (this test failed once at 1 s and a
  // 0.6 s bound, beside the rest of the suite on 2 cores) still tells the two cases apart.
  server.faults(R"({"latency_ms": 1500})");
  Loader loader = build_shards(http_pattern(server), remote());
  const auto built = std::chrono::steady_clock::now();
  std::vector<std::uint64_t> got;
  double first_batch_s = -1;
  for (Batch& b : loader.epoch(0)) {
    if (first_batch_s < 0) first_batch_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - built).count();
    got.push_back(hash_bytes(b.labels().data(), b.labels().size_bytes(), hash_bytes(b.data().data, b.data().bytes())));
  }
  EXPECT_EQ(got, expected);
  // Requested at build()'s end, the epoch's first shard would take the whole 1.5 s to start.
  EXPECT_LT(first_batch_s, 1.0);
  expect_every_shard_fetched_once(loader, server, origin);
  EXPECT_EQ(server.stat("object_gets"), 16);  // 8 index files, 8 shards: none fetched twice
  const Stats stats = loader.stats();  // kept: `s` points into it
  const SourceStats* s = source_named(stats, origin);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->failures, 0);
}

TEST_F(RemoteStreaming, ALoaderDestroyedMidStreamEndsAtOnce) {
  const RemoteServer server(dir_ / "root");
  // The shards (not their index files) would take 20 s to start: the first one, fetched with
  // the index files, is given up after the no-byte timeout (one attempt, 2 s), then build()'s
  // stream of epoch 0's first shards waits on them.
  server.faults(R"({"latency_ms": 20000, "only_end": ".tar"})");
  auto loader = std::make_unique<Loader>(build_shards(http_pattern(server), remote()));
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    loader->cancel();
  });
  const auto started = std::chrono::steady_clock::now();
  try {
    (void)batch_hashes(*loader, 0);
    ADD_FAILURE() << "the epoch ran through a cancel";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCancelled) << e.what();
  }
  canceller.join();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), 2.0) << "the cancel";
  loader.reset();  // its workers wait on the stream's bytes: ending it wakes them
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), 3.0);
}

}  // namespace
}  // namespace sluice
