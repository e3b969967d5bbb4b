// Helpers of the job-memory tests (job_memory_test, job_memory_long_test): the job's minimum and
// whole-set limits from `sluice plan --memory-limit --json`, and a `sluice train --memory-limit
// --json` run read back per epoch.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_test_support.hpp"

namespace sluice::test {

// What the design allows above the accounted limit in resident memory: the code, libjpeg-turbo's
// and OpenBLAS's working memory, the allocators' slack (docs/memory.md measures it).
inline constexpr std::uint64_t kUnaccountedSlack = std::uint64_t{64} << 20;

inline std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct JobLimits {
  std::uint64_t minimum = 0;    // training's share and the pipelines' minimums: the least that runs
  std::uint64_t whole_set = 0;  // and their start slots and caches of every split's whole data set
  nlohmann::json plan;          // the plan at a limit nothing needs
};

// `sluice plan` with train's `args` at a limit nothing needs.
inline JobLimits job_limits(const std::vector<std::string>& args) {
  const CliRun run = run_cli(concat(concat({"plan"}, args), {"--memory-limit", "64GiB", "--json"}));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  if (run.exit_code != 0) return {};
  JobLimits l;
  l.plan = nlohmann::json::parse(run.last_line())["job_plan"];
  l.minimum = l.plan["training"]["share_bytes"].get<std::uint64_t>() + l.plan["offloaded_state_bytes"].get<std::uint64_t>();
  l.whole_set = l.minimum;
  for (const nlohmann::json& p : l.plan["pipelines"]) {
    l.minimum += p["minimum_bytes"].get<std::uint64_t>();
    l.whole_set += p["minimum_bytes"].get<std::uint64_t>() + p["prefetch_bytes"].get<std::uint64_t>() +
                   p["cache_set_bytes"].get<std::uint64_t>();
  }
  return l;
}

struct JobCache {
  std::string pipeline;
  std::int64_t hits = 0;
  std::int64_t misses = 0;
};

struct JobEpoch {
  int epoch = 0;
  std::uint64_t peak_bytes = 0;          // accounted, in the job's budget
  std::uint64_t rss_above_baseline = 0;  // VmHWM at the epoch's end minus the process's start
  std::uint64_t training_share = 0;
  std::uint64_t training_peak = 0;
  double train_images_per_sec = 0;
  double seconds = 0;
  std::vector<JobCache> caches;
};

struct JobRun {
  int exit_code = -1;
  std::string err;
  nlohmann::json result;
  std::vector<JobEpoch> epochs;
};

// `sluice train` with `args` under --memory-limit `limit`.
inline JobRun train_in_limit(const std::vector<std::string>& args, std::uint64_t limit) {
  const CliRun cli = run_cli(concat(concat({"train"}, args), {"--memory-limit", std::to_string(limit), "--json"}));
  JobRun run{.exit_code = cli.exit_code, .err = cli.err};
  if (cli.exit_code != 0) return run;
  run.result = nlohmann::json::parse(cli.last_line());
  for (const nlohmann::json& e : run.result["per_epoch"]) {
    const nlohmann::json& j = e["job_memory"];
    JobEpoch epoch{.epoch = e["epoch"], .peak_bytes = j["peak_bytes"], .rss_above_baseline = e["rss_above_baseline_bytes"],
                   .train_images_per_sec = e["train_images_per_sec"], .seconds = e["seconds"]};
    for (const nlohmann::json& p : j["parts"]) {
      if (p["name"] == "training") {
        epoch.training_share = p["share_bytes"];
        epoch.training_peak = p["peak_bytes"];
      }
    }
    for (const nlohmann::json& c : j["caches"]) epoch.caches.push_back({c["pipeline"], c["hits"], c["misses"]});
    std::printf("  limit %11llu epoch %d: accounted peak %11llu, RSS above baseline %11llu, %7.0f images/s",
                static_cast<unsigned long long>(limit), epoch.epoch, static_cast<unsigned long long>(epoch.peak_bytes),
                static_cast<unsigned long long>(epoch.rss_above_baseline), epoch.train_images_per_sec);
    for (const JobCache& c : epoch.caches) {
      std::printf(", %s cache %lld hits %lld misses", c.pipeline.c_str(), static_cast<long long>(c.hits),
                  static_cast<long long>(c.misses));
    }
    std::printf("\n");
    run.epochs.push_back(epoch);
  }
  return run;
}

}  // namespace sluice::test
