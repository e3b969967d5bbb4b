// Tar shards from the command line: `sluice prepare shards` writes an image folder as
// shards that give exactly the folder's batches (`bench --shards` against `bench --data`, batch by
// batch), that GNU tar reads, and never over a file it did not create; resume mid-shard; damaged
// shards under both error policies in bench and as failures in inspect.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_test_support.hpp"
#include "test_support.hpp"

namespace sluice::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json bench_json(std::vector<std::string> args, int expected_exit = 0) {
  args.insert(args.begin(), "bench");
  args.push_back("--json");
  const CliRun run = run_cli(args);
  EXPECT_EQ(run.exit_code, expected_exit) << run.err;
  return run.exit_code == 0 ? json::parse(run.last_line()) : json{{"err", run.err}};
}

// cifar10/test as shards of about 1.5 MB (7 of them), made once for the suite.
class ShardsCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const fs::path folder = datasets_dir() / "cifar10/test";
    if (datasets_dir().empty() || !fs::exists(folder)) return;
    dir_ = new TempDir();
    const CliRun run = run_cli({"prepare", "shards", "--data", folder.string(), "--out", (dir_->path() / "s").string(),
                                "--shard-size", "4MiB"});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    prepared_ = run.out;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (dir_ == nullptr) GTEST_SKIP() << "dataset cifar10/test not found (set SLUICE_DATASETS_DIR)";
  }
  static std::string pattern() { return (dir_->path() / "s" / "test-*.tar").string(); }
  static std::vector<fs::path> shards() {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir_->path() / "s")) {
      if (e.path().extension() == ".tar") out.push_back(e.path());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  static TempDir* dir_;
  static std::string prepared_;
};
TempDir* ShardsCli::dir_ = nullptr;
std::string ShardsCli::prepared_;

TEST_F(ShardsCli, PrepareWritesShardsOfTheFoldersOrderAndSaysHowToReadThem) {
  EXPECT_EQ(shards().size(), 7u);
  EXPECT_NE(prepared_.find("10000 samples"), std::string::npos) << prepared_;
  EXPECT_NE(prepared_.find("test-{000000..000006}.tar"), std::string::npos) << prepared_;
  const std::vector<std::uint8_t> classes = read_bytes(dir_->path() / "s" / "test-classes.txt");
  EXPECT_EQ(std::string(classes.begin(), classes.end()).substr(0, 20), "airplane\nautomobile\n");
  for (const fs::path& s : shards()) EXPECT_LE(fs::file_size(s), 4u << 20) << s;
}

TEST_F(ShardsCli, BenchOnShardsGivesTheFoldersBatchesOneByOne) {
  const std::vector<std::string> pipeline = {"--transform", "pad-crop", "--size", "32", "--batch", "100",
                                             "--threads", "2", "--per-batch", "--seed", "5"};
  std::vector<std::string> folder = {"--data", (datasets_dir() / "cifar10/test").string()};
  std::vector<std::string> sharded = {"--shards", pattern()};
  folder.insert(folder.end(), pipeline.begin(), pipeline.end());
  sharded.insert(sharded.end(), pipeline.begin(), pipeline.end());
  const json a = bench_json(folder);
  const json b = bench_json(sharded);
  ASSERT_EQ(a["batch_checksums"].size(), 100u);
  EXPECT_EQ(a["batch_checksums"], b["batch_checksums"]);
  EXPECT_EQ(a["checksum"], b["checksum"]);
  EXPECT_GT(b["memory"]["items"]["used"].get<std::uint64_t>(), 0u);
}

TEST_F(ShardsCli, ShuffledShardsAreDeterministicAcrossThreadsAndResumeMidShard) {
  const std::vector<std::string> base = {"--shards", pattern(), "--transform", "pad-crop", "--size", "32",
                                         "--batch", "64", "--shuffle", "--shuffle-buffer", "500", "--seed", "9",
                                         "--epochs", "2", "--per-batch"};
  auto with = [&base](std::vector<std::string> more) {
    std::vector<std::string> args = base;
    args.insert(args.end(), more.begin(), more.end());
    return bench_json(args);
  };
  const json one = with({"--threads", "1"});
  const json three = with({"--threads", "3"});
  EXPECT_EQ(one["checksum"], three["checksum"]);
  EXPECT_EQ(one["batch_checksums"], three["batch_checksums"]);
  // 30 batches of 64 end inside the first epoch's first shards (1,430 samples a shard).
  const std::string state = (dir_->path() / "state.bin").string();
  const json first = with({"--threads", "2", "--stop-after-batches", "30", "--save-state", state});
  const json rest = with({"--threads", "2", "--resume", state});
  std::vector<std::string> joined = first["batch_checksums"];
  for (const auto& c : rest["batch_checksums"]) joined.push_back(c);
  EXPECT_EQ(joined, one["batch_checksums"].get<std::vector<std::string>>());
}

