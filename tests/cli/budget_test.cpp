// The memory budget, through the binary (each run a fresh process, so its VmHWM is its own): for
// every pipeline shape, at budgets from the pipeline's minimum to 4 GiB, the accounted peak stays
// within the budget and the peak resident memory above the process's baseline within the budget
// plus 64 MiB (libjpeg-turbo's per-image working memory, the allocator's slack and the code are
// not accounted). Below the minimum, the run fails at build with the numbers.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "cli_test_support.hpp"
#include "sluice/core/units.hpp"
#include "test_support.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;

struct Shape {
  std::string name;
  std::vector<std::string> args;
};

std::vector<std::string> base_args(const std::filesystem::path& data) {
  return {"bench", "--data", data.string(), "--transform", "train", "--size", "160", "--batch", "32",
          "--epochs", "2", "--shuffle", "--json"};
}

// The minimum the pipeline reports when the budget is too small.
std::uint64_t minimum_of(std::vector<std::string> args) {
  args.insert(args.end(), {"--budget", "1KiB"});
  const CliRun run = run_cli(args);
  EXPECT_EQ(run.exit_code, 1);
  std::smatch m;
  const std::regex raise("raise the budget to [0-9.]+ [KMG]iB \\(([0-9]+) bytes\\)");
  if (!std::regex_search(run.err, m, raise)) {
    ADD_FAILURE() << "no minimum in: " << run.err;
    return 0;
  }
  return std::stoull(m[1].str());
}

TEST(MemoryBudget, EveryShapeStaysInsideEveryBudget) {
  SLUICE_REQUIRE_DATASET(data, "imagenette-val");
  TempDir dir;
  std::vector<Shape> shapes{
      {"plain", {}},
      {"shuffle_buffer", {"--shuffle-buffer", "2000"}},
      {"memory_cache", {"--cache", "memory"}},
      {"memory_cache_decoded", {"--cache", "memory,decoded"}},
      {"disk_cache", {"--cache", "disk:" + (dir / "cache.bin").string()}},
      {"prefetch_1", {"--prefetch", "1"}},
      {"prefetch_8", {"--prefetch", "8"}},
      {"autotuned", {"--threads", "auto"}},
  };
  for (Shape& shape : shapes) {
    if (shape.name != "autotuned") shape.args.insert(shape.args.end(), {"--threads", "2"});
  }
  for (const Shape& shape : shapes) {
    std::vector<std::string> args = base_args(data);
    args.insert(args.end(), shape.args.begin(), shape.args.end());
    const std::uint64_t minimum = minimum_of(args);
    ASSERT_GT(minimum, 0u) << shape.name;
    for (const std::uint64_t budget : {minimum, minimum + minimum / 2, std::uint64_t{256} << 20, std::uint64_t{4} << 30}) {
      std::vector<std::string> run_args = args;
      run_args.insert(run_args.end(), {"--budget", std::to_string(budget)});
      const CliRun run = run_cli(run_args);
      ASSERT_EQ(run.exit_code, 0) << shape.name << " at " << budget << ": " << run.err;
      const json j = json::parse(run.last_line());
      const auto peak = j["memory_peak"].get<std::uint64_t>();
      const auto rss = j["peak_rss_bytes"].get<std::uint64_t>() - j["baseline_rss_bytes"].get<std::uint64_t>();
      std::printf("%-22s budget %10llu: accounted peak %10llu, RSS above baseline %10llu, %6.0f images/s\n",
                  shape.name.c_str(), static_cast<unsigned long long>(budget), static_cast<unsigned long long>(peak),
                  static_cast<unsigned long long>(rss), j["images_per_sec"].get<double>());
      EXPECT_LE(peak, budget) << shape.name;
      EXPECT_LE(rss, budget + (std::uint64_t{64} << 20)) << shape.name << " at " << budget;
      EXPECT_EQ(j["images"], 2 * 3925) << shape.name;
    }
  }
}

}  // namespace
}  // namespace sluice::test
