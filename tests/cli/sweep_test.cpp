// `sluice sweep`: a small sweep in CI (two budgets, two epochs) writes its CSV and plot, the
// larger budget caches more, and every run stays inside its budget.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "cli_test_support.hpp"
#include "test_support.hpp"

namespace sluice::test {
namespace {

TEST(CliSweep, SmallSweepWritesCsvAndPlotAndRespectsBudgets) {
  SLUICE_REQUIRE_DATASET(data, "imagenette-val");
  TempDir out;
  const CliRun run = run_cli({"sweep", "--data", data.string(), "--budgets", "28MiB,256MiB", "--cache", "memory",
                              "--transform", "eval", "--size", "96", "--batch", "32", "--epochs", "2", "--threads",
                              "2", "--out", out.path().string()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(std::filesystem::exists(out / "sweep.png")) << run.err;
  std::ifstream csv(out / "sweep.csv");
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line, "budget_bytes,epoch,images_per_sec,cache_hit_rate,peak_rss_above_baseline,accounted_peak,cache_bytes");
  std::map<std::pair<std::uint64_t, int>, double> hit_rate;
  int rows = 0;
  while (std::getline(csv, line)) {
    std::stringstream in(line);
    std::string cell;
    std::vector<std::string> cells;
    while (std::getline(in, cell, ',')) cells.push_back(cell);
    ASSERT_EQ(cells.size(), 7u) << line;
    const std::uint64_t budget = std::stoull(cells[0]);
    EXPECT_GT(std::stod(cells[2]), 0.0);
    EXPECT_LE(std::stoull(cells[4]), budget + (std::uint64_t{64} << 20));
    EXPECT_LE(std::stoull(cells[5]), budget);
    hit_rate[{budget, std::stoi(cells[1])}] = std::stod(cells[3]);
    ++rows;
  }
  EXPECT_EQ(rows, 4);
  const std::uint64_t small = std::uint64_t{28} << 20;
  const std::uint64_t large = std::uint64_t{256} << 20;
  const auto rate = [&](std::uint64_t budget, int epoch) { return hit_rate[std::make_pair(budget, epoch)]; };
  EXPECT_EQ(rate(small, 0), 0.0);   // the first epoch fills the cache
  EXPECT_GT(rate(large, 1), 0.99);  // imagenette's 41 MB of files fit in 256 MiB
  EXPECT_LT(rate(small, 1), rate(large, 1));
}

}  // namespace
}  // namespace sluice::test
