// Shards named by URL (docs/remote.md), against tests/support/remote_server.py on 127.0.0.1:
// the batches of the same shards on disk (1 and 3 threads, shuffled, resumed mid-epoch) over
// http:// and over s3:// (a ListObjectsV2 glob, every request's SigV4 signature checked with
// botocore's signer); each fault the server injects retried to the local checksum, or, past the
// retries, a bad sample under kSkip and kFail naming the URL; 403 and 404 failing at once; the
// shard cache (revalidated copies, its limit, refusing a foreign folder, nothing written outside
// it); no thread or socket left once the loader is gone.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "remote_server.hpp"
#include "shard_support.hpp"
#include "sluice/pipeline/json_spec.hpp"
#include "sluice/sluice.hpp"
#include "stages/remote/http_transport.hpp"
#include "stages/remote/transfer_spares.hpp"
#include "stages/remote/remote_stats.hpp"
#include "stages/source/source.hpp"
#include "batch_hashes.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

using test::batch_hashes;
using test::hash_bytes;

namespace fs = std::filesystem;
using stages::remote::RetryCause;
using test::RemoteServer;
using test::TempDir;

Pipeline& augment(Pipeline& p) {
  return p.read().decode_jpeg().random_crop(24, {.padding = 4}).flip_horizontal().normalize(
      {.mean = {}, .std = {}, .layout = Layout::kNHWC, .dtype = DType::kU8});
}

std::uint64_t retries(RetryCause cause) {
  return stages::remote::remote_stats().snapshot().retries[static_cast<std::size_t>(cause)];
}

int count_entries(const char* dir, const char* link_prefix = nullptr) {
  int n = 0;
  DIR* d = ::opendir(dir);
  while (const dirent* e = d != nullptr ? ::readdir(d) : nullptr) {
    if (e->d_name[0] == '.') continue;
    if (link_prefix == nullptr) {
      ++n;
      continue;
    }
    char target[256] = {};
    if (::readlinkat(dirfd(d), e->d_name, target, sizeof target - 1) > 0 && std::string(target).starts_with(link_prefix)) ++n;
  }
  if (d != nullptr) ::closedir(d);
  return n;
}

// 4 classes of 30 generated images as 8 shards of 15, served from root/shards.
class RemoteShards : public ::testing::Test {
 protected:
  void SetUp() override {
    test::make_image_folder(dir_ / "folder", 4, 30, 40, 30);
    test::shard_folder(dir_ / "folder", dir_ / "root" / "shards", 15);
  }
  std::string local_pattern() const { return (dir_ / "root" / "shards" / "train-{000000..000007}.tar").string(); }
  std::string http_pattern(const RemoteServer& server) const { return server.url("/shards/train-{000000..000007}.tar"); }
  RemoteOptions remote(double timeout_s = 5, int retries = 6) const {
    return {.cache_dir = (dir_ / "cache").string(), .cache_limit = 64 << 20, .timeout_s = timeout_s, .retries = retries};
  }
  std::vector<std::uint64_t> local_hashes(int threads = 2) const {
    Pipeline p = Pipeline::from_shards(local_pattern(), {.index = ShardIndex::kMemoryOnly});
    Loader loader = augment(p.shuffle_files(5)).batch(8).build({.threads = threads, .seed = 3});
    return batch_hashes(loader, 1);
  }
  std::vector<std::uint64_t> remote_hashes(const std::string& pattern, const RemoteOptions& options, int threads = 2,
                                           OnError on_error = OnError::kFail) const {
    Pipeline p = Pipeline::from_shards(pattern, {.remote = options});
    Loader loader = augment(p.shuffle_files(5)).batch(8).build({.threads = threads, .on_error = on_error, .seed = 3});
    return batch_hashes(loader, 1);
  }

  TempDir dir_;
};

TEST_F(RemoteShards, HttpShardsGiveTheLocalBatches_1And3Threads) {
  const RemoteServer server(dir_ / "root");
  const auto expected = local_hashes();
  EXPECT_EQ(remote_hashes(http_pattern(server), remote(), 1), expected);
  EXPECT_EQ(remote_hashes(http_pattern(server), remote(), 3), expected);
}

