// Shards named by URL from the command line (docs/remote.md): `bench --shards URL` gives the
// checksum of the same shards on disk and reports what the transport did under "remote" (a cold
// cache, then a warm one revalidated with 304s); `inspect --shards URL` reads them;
// --remote-cache-limit that is not a size is refused; SIGINT while build() fetches ends the run
// at once (exit 130, no temporary left in the cache); SLUICE_LOG=debug prints the stream's
// timeline. The shards are served on 127.0.0.1 by tests/support/remote_server.py.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli_test_support.hpp"
#include "remote_server.hpp"
#include "shard_support.hpp"
#include "test_support.hpp"

namespace sluice::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json run_json(std::vector<std::string> args) {
  args.push_back("--json");
  const CliRun run = run_cli(args);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  return run.exit_code == 0 ? json::parse(run.last_line()) : json{{"err", run.err}};
}

TEST(RemoteCli, BenchAndInspectTakeUrls) {
  const TempDir dir;
  make_image_folder(dir / "folder", 3, 20, 40, 30);
  shard_folder(dir / "folder", dir / "root" / "shards", 10);
  const RemoteServer server(dir / "root");
  const std::string local = (dir / "root" / "shards" / "train-{000000..000005}.tar").string();
  const std::string url = server.url("/shards/train-{000000..000005}.tar");
  const std::vector<std::string> common = {"--transform", "pad-crop", "--size", "24", "--threads", "2", "--batch", "8"};
  std::vector<std::string> on_disk = {"bench", "--shards", local};
  std::vector<std::string> remote = {"bench", "--shards", url, "--remote-cache", (dir / "cache").string(),
                                     "--remote-cache-limit", "64MiB"};
  on_disk.insert(on_disk.end(), common.begin(), common.end());
  remote.insert(remote.end(), common.begin(), common.end());
  const json expected = run_json(on_disk);
  const json cold = run_json(remote);
  EXPECT_EQ(cold["checksum"], expected["checksum"]);
  // The local run wrote each shard's index file beside it, so the server has them: build() fetches
  // the 6 index files, the epoch streams the 6 shards.
  std::int64_t index_bytes = 0;
  for (int i = 0; i < 6; ++i) {
    index_bytes += static_cast<std::int64_t>(std::filesystem::file_size(dir / "root" / "shards" / ("train-00000" + std::to_string(i) + ".tar.sluice-idx")));
  }
  EXPECT_EQ(cold["remote"]["requests"], 12);
  // Every shard's end (its end blocks, read by no sample) is counted by the epoch's end.
  EXPECT_EQ(cold["remote"]["cache_misses"].get<int>(), 6);
  EXPECT_GT(cold["remote"]["bytes"].get<std::int64_t>(), index_bytes);
  // The cold start's wait: build() (which fetched the shards) and the first batch.
  EXPECT_GT(cold["first_batch_seconds"].get<double>(), cold["setup_seconds"].get<double>());
  EXPECT_FALSE(expected.contains("remote"));
  const json warm = run_json(remote);
  EXPECT_EQ(warm["checksum"], expected["checksum"]);
  EXPECT_LE(warm["remote"]["cache_hits"].get<int>(), 6);
  EXPECT_EQ(warm["remote"]["cache_misses"], 0);
  EXPECT_EQ(warm["remote"]["bytes"], 0);  // the index files and shards revalidated from the cache

  const json inspected = run_json({"inspect", "--shards", url, "--remote-cache", (dir / "cache").string()});
  EXPECT_EQ(inspected["shards"], 6);
  EXPECT_EQ(inspected["files"], 60);

  const CliRun bad = run_cli({"bench", "--shards", url, "--remote-cache-limit", "lots"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--remote-cache-limit"), std::string::npos) << bad.err;
}

// SLUICE_LOG=debug prints the stream's timeline (bench/e2e/remote_timeline.py reads it): each
// shard's request, first body byte and end in that order, one line per read of a streamed shard
// with its wait, and the stream thread's CPU.
TEST(RemoteCli, DebugLogGivesTheStreamsTimeline) {
  const TempDir dir;
  make_image_folder(dir / "folder", 3, 20, 40, 30);
  shard_folder(dir / "folder", dir / "root" / "shards", 10);
  const std::string local = (dir / "root" / "shards" / "train-{000000..000005}.tar").string();
  ASSERT_EQ(run_cli({"inspect", "--shards", local}).exit_code, 0);  // the index files beside the shards
  const RemoteServer server(dir / "root");
  ::setenv("SLUICE_LOG", "debug", 1);
  const CliRun run = run_cli({"bench", "--shards", server.url("/shards/train-{000000..000005}.tar"), "--remote-cache",
                              (dir / "cache").string(), "--transform", "pad-crop", "--size", "24", "--threads", "2",
                              "--batch", "8", "--epochs", "1"});
  ::unsetenv("SLUICE_LOG");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto at = [&](const std::string& event, const std::string& name) {
    const std::string tail = " " + event + " " + name + " ";
    for (std::size_t line = 0; line < run.err.size();) {
      const std::size_t end = run.err.find('\n', line);
      const std::string text = run.err.substr(line, end - line);
      if (text.starts_with("sluice: remote timeline ") && text.find(tail) != std::string::npos) return std::stod(text.substr(24));
      line = end == std::string::npos ? end : end + 1;
    }
    return -1.0;
  };
  for (int i = 0; i < 6; ++i) {
    const std::string url = server.url("/shards/train-00000" + std::to_string(i) + ".tar");
    const double request = at("request", url);
    const double first = at("first_byte", url);
    const double done = at("done", url);
    EXPECT_GT(request, 0) << url << "\n" << run.err;
    EXPECT_GE(first, request) << url;
    EXPECT_GE(done, first) << url;
  }
  std::size_t reads = 0;
  for (std::size_t p = run.err.find(" read http://"); p != std::string::npos; p = run.err.find(" read http://", p + 1)) ++reads;
  EXPECT_GE(reads, 60u) << "a line per sample read";
  EXPECT_NE(run.err.find(" waited_ms="), std::string::npos);
  EXPECT_NE(run.err.find("stream_thread_cpu - user_ms="), std::string::npos);
}

TEST(RemoteCli, SigintWhileBuildFetchesEndsTheRunAtOnce) {
  const TempDir dir;
  make_image_folder(dir / "folder", 3, 20, 40, 30);
  shard_folder(dir / "folder", dir / "root" / "shards", 10);
  const RemoteServer server(dir / "root");
  server.faults(R"({"latency_ms": 20000})");  // the shards' first bytes would come after 20 s
  const pid_t pid = spawn_cli({"bench", "--shards", server.url("/shards/train-{000000..000005}.tar"), "--remote-cache",
                               (dir / "cache").string(), "--transform", "pad-crop", "--size", "24", "--batch", "8"});
  ASSERT_GT(pid, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ::kill(pid, SIGINT);
  const auto sent = std::chrono::steady_clock::now();
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() - sent > std::chrono::seconds(30)) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ADD_FAILURE() << "still running 30 s after SIGINT";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  EXPECT_LT(seconds, 2.0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  for (const auto& e : fs::directory_iterator(dir / "cache")) {
    EXPECT_EQ(e.path().filename().string(), ".sluice-remote-cache") << "left behind: " << e.path();
  }
}

}  // namespace
}  // namespace sluice::test
