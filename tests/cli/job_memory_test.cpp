// One memory limit for the whole training job, through the binary (each run a fresh process, so
// its VmHWM is its own): for fashion-cnn and cifar10-separable at the job's minimum, 1.5 times
// it and a limit where the whole decoded data set fits, every epoch keeps the accounted peak
// within the limit and the resident peak above the process's baseline within the limit plus
// 64 MiB, and with the whole set cached the second epoch reads no file. Below the minimum the run
// fails before it trains, with both numbers; `sluice plan` prints each part's share; the auto
// searches fit the whole job. On generated data sets (120 training images), so it stays fast;
// job_memory_long_test runs the real ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli_test_support.hpp"
#include "job_memory_support.hpp"
#include "test_support.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;

struct Model {
  std::string name;
  int side;
};

class CliJobMemory : public ::testing::TestWithParam<Model> {
 protected:
  void SetUp() override {
    make_image_folder(dir_ / "train", 3, 40, GetParam().side, GetParam().side);  // 15 steps of 8
    make_image_folder(dir_ / "test", 3, 8, GetParam().side, GetParam().side);
  }
  std::vector<std::string> args(std::vector<std::string> extra = {}, const std::string& batch = "8") const {
    std::vector<std::string> a{"--data", dir_.path().string(), "--model", GetParam().name, "--batch", batch,
                               "--threads", "2", "--seed", "1"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  TempDir dir_;
};

// The second epoch of each pipeline with a cache: no file read when its share holds the whole
// set, some read and some not when it holds part of it.
void expect_second_epoch_hits_as_planned(const JobRun& run, const std::string& what) {
  ASSERT_EQ(run.epochs.size(), 2u) << what;
  const JobEpoch& second = run.epochs[1];
  for (const nlohmann::json& p : run.result["job_plan"]["pipelines"]) {
    const auto share = p["cache_bytes"].get<std::uint64_t>();
    const auto set = p["cache_set_bytes"].get<std::uint64_t>();
    const auto it = std::find_if(second.caches.begin(), second.caches.end(),
                                 [&](const JobCache& c) { return c.pipeline == p["name"]; });
    if (share == 0) {
      EXPECT_EQ(it, second.caches.end()) << what << ": " << p["name"] << " has no cache";
      continue;
    }
    ASSERT_NE(it, second.caches.end()) << what << ": " << p["name"];
    EXPECT_GT(it->hits, 0) << what << ": " << p["name"];
    if (share >= set) {
      EXPECT_EQ(it->misses, 0) << what << ": " << p["name"] << " read files with its whole set cached";
    } else {
      EXPECT_GT(it->misses, 0) << what << ": " << p["name"] << " caches part of its set";
    }
  }
}

TEST_P(CliJobMemory, EveryEpochStaysInsideTheLimitFromTheMinimumToTheWholeSet) {
  const JobLimits limits = job_limits(args({"--epochs", "2"}));
  ASSERT_GT(limits.minimum, 0u);
  ASSERT_GT(limits.whole_set, limits.minimum);
  // The data set is small: 1.5 times the minimum already caches all of it, so a limit that
  // caches half the training split covers the partial case.
  const nlohmann::json& train = limits.plan["pipelines"][0];
  const std::uint64_t half = limits.minimum + train["prefetch_bytes"].get<std::uint64_t>() +
                             limits.plan["pipelines"][1]["prefetch_bytes"].get<std::uint64_t>() +
                             train["cache_set_bytes"].get<std::uint64_t>() / 2;
  for (const std::uint64_t limit : {limits.minimum, limits.minimum + limits.minimum / 2, limits.whole_set, half}) {
    const std::string what = GetParam().name + " at " + std::to_string(limit);
    const JobRun run = train_in_limit(args({"--epochs", "2"}), limit);
    ASSERT_EQ(run.exit_code, 0) << what << ": " << run.err;
    ASSERT_EQ(run.epochs.size(), 2u);
    for (const JobEpoch& e : run.epochs) {
      EXPECT_LE(e.peak_bytes, limit) << what << " epoch " << e.epoch;
      EXPECT_LE(e.rss_above_baseline, limit + kUnaccountedSlack) << what << " epoch " << e.epoch;
      EXPECT_EQ(e.training_peak, e.training_share) << "the training share is held, and never exceeded";
    }
    expect_second_epoch_hits_as_planned(run, what);
  }
}

TEST_P(CliJobMemory, BelowTheMinimumTheRunFailsBeforeTrainingWithBothNumbers) {
  const JobLimits limits = job_limits(args({"--epochs", "2"}));
  std::vector<std::string> a{"train"};
  const std::vector<std::string> rest = args({"--epochs", "2", "--memory-limit", std::to_string(limits.minimum - 1)});
  a.insert(a.end(), rest.begin(), rest.end());
  const CliRun run = run_cli(a);
  EXPECT_EQ(run.exit_code, 1) << run.err;
  for (const std::string& s : {std::string("the job needs at least"), std::string("the training step"),
                               std::string("training pipeline"), std::string("evaluation pipeline"),
                               "(" + std::to_string(limits.minimum) + " bytes)", std::string("--accumulate")}) {
    EXPECT_NE(run.err.find(s), std::string::npos) << s << " in: " << run.err;
  }
  EXPECT_EQ(run.out.find("epoch 1/"), std::string::npos) << "it trained: " << run.out;
}

TEST_P(CliJobMemory, PlanPrintsEachPartsShareWithThePipelinesUsesNamed) {
  const std::uint64_t limit = job_limits(args({"--epochs", "2"})).whole_set + (std::uint64_t{1} << 20);
  const std::vector<std::string> a =
      concat({"plan"}, args({"--epochs", "2", "--memory-limit", std::to_string(limit), "--json"}));
  const CliRun run = run_cli(a);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  for (const char* s : {"training ", "training pipeline", "evaluation pipeline", "read_buffers", "decode_buffers",
                        "shuffle", "batches", "+ cache", "+ prefetch", "unused"}) {
    EXPECT_NE(run.out.find(s), std::string::npos) << s << " in:\n" << run.out;
  }
  const json plan = json::parse(run.last_line())["job_plan"];
  std::uint64_t sum = plan["training"]["share_bytes"].get<std::uint64_t>() + plan["unused_bytes"].get<std::uint64_t>();
  for (const json& p : plan["pipelines"]) sum += p["share_bytes"].get<std::uint64_t>();
  EXPECT_EQ(sum, limit) << "the shares and the unused rest make up the limit";
  EXPECT_EQ(plan["unused_bytes"], 1u << 20);
}

TEST_P(CliJobMemory, TheAutoSearchesFitTheWholeJob) {
  const std::uint64_t limit = job_limits(args({"--epochs", "2"})).minimum * 3 / 2;
  const CliRun searched =
      run_cli(concat({"train"}, args({"--steps", "1", "--memory-limit", std::to_string(limit), "--json"}, "auto")));
  ASSERT_NE(searched.out.find("--batch auto:"), std::string::npos) << searched.out;
  ASSERT_EQ(searched.exit_code, 0) << searched.err;
  const json j = json::parse(searched.last_line());
  const int batch = j["batch"];
  EXPECT_EQ(j["batch_search"]["batch"], batch);
  EXPECT_GT(batch, 8);
  auto plan_fits = [&](int b) {
    return run_cli(concat({"plan"}, args({"--epochs", "1", "--memory-limit", std::to_string(limit)}, std::to_string(b))))
               .exit_code == 0;
  };
  EXPECT_TRUE(plan_fits(batch));
  EXPECT_FALSE(plan_fits(batch + 1));
}

INSTANTIATE_TEST_SUITE_P(Models, CliJobMemory,
                         ::testing::Values(Model{"fashion-cnn", 28}, Model{"cifar10-separable", 32}),
                         [](const ::testing::TestParamInfo<Model>& info) {
                           return info.param.name == "fashion-cnn" ? std::string("FashionCnn")
                                                                   : std::string("Cifar10Separable");
                         });

TEST(CliJobMemoryFlags, BadLimitsAreClearErrors) {
  TempDir dir;
  make_image_folder(dir / "train", 2, 4, 28, 28);
  make_image_folder(dir / "test", 2, 2, 28, 28);
  const std::vector<std::string> base{"--data", dir.path().string(), "--model", "fashion-cnn", "--steps", "1"};
  const CliRun bad = run_cli(concat(concat({"train"}, base), {"--memory-limit", "lots"}));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("--memory-limit: cannot read \"lots\""), std::string::npos) << bad.err;
  const CliRun host = run_cli(concat(concat({"train"}, base), {"--memory-limit", "1GiB", "--host-memory-limit", "1GiB"}));
  EXPECT_EQ(host.exit_code, 1);
  EXPECT_NE(host.err.find("--host-memory-limit is for a CUDA device"), std::string::npos) << host.err;
  const CliRun plan = run_cli({"plan", "--model", "fashion-cnn", "--memory-limit", "1GiB"});
  EXPECT_EQ(plan.exit_code, 1);
  EXPECT_NE(plan.err.find("give --data DIR"), std::string::npos) << plan.err;
}

}  // namespace
}  // namespace sluice::test