TEST_F(RemoteShards, ResumeMidEpochGivesTheUninterruptedBatches) {
  const RemoteServer server(dir_ / "root");
  const auto expected = local_hashes();
  auto build = [&](int threads) {
    Pipeline p = Pipeline::from_shards(http_pattern(server), {.remote = remote()});
    return augment(p.shuffle_files(5)).batch(8).build({.threads = threads, .seed = 3});
  };
  Loader first = build(3);
  std::vector<std::uint64_t> got;
  for (Batch& b : first.epoch(1)) {
    got.push_back(hash_bytes(b.labels().data(), b.labels().size_bytes(), hash_bytes(b.data().data, b.data().bytes())));
    if (got.size() == 5) break;
  }
  const std::vector<std::uint8_t> state = first.state();
  Loader second = build(1);
  second.restore(state);
  const std::int64_t gets = server.stat("object_gets");
  for (auto h : batch_hashes(second, 1)) got.push_back(h);
  EXPECT_EQ(got, expected);
  EXPECT_EQ(server.stat("object_gets"), gets);  // the restored epoch read the cached copies
}

TEST_F(RemoteShards, S3GlobIsListedAndEveryRequestIsSignedAsBotocoreSigns) {
  const RemoteServer server(dir_ / "root", {"--s3", "bucket", "--access-key", "AKIDTESTKEY0001", "--secret-key",
                                            "s3cr3t/Key+value", "--region", "eu-west-3"});
  ::setenv("AWS_ACCESS_KEY_ID", "AKIDTESTKEY0001", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t/Key+value", 1);
  ::setenv("AWS_SESSION_TOKEN", "token/with+chars=", 1);
  ::setenv("AWS_REGION", "eu-west-3", 1);
  ::setenv("AWS_ENDPOINT_URL", server.url("").c_str(), 1);
  const auto expected = local_hashes();
  EXPECT_EQ(remote_hashes("s3://bucket/shards/train-*.tar", remote()), expected);
  EXPECT_EQ(server.stat("bad_signatures"), 0);
  EXPECT_GE(server.stat("listings"), 4);  // 8 keys, 2 a page: the continuation tokens were followed
  // A wrong secret: 403 at once (no retries), naming the URL and what to check, never the secret.
  ::setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-value", 1);
  try {
    (void)remote_hashes("s3://bucket/shards/train-{000000..000001}.tar", remote());
    ADD_FAILURE() << "a wrong secret built";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("s3://bucket/shards/train-00000"), std::string::npos) << what;
    EXPECT_NE(what.find("HTTP 403"), std::string::npos) << what;
    EXPECT_NE(what.find("check the credentials"), std::string::npos) << what;
    EXPECT_EQ(what.find("wrong-secret-value"), std::string::npos) << what;
  }
  EXPECT_EQ(server.stat("bad_signatures"), 4);  // each shard's index file (looked for first), then the shard
  for (const char* name : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_ENDPOINT_URL"}) {
    ::unsetenv(name);
  }
}

TEST_F(RemoteShards, NotFoundFailsAtOnceNamingTheUrl) {
  const RemoteServer server(dir_ / "root");
  try {
    (void)remote_hashes(server.url("/shards/train-{000000..000008}.tar"), remote());
    ADD_FAILURE() << "a missing shard built";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/shards/train-000008.tar: HTTP 404"), std::string::npos) << e.what();
  }
  EXPECT_EQ(server.stat("object_gets"), 18);  // 9 index files looked for (404), 9 shards; no retry of the 404
}

