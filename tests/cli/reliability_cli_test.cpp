// The command line driven as a careless or hostile user would (docs/reliability.md, "Outputs,
// inputs and counts"): outputs never written through a link or over a foreign file, inputs that
// are not regular files refused at once, numbers outside their ranges refused with the range,
// list entries leaving their folder refused unless --allow-outside-root, class folders empty or
// named with a newline, and the shard sets a killed `prepare shards` leaves.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_test_support.hpp"
#include "stages/tar/tar_format.hpp"
#include "test_support.hpp"

namespace sluice::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<std::uint8_t> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }

std::vector<std::string> small_bench(const fs::path& data) {
  return {"bench", "--data", data.string(), "--transform", "none", "--batch", "2", "--threads", "1", "--epochs", "1"};
}

CliRun run_with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return run_cli(args);
}

TEST(CliReliability, ResumeFromADeviceOrAFifoIsRefusedAtOnceWithThePath) {
  TempDir dir;
  make_image_folder(dir / "data", 2, 2, 16, 16);
  CliRun run = run_with(small_bench(dir / "data"), {"--resume", "/dev/zero"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("/dev/zero"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("not a regular file"), std::string::npos) << run.err;
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  run = run_with(small_bench(dir / "data"), {"--resume", (dir / "fifo").string()});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("not a regular file"), std::string::npos) << run.err;
}

TEST(CliReliability, SaveStateNeverWritesThroughASymlinkNorOverAForeignFile) {
  TempDir dir;
  make_image_folder(dir / "data", 2, 2, 16, 16);
  write_bytes(dir / "victim", bytes_of("precious"));
  fs::create_symlink(dir / "victim", dir / "state.bin");
  CliRun run = run_with(small_bench(dir / "data"), {"--save-state", (dir / "state.bin").string()});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("symbolic link"), std::string::npos) << run.err;
  EXPECT_EQ(run.out.find("images/s"), std::string::npos) << "checked after the run, not before";
  EXPECT_EQ(read_bytes(dir / "victim"), bytes_of("precious"));
  run = run_with(small_bench(dir / "data"), {"--save-state", (dir / "victim").string()});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("not a sluice state file"), std::string::npos) << run.err;
  EXPECT_EQ(read_bytes(dir / "victim"), bytes_of("precious"));
  // Its own kind is replaced, twice.
  for (int i = 0; i < 2; ++i) {
    run = run_with(small_bench(dir / "data"), {"--save-state", (dir / "own.bin").string()});
    EXPECT_EQ(run.exit_code, 0) << run.err;
  }
  struct stat st {};
  ASSERT_EQ(::lstat((dir / "own.bin").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

TEST(CliReliability, ThreadCountsBeyondTheBoundAreRefusedWithTheBound) {
  TempDir dir;
  make_image_folder(dir / "data", 2, 2, 16, 16);
  for (const char* command : {"bench", "inspect"}) {
    std::vector<std::string> args = {command};
    if (std::string(command) == "bench") {
      args = {"bench", "--data", (dir / "data").string(), "--threads", "100000"};
    } else {
      args = {"inspect", (dir / "data").string(), "--threads", "100000"};
    }
    const CliRun run = run_cli(args);
    EXPECT_EQ(run.exit_code, 2) << command << run.err;
    EXPECT_NE(run.err.find("expected an integer from"), std::string::npos) << run.err;
  }
  const std::string spec = R"({"source": {"folder": ")" + (dir / "data").string() +
                           R"("}, "stages": [{"read": {}}, {"decode_jpeg": {}}, {"batch": {"size": 2}}],
                              "build": {"threads": 100000}})";
  write_bytes(dir / "spec.json", bytes_of(spec));
  const CliRun run = run_cli({"bench", "--spec", (dir / "spec.json").string()});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("build.threads"), std::string::npos) << run.err;
}

