// `sluice bench`: the JSON contract other tools read, equal checksums at 1, 2 and 8 threads (the
// CLI's determinism promise), both error policies on a folder with bad files, and usage errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_test_support.hpp"
#include "jpeg_edits.hpp"
#include "pipeline_support.hpp"
#include "test_support.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;

json bench_json(const std::vector<std::string>& args) {
  std::vector<std::string> all{"bench"};
  all.insert(all.end(), args.begin(), args.end());
  all.push_back("--json");
  all.push_back("--checksum");  // the determinism checks below compare it
  const CliRun run = run_cli(all);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  return json::parse(run.last_line());
}

TEST(CliBench, JsonHasTheContractKeysAndChecksumsMatchAcrossThreads) {
  SLUICE_REQUIRE_DATASET(dir, "cifar10/test");
  std::string checksum;
  for (const char* threads : {"1", "2", "8"}) {
    const json j = bench_json({"--data", dir.string(), "--transform", "pad-crop", "--size", "32", "--batch", "128",
                               "--threads", threads, "--shuffle", "--seed", "3", "--out", "bf16"});
    for (const char* key : {"images", "seconds", "images_per_sec", "peak_rss_bytes", "threads", "skipped",
                            "skip_events", "skipped_samples", "memory_peak", "checksum"}) {
      EXPECT_TRUE(j.contains(key)) << key;
    }
    EXPECT_EQ(j["images"], 10000);
    EXPECT_EQ(j["threads"], std::stoi(threads));
    EXPECT_GT(j["peak_rss_bytes"].get<std::int64_t>(), 0);
    if (checksum.empty()) checksum = j["checksum"];
    EXPECT_EQ(j["checksum"], checksum) << threads << " threads";
  }
  const json other_seed = bench_json({"--data", dir.string(), "--transform", "pad-crop", "--size", "32",
                                      "--batch", "128", "--threads", "2", "--shuffle", "--seed", "4", "--out", "bf16"});
  EXPECT_NE(other_seed["checksum"], checksum);
}

// The checksum costs a pass of XXH3 over every batch, so it is computed only when asked for; the
// steady state is the epochs after the first.
TEST(CliBench, ChecksumOnlyWhenAskedAndSteadyStateAfterEpochZero) {
  TempDir dir;
  const auto items = make_coded_items(dir / "cls", 24);
  const std::vector<std::string> args = {"bench", "--data", dir.path().string(), "--transform", "none", "--batch", "8",
                                         "--out", "u8", "--threads", "2", "--epochs", "3", "--json"};
  const CliRun plain = run_cli(args);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const json j = json::parse(plain.last_line());
  EXPECT_TRUE(j["checksum"].is_null());
  EXPECT_NE(plain.out.find("checksum off"), std::string::npos) << plain.out;
  ASSERT_EQ(j["per_epoch"].size(), 3u);
  const double steady_images = j["per_epoch"][1]["images"].get<double>() + j["per_epoch"][2]["images"].get<double>();
  const double steady_seconds = j["per_epoch"][1]["seconds"].get<double>() + j["per_epoch"][2]["seconds"].get<double>();
  EXPECT_NEAR(j["steady_state_images_per_sec"].get<double>(), steady_images / steady_seconds, 1e-6 * steady_images / steady_seconds);
  EXPECT_NE(plain.out.find("steady state (epochs after the first)"), std::string::npos) << plain.out;

  std::vector<std::string> hashed = args;
  hashed.push_back("--checksum");
  const CliRun with = run_cli(hashed);
  ASSERT_EQ(with.exit_code, 0) << with.err;
  const json h = json::parse(with.last_line());
  ASSERT_TRUE(h["checksum"].is_string());
  EXPECT_EQ(h["checksum"].get<std::string>().size(), 16u);
  std::vector<std::string> one_epoch = hashed;
  one_epoch[one_epoch.size() - 3] = "1";  // --epochs 1: no steady state to report
  const CliRun single = run_cli(one_epoch);
  ASSERT_EQ(single.exit_code, 0) << single.err;
  EXPECT_TRUE(json::parse(single.last_line())["steady_state_images_per_sec"].is_null());
}