// An object whose ETag changes while it streams starts over from its first byte. The bytes a
// streamed read saw as arrived stay readable while it does (the file is overwritten, not cut:
// a read between the two used to find it empty and fail as a short one), and the copy ends as
// the object.
TEST_F(RemoteShards, AnEtagChangeMidStreamKeepsTheBytesAReadSawArrived) {
  namespace remote = stages::remote;
  const fs::path root = dir_ / "blob";
  fs::create_directories(root);
  std::string body(std::size_t{2} << 20, '\0');
  for (std::size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i * 7 + i / 4093);
  std::ofstream(root / "object.bin", std::ios::binary) << body;
  const RemoteServer server(root);
  // The first GET is cut half-way (an eighth of a second in at 8 MiB/s), the resumed one finds
  // a new ETag: the transfer starts over after a backoff of 0.25 to 0.5 s.
  server.faults(R"({"reset_every": 2, "etag_change": true, "bandwidth": 8388608})");
  std::atomic<std::uint64_t> arrived{0};
  std::vector<remote::Download> downloads(1);
  downloads[0].name = downloads[0].http_url = server.url("/object.bin");
  downloads[0].path = (dir_ / "object.copy").string();
  downloads[0].arrived = &arrived;
  remote::TransferLimits limits;
  limits.backoff_s = 0.5;
  limits.timeout_s = 5;
  const std::uint64_t before = retries(RetryCause::kEtagChanged);
  std::vector<remote::Downloaded> got;
  std::thread fetch([&] { got = remote::download_all(downloads, {}, limits); });
  std::uint64_t seen = 0;  // the most bytes said to have arrived before the restart
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((seen == 0 || arrived.load() != 0) && std::chrono::steady_clock::now() < deadline) {
    seen = std::max(seen, arrived.load());
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // inside the retry's backoff
  ASSERT_GT(seen, 0u);
  std::string now(seen, '\0');
  std::ifstream in(downloads[0].path, std::ios::binary);
  in.read(now.data(), static_cast<std::streamsize>(seen));
  EXPECT_EQ(static_cast<std::uint64_t>(in.gcount()), seen) << "the bytes seen arrived were cut away";
  EXPECT_TRUE(now.compare(0, static_cast<std::size_t>(in.gcount()), body, 0, static_cast<std::size_t>(in.gcount())) == 0);
  fetch.join();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].ok) << got[0].error;
  EXPECT_GE(retries(RetryCause::kEtagChanged) - before, 1u);
  std::ifstream copy(downloads[0].path, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(copy), {}), body);
}

// A warm cache's copies streamed in read order (tune_depth): the revalidations, 304s with no
// body, are all sent at once (up to the connections), not 2 at a time as bodies are. Eight of
// them at 300 ms each take one round trip, not four.
TEST_F(RemoteShards, RevalidationsAreNotHeldBackByTheReadAheadDepth) {
  namespace remote = stages::remote;
  const RemoteServer server(dir_ / "root");
  std::vector<remote::Download> downloads(8);
  for (std::size_t i = 0; i < downloads.size(); ++i) {
    downloads[i].name = downloads[i].http_url = server.url("/shards/train-00000" + std::to_string(i) + ".tar");
    downloads[i].path = (dir_ / ("copy-" + std::to_string(i))).string();
  }
  remote::TransferLimits limits;
  limits.timeout_s = 5;
  const std::vector<remote::Downloaded> first = remote::download_all(downloads, {}, limits);
  for (std::size_t i = 0; i < downloads.size(); ++i) {
    ASSERT_TRUE(first[i].ok) << first[i].error;
    downloads[i].cached_etag = first[i].etag;
    downloads[i].path += ".again";
  }
  server.faults(R"({"latency_ms": 300})");
  limits.tune_depth = true;
  const auto started = std::chrono::steady_clock::now();
  const std::vector<remote::Downloaded> again = remote::download_all(downloads, {}, limits);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  for (const remote::Downloaded& r : again) EXPECT_TRUE(r.ok && r.not_modified) << r.error;
  EXPECT_LT(seconds, 0.9) << "the revalidations went out a few at a time (2 at a time: 4 x 0.3 s at least)";
}

