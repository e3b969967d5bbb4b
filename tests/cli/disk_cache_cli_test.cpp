// The disk cache through the binary: a `sluice bench` building a cache is killed with SIGKILL
// halfway; a new run through the same cache (completing it) and a run after that (all hits)
// give the checksum of a run without any cache. Also: a changed pipeline does not reuse it.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <fcntl.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli_test_support.hpp"
#include "test_support.hpp"

extern char** environ;

namespace sluice::test {
namespace {

using nlohmann::json;

std::vector<std::string> bench_args(const std::filesystem::path& data, const std::string& cache, int epochs) {
  return {"bench", "--data", data.string(), "--transform", "train", "--size", "128", "--batch", "32",
          "--threads", "2", "--epochs", std::to_string(epochs), "--shuffle", "--seed", "9", "--cache", cache, "--json", "--checksum"};
}

json run_json(const std::vector<std::string>& args) {
  const CliRun run = run_cli(args);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  return json::parse(run.last_line());
}

// Starts the CLI, lets it run for `ms`, then SIGKILLs it; returns true if it was still running.
bool kill_after(const std::vector<std::string>& args, int ms) {
  const pid_t pid = spawn_cli(args);
  EXPECT_GT(pid, 0) << "cannot start " << SLUICE_CLI;
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  const bool running = waitpid(pid, nullptr, WNOHANG) == 0;
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return running;
}

TEST(CliDiskCache, KilledWhileBuildingThenCompletedGivesTheUncachedChecksum) {
  SLUICE_REQUIRE_DATASET(data, "imagenette-val");
  TempDir dir;
  const std::string cache = "disk:" + (dir / "train.cache").string();
  const json uncached = run_json(bench_args(data, "none", 2));

  // Kill a run part-way through its first epoch (it writes the cache as it goes).
  ASSERT_TRUE(kill_after(bench_args(data, cache, 2), 700)) << "the run finished before it was killed";
  ASSERT_TRUE(std::filesystem::exists(dir / "train.cache"));

  const json completing = run_json(bench_args(data, cache, 2));
  EXPECT_EQ(completing["checksum"], uncached["checksum"]);
  EXPECT_GT(completing["cache"]["hits"].get<std::int64_t>(), 0);  // what the killed run left

  const json warm = run_json(bench_args(data, cache, 2));
  EXPECT_EQ(warm["checksum"], uncached["checksum"]);
  EXPECT_EQ(warm["cache"]["misses"].get<std::int64_t>(), 0);
  EXPECT_NEAR(warm["cache"]["hit_rate"].get<double>(), 1.0, 1e-9);
}

TEST(CliDiskCache, ADecodedCacheIsNotServedToAnEncodedPipeline) {
  SLUICE_REQUIRE_DATASET(data, "imagenette-val");
  TempDir dir;
  const std::string path = (dir / "c.cache").string();
  const json decoded = run_json(bench_args(data, "disk:" + path + ",decoded", 1));
  const json encoded = run_json(bench_args(data, "disk:" + path, 1));
  EXPECT_EQ(encoded["cache"]["hits"].get<std::int64_t>(), 0);  // another fingerprint: rebuilt
  EXPECT_EQ(encoded["checksum"], run_json(bench_args(data, "none", 1))["checksum"]);
  EXPECT_EQ(decoded["images"], 3925);
}

}  // namespace
}  // namespace sluice::test