TEST_F(ShardsCli, GnuTarReadsThePreparedShards) {
  if (std::system("tar --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "GNU tar not found";
  const fs::path out = dir_->path() / "extracted";
  fs::create_directories(out);
  const std::string command = "tar -xf '" + shards().front().string() + "' -C '" + out.string() + "'";
  ASSERT_EQ(std::system(command.c_str()), 0);
  EXPECT_EQ(read_bytes(out / "airplane/0000.jpg"), read_bytes(datasets_dir() / "cifar10/test/airplane/0000.jpg"));
  EXPECT_EQ(read_bytes(out / "airplane/0000.cls"), (std::vector<std::uint8_t>{'0'}));
}

TEST_F(ShardsCli, PrepareNeverOverwritesAFile) {
  const fs::path first = shards().front();
  const std::vector<std::uint8_t> before = read_bytes(first);
  struct stat st {};
  ASSERT_EQ(::stat(first.c_str(), &st), 0);
  const CliRun again = run_cli({"prepare", "shards", "--data", (datasets_dir() / "cifar10/test").string(), "--out",
                                (dir_->path() / "s").string(), "--shard-size", "4MiB"});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("never overwrites"), std::string::npos) << again.err;
  EXPECT_EQ(read_bytes(first), before);
  struct stat after {};
  ASSERT_EQ(::stat(first.c_str(), &after), 0);
  EXPECT_EQ(after.st_mtim.tv_nsec, st.st_mtim.tv_nsec);
  // A stranger's file where a later shard would go: refused before any shard is written.
  const fs::path out = dir_->path() / "other";
  fs::create_directories(out);
  write_bytes(out / "test-000003.tar", {'m', 'i', 'n', 'e'});
  const CliRun blocked = run_cli({"prepare", "shards", "--data", (datasets_dir() / "cifar10/test").string(), "--out",
                                  out.string(), "--shard-size", "4MiB"});
  EXPECT_EQ(blocked.exit_code, 1);
  EXPECT_EQ(list_files(out).size(), 1u);
  EXPECT_EQ(read_bytes(out / "test-000003.tar"), (std::vector<std::uint8_t>{'m', 'i', 'n', 'e'}));
}

TEST_F(ShardsCli, DamagedShardSkippedFailedAndInspected) {
  // A copy of the shards with the last one cut in the middle of a member.
  const fs::path cut = dir_->path() / "cut";
  fs::create_directories(cut);
  for (const fs::path& s : shards()) fs::copy_file(s, cut / s.filename());
  const fs::path last = cut / shards().back().filename();
  fs::resize_file(last, fs::file_size(last) / 2 + 300);
  const std::string pattern = (cut / "test-*.tar").string();
  const std::vector<std::string> args = {"--shards", pattern, "--transform", "pad-crop", "--size", "32", "--threads", "2"};

  // inspect lists the damage: the cut sample (and the one whose header was cut, if the cut fell
  // in a header), every one named shard:member; the samples after the cut are gone.
  const CliRun inspect = run_cli({"inspect", "--shards", pattern, "--json"});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  const json report = json::parse(inspect.last_line());
  EXPECT_EQ(report["layout"], "shards");
  EXPECT_EQ(report["shards"], 7);
  const int items = report["files"];
  EXPECT_LT(items, 10000);
  EXPECT_GT(items, 9000);
  ASSERT_GE(report["failed"].get<int>(), 1);
  EXPECT_NE(report["failures"][0]["cause"].get<std::string>().find("cut"), std::string::npos) << report["failures"];
  for (const auto& f : report["failures"]) {
    EXPECT_EQ(f["stage"], "read");
    EXPECT_NE(f["path"].get<std::string>().find("test-000006.tar:"), std::string::npos) << f;
  }

  std::vector<std::string> skip = args;
  skip.insert(skip.end(), {"--on-error", "skip"});
  const json skipped = bench_json(skip);
  EXPECT_EQ(skipped["images"], items);  // full batches: every damaged sample replaced
  EXPECT_GE(skipped["skipped"].get<int>(), report["failed"].get<int>());
  EXPECT_EQ(skipped["skipped_paths"].size(), report["failed"].get<std::size_t>());
  for (const auto& path : skipped["skipped_paths"]) {
    EXPECT_NE(path.get<std::string>().find("test-000006.tar:"), std::string::npos) << path;
  }
  std::vector<std::string> fail = args;
  fail.insert(fail.end(), {"--on-error", "fail"});
  const json failed = bench_json(fail, 1);
  EXPECT_NE(failed["err"].get<std::string>().find("test-000006.tar:"), std::string::npos) << failed["err"];
  EXPECT_NE(failed["err"].get<std::string>().find("cut"), std::string::npos) << failed["err"];
}

TEST_F(ShardsCli, DropCacheAndUsageErrors) {
  const json cold = bench_json({"--shards", pattern(), "--transform", "pad-crop", "--size", "32", "--drop-cache",
                                "--stop-after-batches", "2"});
  EXPECT_EQ(cold["batches"], 2);
  EXPECT_EQ(run_cli({"bench", "--shards", pattern(), "--data", dir_->path().string()}).exit_code, 2);
  const CliRun missing = run_cli({"bench", "--shards", (dir_->path() / "none-{0..3}.tar").string()});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("no such shard file"), std::string::npos) << missing.err;
  EXPECT_EQ(run_cli({"train", "--shards", pattern(), "--steps", "1"}).exit_code, 1);  // no --test-shards
}

}  // namespace
}  // namespace sluice::test