// A transfer that ends leaves its place to the next one at once, not after the transport's next
// poll, which waits up to 50 ms for the other transfers' sockets: with one place taken by a
// transfer 2 s from its first byte, 14 small ones go through the other place one after another
// in a few ms each (50 ms each, 0.65 s in all, when each waited for the poll).
TEST_F(RemoteShards, AFinishedTransfersPlaceIsTakenAtOnce) {
  namespace remote = stages::remote;
  const RemoteServer server(dir_ / "root");
  server.faults(R"({"latency_ms": 2000, "only": "train-000007"})");
  std::vector<remote::Download> downloads;
  for (int i = 0; i < 15; ++i) {
    remote::Download d;
    const int shard = i == 0 ? 7 : i % 7;
    d.name = d.http_url = server.url("/shards/train-00000" + std::to_string(shard) + ".tar");
    d.path = (dir_ / ("copy-" + std::to_string(i))).string();
    downloads.push_back(std::move(d));
  }
  remote::TransferLimits limits;
  limits.connections = 2;
  limits.timeout_s = 5;
  const auto started = std::chrono::steady_clock::now();
  double small_done_s = 0;
  limits.finished = [&](std::size_t i, const remote::Downloaded&) {
    if (i > 0) small_done_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  const std::vector<remote::Downloaded> got = remote::download_all(downloads, {}, limits);
  for (const remote::Downloaded& r : got) EXPECT_TRUE(r.ok) << r.error;
  EXPECT_LT(small_done_s, 0.35) << "the small transfers waited for the poll between them";
}

TEST_F(RemoteShards, ABodyIsWrittenInFewWritesNotInLibcurlsPieces) {
  namespace remote = stages::remote;
  std::vector<char> body(6 << 20);
  std::mt19937_64 rng(7);
  for (char& c : body) c = static_cast<char>(rng());
  {
    std::ofstream out(dir_ / "root" / "big.bin", std::ios::binary);
    out.write(body.data(), static_cast<std::streamsize>(body.size()));
  }
  const RemoteServer server(dir_ / "root");
  remote::Download d;
  d.name = d.http_url = server.url("/big.bin");
  d.path = (dir_ / "big.copy").string();
  std::atomic<std::uint64_t> arrived{0};
  d.arrived = &arrived;
  remote::TransferLimits limits;
  limits.timeout_s = 5;
  const std::uint64_t writes_before = remote::file_writes();
  const std::vector<remote::Downloaded> got = remote::download_all({d}, {}, limits);
  const std::uint64_t writes = remote::file_writes() - writes_before;
  ASSERT_TRUE(got[0].ok) << got[0].error;
  EXPECT_EQ(arrived.load(), body.size());
  std::ifstream in(d.path, std::ios::binary);
  const std::vector<char> copy((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(copy == body) << "the copy differs from the body";
  // libcurl's pieces are at most 16 KiB: one write each would be at least 384 writes.
  EXPECT_LE(writes, body.size() / (32 << 10)) << "the body went to its file in " << writes << " writes";
}

// The transfers of one download_all() take turns with `connections` libcurl handles and gather
// buffers instead of making each its own (each a fresh 256 KiB of pages to fault in).
TEST_F(RemoteShards, TransfersInTurnShareTheirConnectionsBuffers) {
  namespace remote = stages::remote;
  std::vector<std::vector<char>> bodies;
  std::mt19937_64 rng(11);
  for (int i = 0; i < 9; ++i) {
    std::vector<char>& body = bodies.emplace_back(static_cast<std::size_t>(600 << 10) + static_cast<std::size_t>(i) * 4099);
    for (char& c : body) c = static_cast<char>(rng());
    std::ofstream out(dir_ / "root" / ("part-" + std::to_string(i) + ".bin"), std::ios::binary);
    out.write(body.data(), static_cast<std::streamsize>(body.size()));
  }
  const RemoteServer server(dir_ / "root");
  std::vector<remote::Download> downloads(bodies.size());
  for (std::size_t i = 0; i < downloads.size(); ++i) {
    downloads[i].name = downloads[i].http_url = server.url("/part-" + std::to_string(i) + ".bin");
    downloads[i].path = (dir_ / ("part-" + std::to_string(i) + ".copy")).string();
  }
  remote::TransferLimits limits;
  limits.timeout_s = 5;
  limits.connections = 2;
  const std::uint64_t made_before = remote::gather_buffers_made();
  const std::vector<remote::Downloaded> got = remote::download_all(downloads, {}, limits);
  const std::uint64_t made = remote::gather_buffers_made() - made_before;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].ok) << got[i].error;
    std::ifstream in(downloads[i].path, std::ios::binary);
    const std::vector<char> copy((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_TRUE(copy == bodies[i]) << "copy " << i << " differs from its body";
  }
  EXPECT_GE(made, 1u);
  EXPECT_LE(made, 2u) << "9 transfers over 2 connections made " << made << " gather buffers";
}

TEST_F(RemoteShards, ADownloadAheadOfItsNeedHasOneAttemptAndIsRefusedAboveItsSize) {
  namespace remote = stages::remote;
  const RemoteServer server(dir_ / "root");
  const auto ahead = [&](const std::string& shard, std::uint64_t max_bytes) {
    remote::Download d;
    d.name = d.http_url = server.url("/shards/" + shard);
    d.path = (dir_ / (shard + ".copy")).string();
    d.ahead_max_bytes = max_bytes;
    remote::TransferLimits limits;
    limits.timeout_s = 5;
    return remote::download_all({d}, {}, limits)[0];
  };
  const std::uint64_t size = fs::file_size(dir_ / "root" / "shards" / "train-000000.tar");
  const auto failures = [] { return stages::remote::remote_stats().snapshot().failures; };
  const std::uint64_t failed = failures();
  const std::uint64_t refused = retries(RetryCause::kReset);
  EXPECT_TRUE(ahead("train-000000.tar", size).ok);
  const remote::Downloaded big = ahead("train-000001.tar", size / 2);
  EXPECT_FALSE(big.ok);
  EXPECT_NE(big.error.find("larger than"), std::string::npos) << big.error;
  EXPECT_EQ(fs::file_size(dir_ / "train-000001.tar.copy"), 0u) << "the larger body was refused at its headers";
  server.faults(R"({"reset_every": 1})");
  EXPECT_FALSE(ahead("train-000002.tar", size).ok);
  EXPECT_EQ(server.stat("object_gets"), 3) << "one attempt each";
  EXPECT_EQ(retries(RetryCause::kReset), refused);
  EXPECT_EQ(failures(), failed) << "not ok is an answer here, not a failure";
}

struct Fault {
  const char* name;
  const char* json;
  RetryCause cause;
};

class RemoteFaults : public RemoteShards, public ::testing::WithParamInterface<Fault> {};

TEST_P(RemoteFaults, AreRetriedToTheLocalBatches) {
  const RemoteServer server(dir_ / "root");
  server.faults(GetParam().json);
  const auto expected = local_hashes();
  const std::uint64_t before = retries(GetParam().cause);
  EXPECT_EQ(remote_hashes(http_pattern(server), remote(2.0)), expected);
  EXPECT_GE(retries(GetParam().cause) - before, 8u);  // once per shard at least
}

INSTANTIATE_TEST_SUITE_P(
    EachFault, RemoteFaults,
    ::testing::Values(Fault{"Reset", R"({"reset_every": 2})", RetryCause::kReset},
                      Fault{"ShortBody", R"({"short_every": 2})", RetryCause::kShortBody},
                      Fault{"Stall", R"({"stall_every": 2, "stall_s": 3})", RetryCause::kTimeout},
                      Fault{"Status503RetryAfter", R"({"status_every": 2})", RetryCause::kHttpStatus},
                      Fault{"Status429", R"({"status_every": 2, "status": 429})", RetryCause::kHttpStatus},
                      Fault{"EtagChangedMidTransfer", R"({"reset_every": 2, "etag_change": true})", RetryCause::kEtagChanged}),
    [](const ::testing::TestParamInfo<Fault>& info) { return std::string(info.param.name); });

TEST_F(RemoteShards, ARefusedConnectionIsRetriedThenTheShardIsABadSample) {
  const RemoteServer server(dir_ / "root");
  const std::string closed = "http://127.0.0.1:1/shards/train-000000.tar";  // port 1: nothing listens
  const std::uint64_t before = retries(RetryCause::kRefused);
  try {
    (void)remote_hashes(http_pattern(server), remote(5, 1));  // reachable: fine
    (void)remote_hashes(closed, remote(5, 1), 2, OnError::kFail);
    ADD_FAILURE() << "kFail went past a shard that could not be fetched";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(closed + ":*"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("connection refused"), std::string::npos) << e.what();
  }
  EXPECT_EQ(retries(RetryCause::kRefused) - before, 2u);  // its index file's request, then the shard's
}

TEST_F(RemoteShards, ResumedTransfersUseRangeRequests) {
  const RemoteServer server(dir_ / "root");
  server.faults(R"({"reset_every": 2})");
  (void)remote_hashes(http_pattern(server), remote());
  EXPECT_EQ(server.stat("range_gets"), 8);  // each shard cut once, resumed once from where it was cut
}

TEST_F(RemoteShards, AShardFailingPastItsRetriesIsABadSampleUnderBothPolicies) {
  const RemoteServer server(dir_ / "root");
  server.faults(R"({"reset_every": 1, "only": "train-000003"})");
  try {
    (void)remote_hashes(http_pattern(server), remote(5, 2), 2, OnError::kFail);
    ADD_FAILURE() << "kFail went past a shard that could not be fetched";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/shards/train-000003.tar:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("gave up after 3 attempts"), std::string::npos) << e.what();
  }
  Pipeline p = Pipeline::from_shards(http_pattern(server), {.remote = remote(5, 2)});
  Loader loader = augment(p).batch(8).build({.threads = 2, .on_error = OnError::kSkip});
  EXPECT_EQ(batch_hashes(loader, 0).size(), 14u);  // 105 samples and the stand-in for the lost shard, in full batches
  EXPECT_EQ(loader.stats().skipped, 1);
}

TEST_F(RemoteShards, TheCacheRevalidatesItsCopiesAndHoldsItsLimit) {
  const RemoteServer server(dir_ / "root");
  const auto expected = local_hashes();
  const std::uint64_t hits = stages::remote::remote_stats().snapshot().cache_hits;
  EXPECT_EQ(remote_hashes(http_pattern(server), remote()), expected);
  EXPECT_EQ(remote_hashes(http_pattern(server), remote()), expected);
  EXPECT_EQ(server.stat("not_modified"), 8);
  EXPECT_EQ(stages::remote::remote_stats().snapshot().cache_hits - hits, 8u);
  // Nothing written outside the cache folder: the served folder holds the 8 shards alone.
  EXPECT_EQ(count_entries((dir_ / "root" / "shards").c_str()), 8);

  // A limit that holds five shards' copies (and their index files): the first four shards'
  // copies make way for the last four's.
  const std::uint64_t shard_bytes = fs::file_size(dir_ / "root" / "shards" / "train-000000.tar");
  RemoteOptions small = remote();
  small.cache_dir = (dir_ / "small").string();
  small.cache_limit = shard_bytes * 5 + shard_bytes / 2;
  (void)remote_hashes(server.url("/shards/train-{000000..000003}.tar"), small);
  (void)remote_hashes(server.url("/shards/train-{000004..000007}.tar"), small);
  std::uint64_t used = 0;
  for (const auto& e : fs::directory_iterator(dir_ / "small")) used += fs::file_size(e.path());
  EXPECT_LE(used, small.cache_limit);
  // A data set larger than the limit fails build() saying so.
  small.cache_limit = shard_bytes * 2;
  EXPECT_THROW((void)remote_hashes(http_pattern(server), small), Error);
}

TEST_F(RemoteShards, TwoLoadersSharingACacheFetchEachShardOnce) {
  const RemoteServer server(dir_ / "root");
  server.faults(R"({"latency_ms": 50})");
  const auto expected = local_hashes();
  std::vector<std::uint64_t> a, b;
  std::thread other([&] { a = remote_hashes(http_pattern(server), remote()); });
  b = remote_hashes(http_pattern(server), remote());
  other.join();
  EXPECT_EQ(a, expected);
  EXPECT_EQ(b, expected);
  // One of them fetched the shards, the other found its copies current; each looked for the 8
  // shards' index files first (404: none here).
  EXPECT_EQ(server.stat("object_gets"), 32);
  EXPECT_EQ(server.stat("not_modified"), 8);
}

TEST_F(RemoteShards, ACacheFolderHoldingForeignFilesIsRefused) {
  const RemoteServer server(dir_ / "root");
  fs::create_directories(dir_ / "cache");
  test::write_bytes(dir_ / "cache" / "notes.txt", {'h', 'i'});
  try {
    (void)remote_hashes(http_pattern(server), remote());
    ADD_FAILURE() << "a foreign folder was used";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("notes.txt"), std::string::npos) << e.what();
  }
  EXPECT_EQ(count_entries((dir_ / "cache").c_str()), 1);
  EXPECT_EQ(server.stat("object_gets"), 0);
}