TEST(CliBench, SkipPolicyReportsBadFilesAndFailPolicyExitsOne) {
  TempDir dir;
  const auto items = make_coded_items(dir / "cls", 30);
  const auto bad = write_truncated_jpeg(dir / "cls");
  const json j = bench_json({"--data", dir.path().string(), "--transform", "none", "--on-error", "skip",
                             "--batch", "8", "--out", "u8", "--threads", "2"});
  EXPECT_EQ(j["images"], 31);
  EXPECT_EQ(j["skipped"], 1);
  EXPECT_EQ(j["skip_events"], 1);  // one epoch, and no replacement is the bad file
  ASSERT_EQ(j["skipped_samples"].size(), 1u);  // the statistics schema of C and Python (docs/stats.md)
  EXPECT_EQ(j["skipped_samples"][0]["path"], bad.string());
  EXPECT_FALSE(j["skipped_samples"][0]["cause"].get<std::string>().empty());

  const CliRun fail = run_cli({"bench", "--data", dir.path().string(), "--transform", "none", "--batch", "8"});
  EXPECT_EQ(fail.exit_code, 1);
  EXPECT_NE(fail.err.find(bad.string()), std::string::npos) << fail.err;
}

TEST(CliBench, RecoveredFilesAreReportedAndStrictDecodeSkipsThem) {
  TempDir dir;
  const auto items = make_coded_items(dir / "cls", 20);
  const std::string junk = items[7].path;
  write_bytes(junk, with_junk_before_marker(read_bytes(junk), 0xDB, 4));
  const std::vector<std::string> args = {"--data", dir.path().string(), "--transform", "none", "--on-error", "skip",
                                         "--batch", "8", "--out", "u8", "--threads", "2"};
  const json j = bench_json(args);
  EXPECT_EQ(j["images"], 20);
  EXPECT_EQ(j["skipped"], 0);
  EXPECT_EQ(j["recovered"], 1);
  ASSERT_EQ(j["recovered_samples"].size(), 1u);
  EXPECT_EQ(j["recovered_samples"][0]["path"], junk);
  EXPECT_EQ(j["recovered_samples"][0]["warning"], "Corrupt JPEG data: 4 extraneous bytes before marker 0xdb");
  std::vector<std::string> strict = args;
  strict.push_back("--strict-decode");
  const json s = bench_json(strict);
  EXPECT_EQ(s["recovered"], 0);
  ASSERT_EQ(s["skipped_samples"].size(), 1u);
  EXPECT_EQ(s["skipped_samples"][0]["path"], junk);
}

TEST(CliBench, StopSaveStateAndResumeGiveTheUninterruptedBatches) {
  SLUICE_REQUIRE_DATASET(dir, "cifar10/test");
  TempDir tmp;
  const std::vector<std::string> base{"--data", dir.string(), "--transform", "pad-crop", "--size", "32",
                                      "--batch", "256", "--threads", "2", "--epochs", "2", "--shuffle",
                                      "--seed", "6", "--per-batch"};
  const auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return bench_json(args);
  };
  const json full = with({});
  const std::string state = (tmp / "state.bin").string();
  const json first = with({"--stop-after-batches", "57", "--save-state", state});
  const json rest = with({"--resume", state});
  ASSERT_EQ(first["batch_checksums"].size(), 57u);
  EXPECT_TRUE(first["stopped_early"].get<bool>());
  std::vector<std::string> joined = first["batch_checksums"];
  for (const auto& c : rest["batch_checksums"]) joined.push_back(c);
  EXPECT_EQ(joined, full["batch_checksums"].get<std::vector<std::string>>());
  EXPECT_EQ(full["batch_checksums"].size(), 2u * 40);  // 10,000 / 256 -> 40 batches an epoch
}

TEST(CliBench, UsageAndConfigurationErrors) {
  EXPECT_EQ(run_cli({"bench"}).exit_code, 2);  // neither --data nor --list
  EXPECT_EQ(run_cli({"bench", "--data", "/", "--threads", "zero"}).exit_code, 2);
  EXPECT_EQ(run_cli({"bench", "--data", "/", "--out", "f64"}).exit_code, 2);
  SLUICE_REQUIRE_DATASET(dir, "cifar10/test");
  const CliRun budget = run_cli({"bench", "--data", dir.string(), "--transform", "none", "--budget", "lots"});
  EXPECT_EQ(budget.exit_code, 1);
  EXPECT_NE(budget.err.find("--budget"), std::string::npos);
  const CliRun cache = run_cli({"bench", "--data", dir.string(), "--transform", "none", "--cache", "ssd"});
  EXPECT_EQ(cache.exit_code, 1);
  EXPECT_NE(cache.err.find("--cache must be"), std::string::npos) << cache.err;
  const CliRun crop = run_cli({"bench", "--data", dir.string(), "--transform", "pad-crop", "--size", "48", "--padding", "4"});
  EXPECT_EQ(crop.exit_code, 1);
  EXPECT_NE(crop.err.find("random_crop"), std::string::npos) << crop.err;
}

}  // namespace
}  // namespace sluice::test