TEST(CliReliability, NumbersOutsideTheirRangeAreRefusedNotWrapped) {
  TempDir dir;
  make_image_folder(dir / "data", 2, 2, 16, 16);
  for (const char* seed : {"-1", "18446744073709551616", "1e23"}) {
    const CliRun run = run_with(small_bench(dir / "data"), {"--seed", seed});
    EXPECT_EQ(run.exit_code, 2) << seed << run.err;
  }
  EXPECT_EQ(run_with(small_bench(dir / "data"), {"--seed", "18446744073709551615"}).exit_code, 0);
  const CliRun pad = run_cli({"bench", "--data", (dir / "data").string(), "--transform", "pad-crop", "--size", "8",
                              "--padding", "2147483647"});
  EXPECT_EQ(pad.exit_code, 2) << pad.err;
  EXPECT_EQ(pad.err.find("-2147483648"), std::string::npos) << pad.err;
}

TEST(CliReliability, ACacheOptionIsNeverPartOfTheCacheFileName) {
  TempDir dir;
  make_image_folder(dir / "data", 2, 2, 16, 16);
  const std::string cache = (dir / "c.cache").string();
  CliRun run = run_with(small_bench(dir / "data"), {"--cache", "disk:" + cache + ",encoded"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(fs::exists(cache));
  EXPECT_FALSE(fs::exists(cache + ",encoded"));
  // Created for the reader alone: it holds the data set's bytes.
  struct stat st {};
  ASSERT_EQ(::stat(cache.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 077, 0u);
  run = run_with(small_bench(dir / "data"), {"--cache", "disk:" + cache + ",encdoed"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("unknown option"), std::string::npos) << run.err;
  EXPECT_FALSE(fs::exists(cache + ",encdoed"));
}

TEST(CliReliability, ListEntriesLeavingTheListsFolderFollowOneRule) {
  TempDir dir;
  const std::vector<fs::path> images = make_image_folder(dir / "elsewhere", 1, 2, 16, 16);
  fs::create_directories(dir / "lists");
  fs::create_symlink(images[1], dir / "lists" / "link.jpg");
  struct Case {
    const char* name;
    std::string line;
  };
  const std::vector<Case> cases = {{"dotdot", "../elsewhere/" + images[0].parent_path().filename().string() + "/" +
                                                  images[0].filename().string() + "\t0\n"},
                                   {"absolute", images[0].string() + "\t0\n"},
                                   {"symlink", "link.jpg\t0\n"}};
  for (const Case& c : cases) {
    const fs::path list = dir / "lists" / (std::string(c.name) + ".txt");
    write_bytes(list, bytes_of(c.line + c.line));
    const std::vector<std::string> base = {"bench", "--list", list.string(), "--transform", "none", "--batch", "2",
                                           "--threads", "1", "--epochs", "1"};
    CliRun run = run_cli(base);
    EXPECT_EQ(run.exit_code, 1) << c.name;
    EXPECT_NE(run.err.find("leaves the list's folder"), std::string::npos) << c.name << run.err;
    EXPECT_NE(run.err.find("--allow-outside-root"), std::string::npos) << run.err;
    EXPECT_EQ(run.err.find("from_list("), std::string::npos) << "a C++ call suggested to a CLI user: " << run.err;
    run = run_with(base, {"--allow-outside-root"});
    EXPECT_EQ(run.exit_code, 0) << c.name << run.err;
  }
}

TEST(CliReliability, ListMessagesNameTheLineAndRangeButNeverQuoteTheFile) {
  TempDir dir;
  write_bytes(dir / "secret.txt", bytes_of("password=hunter2\n"));
  CliRun run = run_cli({"bench", "--list", (dir / "secret.txt").string()});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("secret.txt:1"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("hunter2"), std::string::npos) << run.err;
  write_bytes(dir / "big.txt", bytes_of("a.jpg\t99999999999\n"));
  run = run_cli({"bench", "--list", (dir / "big.txt").string()});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("from 0 to 2147483647"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("not a non-negative integer"), std::string::npos) << run.err;
}

TEST(CliReliability, AnEmptyClassFolderIsRefusedUnlessAllowed) {
  TempDir dir;
  make_image_folder(dir / "data", 2, 2, 16, 16);
  fs::create_directories(dir / "data" / "aaa-empty");
  CliRun run = run_cli(small_bench(dir / "data"));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("aaa-empty"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("--allow-empty-classes"), std::string::npos) << run.err;
  run = run_with(small_bench(dir / "data"), {"--allow-empty-classes"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run_cli({"inspect", (dir / "data").string()}).exit_code, 1);
  EXPECT_EQ(run_cli({"inspect", (dir / "data").string(), "--allow-empty-classes"}).exit_code, 0);
}

TEST(CliReliability, InspectCountsPastSymlinkLoopsAsBenchDoes) {
  TempDir dir;
  make_image_folder(dir / "data", 2, 2, 16, 16);
  fs::path first_class;
  for (const auto& e : fs::directory_iterator(dir / "data")) first_class = e.path();
  fs::create_symlink("loop.jpg", first_class / "loop.jpg");  // a link to itself: ELOOP
  EXPECT_EQ(run_cli(small_bench(dir / "data")).exit_code, 0);
  const CliRun run = run_cli({"inspect", (dir / "data").string()});
  EXPECT_EQ(run.exit_code, 0) << run.err;
}

// Shards labelled by number with a gap (0, 1, 2, 4): inspect names each class by its number and
// shows that number as its label (it showed "label 3" for class "4").
TEST(CliReliability, InspectShowsAShardClassesOwnLabelNumber) {
  TempDir dir;
  const std::vector<std::uint8_t> jpeg = encode_jpeg(make_pattern(16, 16, 3, 1), 16, 16, 3);
  std::vector<std::uint8_t> tar;
  int key = 0;
  for (const std::string label : {"0", "1", "2", "4"}) {
    std::string name = "s";
    name += std::to_string(key++);
    stages::tar::append_file_header(tar, name + ".jpg", jpeg.size(), 0);
    tar.insert(tar.end(), jpeg.begin(), jpeg.end());
    stages::tar::append_padding(tar, jpeg.size());
    stages::tar::append_file_header(tar, name + ".cls", label.size(), 0);
    tar.insert(tar.end(), label.begin(), label.end());
    stages::tar::append_padding(tar, label.size());
  }
  stages::tar::append_end(tar);
  write_bytes(dir / "gap-000000.tar", tar);
  const CliRun run = run_cli({"inspect", "--shards", (dir / "gap-000000.tar").string(), "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const json report = json::parse(run.last_line());
  ASSERT_EQ(report["classes"].size(), 4u);
  EXPECT_EQ(report["classes"][3]["name"], "4");
  EXPECT_EQ(report["classes"][3]["label"], 4);
}

class PrepareShardsCli : public ::testing::Test {
 protected:
  void SetUp() override { make_image_folder(dir_ / "data", 2, 3, 16, 16); }
  CliRun prepare(const std::vector<std::string>& more) {
    return run_with({"prepare", "shards", "--data", (dir_ / "data").string(), "--out", (dir_ / "out").string()},
                    more);
  }
  TempDir dir_;
};

TEST_F(PrepareShardsCli, ATrailingSlashNamesTheShardsAfterTheFolder) {
  const CliRun run = run_cli({"prepare", "shards", "--data", (dir_ / "data").string() + "/", "--out",
                              (dir_ / "out").string()});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(fs::exists(dir_ / "out" / "data-000000.tar"));
  EXPECT_EQ(run.err.find("--prefix"), std::string::npos) << run.err;
}

TEST_F(PrepareShardsCli, OutInsideDataIsRefused) {
  const CliRun run = run_cli({"prepare", "shards", "--data", (dir_ / "data").string(), "--out",
                              (dir_ / "data" / "shards").string()});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("inside --data"), std::string::npos) << run.err;
  EXPECT_FALSE(fs::exists(dir_ / "data" / "shards"));
}

TEST_F(PrepareShardsCli, WritesAManifestLastAndEscapedClassNames) {
  fs::path first_class;
  for (const auto& e : fs::directory_iterator(dir_ / "data")) first_class = e.path();
  fs::rename(first_class, dir_ / "data" / "zz\nnewline");
  const CliRun run = prepare({});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<std::uint8_t> classes = read_bytes(dir_ / "out" / "data-classes.txt");
  const std::string text(classes.begin(), classes.end());
  EXPECT_NE(text.find("zz\\nnewline\n"), std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);  // one line a class
  const std::vector<std::uint8_t> bytes = read_bytes(dir_ / "out" / "data-manifest.json");
  const json manifest = json::parse(std::string(bytes.begin(), bytes.end()));
  EXPECT_EQ(manifest["samples"], 6);
  ASSERT_EQ(manifest["shards"].size(), 1u);
  EXPECT_EQ(manifest["shards"][0]["bytes"], fs::file_size(dir_ / "out" / "data-000000.tar"));
  EXPECT_EQ(manifest["shards"][0]["members"], 12);
}

TEST_F(PrepareShardsCli, ADanglingSymlinkIsABadSampleUnderThePolicy) {
  fs::path first_class;
  for (const auto& e : fs::directory_iterator(dir_ / "data")) first_class = e.path();
  fs::create_symlink(dir_ / "gone.jpg", first_class / "dangling.jpg");
  CliRun run = prepare({"--on-error", "fail"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("dangling.jpg"), std::string::npos) << run.err;
  run = prepare({});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("dangling.jpg"), std::string::npos) << run.err;
  const std::vector<std::uint8_t> bytes = read_bytes(dir_ / "out" / "data-manifest.json");
  const json manifest = json::parse(std::string(bytes.begin(), bytes.end()));
  EXPECT_EQ(manifest["samples"], 6);
  EXPECT_EQ(manifest["skipped"].size(), 1u);
}

// What `kill -9` leaves: shards, a hidden partial file, no manifest. Readers refuse it; the next
// prepare run removes the dead run's partial file.
TEST_F(PrepareShardsCli, ACutSetIsRefusedAndARerunRemovesTheDeadRunsPartialFile) {
  ASSERT_EQ(prepare({}).exit_code, 0);
  fs::remove(dir_ / "out" / "data-manifest.json");
  pid_t dead = 4000000;
  while (::kill(dead, 0) == 0 || errno != ESRCH) ++dead;
  const fs::path partial = dir_ / "out" / (".data-000001.tar.partial-" + std::to_string(dead));
  write_bytes(partial, bytes_of("half a shard"));
  const std::string pattern = (dir_ / "out" / "data-*.tar").string();
  CliRun run = run_cli({"bench", "--shards", pattern, "--transform", "none", "--batch", "2", "--threads", "1"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("incomplete"), std::string::npos) << run.err;
  run = prepare({});
  EXPECT_EQ(run.exit_code, 1);  // the shards it would write are there: never overwritten
  EXPECT_NE(run.err.find("interrupted run"), std::string::npos) << run.err;
  EXPECT_FALSE(fs::exists(partial));
  // A shard cut after a complete run is refused by its manifest's size.
  TempDir other;
  ASSERT_EQ(run_cli({"prepare", "shards", "--data", (dir_ / "data").string(), "--out", other.path().string()})
                .exit_code,
            0);
  fs::resize_file(other / "data-000000.tar", fs::file_size(other / "data-000000.tar") - 1024);
  run = run_cli({"bench", "--shards", (other / "data-*.tar").string(), "--transform", "none", "--batch", "2"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("manifest says"), std::string::npos) << run.err;
}

TEST(CliReliability, SweepChecksItsOutputsBeforeRunningAndNeverFollowsALink) {
  TempDir dir;
  make_image_folder(dir / "data", 2, 2, 16, 16);
  fs::create_directories(dir / "out");
  write_bytes(dir / "victim", bytes_of("precious"));
  fs::create_symlink(dir / "victim", dir / "out" / "sweep.png");
  const CliRun run = run_cli({"sweep", "--data", (dir / "data").string(), "--out", (dir / "out").string(),
                              "--budgets", "64MiB", "--epochs", "1", "--batch", "2", "--size", "8"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("symbolic link"), std::string::npos) << run.err;
  EXPECT_EQ(read_bytes(dir / "victim"), bytes_of("precious"));
  EXPECT_FALSE(fs::exists(dir / "out" / "sweep.csv")) << "ran before checking";
}

}  // namespace
}  // namespace sluice::test