TEST_F(RemoteShards, ADownloadCutByAKillLeavesNothingBehindTheNextBuild) {
  const RemoteServer server(dir_ / "root");
  (void)remote_hashes(server.url("/shards/train-000000.tar"), remote());
  // What a process killed mid-download leaves (its pid is gone), and one of a live process (ours).
  const fs::path orphan = dir_ / "cache" / ".0123456789abcdef.tar.tmp-999999999-0";
  const fs::path live = dir_ / "cache" / (".0123456789abcdef.tar.tmp-" + std::to_string(::getpid()) + "-77");
  test::write_bytes(orphan, {1, 2, 3});
  test::write_bytes(live, {1, 2, 3});
  (void)remote_hashes(server.url("/shards/train-000000.tar"), remote());
  EXPECT_FALSE(fs::exists(orphan));
  EXPECT_TRUE(fs::exists(live));
}

TEST_F(RemoteShards, NoThreadOrSocketIsLeftAfterTheLoader) {
  const RemoteServer server(dir_ / "root");
  server.faults(R"({"reset_every": 2})");
  // The transport alone (the loader's worker pool is TBB's, kept for the process).
  const int threads = count_entries("/proc/self/task");
  const int sockets = count_entries("/proc/self/fd", "socket:");
  const stages::Dataset fetched = stages::load_dataset(spec::Shards{{http_pattern(server)}, ShardIndex::kBesideShard, ShardBy::kShards, remote()});
  EXPECT_EQ(fetched.items.size(), 120);
  EXPECT_EQ(count_entries("/proc/self/task"), threads);
  EXPECT_EQ(count_entries("/proc/self/fd", "socket:"), sockets);
  (void)remote_hashes(http_pattern(server), remote());
  EXPECT_EQ(count_entries("/proc/self/fd", "socket:"), sockets);
}

