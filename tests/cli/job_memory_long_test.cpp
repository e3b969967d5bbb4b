// job_memory_test on the real data sets (label jobmem_long, outside the default run: ctest -L
// jobmem_long): fashion-cnn on Fashion-MNIST (prepared from Debian's dataset-fashion-mnist into a
// temporary folder) and cifar10-separable on CIFAR-10 (the shared datasets folder), batch 128,
// two epochs each at the job's minimum, 1.5 times it, and a limit where both decoded splits fit:
// every epoch keeps the accounted peak within the limit and the resident peak above the
// baseline within the limit plus 64 MiB; with the whole set cached the second epoch reads no
// file. About 15 minutes for Fashion-MNIST and an hour for CIFAR-10 on 2 shared cores.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_test_support.hpp"
#include "job_memory_support.hpp"
#include "test_support.hpp"

namespace sluice::test {
namespace {

void run_three_limits(const std::vector<std::string>& args, const std::string& what) {
  const JobLimits limits = job_limits(args);
  ASSERT_GT(limits.whole_set, limits.minimum) << what;
  for (const std::uint64_t limit : {limits.minimum, limits.minimum + limits.minimum / 2, limits.whole_set}) {
    const JobRun run = train_in_limit(args, limit);
    ASSERT_EQ(run.exit_code, 0) << what << " at " << limit << ": " << run.err;
    ASSERT_EQ(run.epochs.size(), 2u);
    for (const JobEpoch& e : run.epochs) {
      EXPECT_LE(e.peak_bytes, limit) << what << " epoch " << e.epoch << " at " << limit;
      EXPECT_LE(e.rss_above_baseline, limit + kUnaccountedSlack) << what << " epoch " << e.epoch << " at " << limit;
    }
    if (limit == limits.whole_set) {
      ASSERT_EQ(run.epochs[1].caches.size(), 2u) << what;
      for (const JobCache& c : run.epochs[1].caches) {
        EXPECT_EQ(c.misses, 0) << what << ": " << c.pipeline << " read files in epoch 2";
        EXPECT_GT(c.hits, 0) << what << ": " << c.pipeline;
      }
    }
  }
}

TEST(CliJobMemoryLong, FashionCnnOnFashionMnist) {
  const std::filesystem::path source = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(source / "train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "no " << source.string() << ": apt-get install dataset-fashion-mnist (scripts/setup does)";
  }
  TempDir dir;
  const CliRun prepared = run_cli({"prepare", "fashion-mnist", "--out", (dir / "fashion-mnist").string()});
  ASSERT_EQ(prepared.exit_code, 0) << prepared.err;
  run_three_limits({"--data", (dir / "fashion-mnist").string(), "--model", "fashion-cnn", "--batch", "128",
                    "--epochs", "2", "--threads", "2", "--seed", "1"},
                   "fashion-cnn");
}

TEST(CliJobMemoryLong, Cifar10SeparableOnCifar10) {
  SLUICE_REQUIRE_DATASET(data, "cifar10");
  run_three_limits({"--data", data.string(), "--model", "cifar10-separable", "--batch", "128", "--epochs", "2",
                    "--threads", "2", "--seed", "1"},
                   "cifar10-separable");
}

}  // namespace
}  // namespace sluice::test