TEST_F(RemoteShards, JsonSpecTakesUrlsAndTheRemoteObject) {
  const std::string url = "s3://bucket/shards/train-{000000..000007}.tar";
  const std::string json = R"({"source": {"shards": {"path": ")" + url +
                           R"(", "remote": {"cache_dir": "cache", "cache_limit": "64MiB", "anonymous": true,
                                            "timeout_s": 5, "retries": 2}}},
      "stages": ["read", "decode_jpeg", {"center_crop": {"size": 24}}, {"batch": {"size": 8}}]})";
  const PipelineDocument parsed = parse_pipeline_json(json, "/base");
  const auto& shards = std::get<spec::Shards>(parsed.spec.source);
  EXPECT_EQ(shards.patterns.front(), url);  // a URL is no path: not resolved against the spec's folder
  EXPECT_EQ(shards.remote.cache_dir, "/base/cache");
  EXPECT_EQ(shards.remote.cache_limit, 64u << 20);
  EXPECT_TRUE(shards.remote.anonymous);
  EXPECT_EQ(shards.remote.timeout_s, 5.0);
  EXPECT_EQ(shards.remote.retries, 2);
  const auto again = std::get<spec::Shards>(parse_pipeline_json(to_json(parsed)).spec.source);
  EXPECT_EQ(again.remote.cache_dir, "/base/cache");
  EXPECT_EQ(again.remote.cache_limit, 64u << 20);
  EXPECT_TRUE(again.remote.anonymous);
  EXPECT_THROW((void)parse_pipeline_json(R"({"source": {"shards": {"path": "x.tar", "remote": {"cache": 1}}}, "stages": []})"),
               Error);
}

}  // namespace
}  // namespace sluice
