// `sluice plan` against `sluice train` with the same flags, and train's memory flags: --memory
// modes and their errors, reserved and in use apart in --json, --profile's trace, --batch auto.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_test_support.hpp"
#include "test_support.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;

json last_json(const std::vector<std::string>& args) {
  const CliRun run = run_cli(args);
  EXPECT_EQ(run.exit_code, 0) << run.err << run.out;
  return json::parse(run.last_line());
}

void make_split_folder(const TempDir& dir) {
  make_image_folder(dir / "train", 3, 8, 28, 28);
  make_image_folder(dir / "test", 3, 4, 28, 28);
}

TEST(CliPlan, PredictsTrainsPeakDeviceBytes) {
  TempDir dir;
  make_split_folder(dir);
  for (const char* optimizer : {"sgd", "adam"}) {
    const json t = last_json({"train", "--data", dir.path().string(), "--model", "fashion-cnn", "--steps", "2",
                              "--batch", "4", "--threads", "1", "--optimizer", optimizer, "--no-eval", "--json"});
    const json p = last_json({"plan", "--model", "fashion-cnn", "--batch", "4", "--threads", "1", "--optimizer",
                              optimizer, "--no-eval", "--epochs", "1", "--json"});
    const double real = t["peak_device_bytes"].get<double>();
    const double predicted = p["predicted_peak_bytes"].get<double>();
    EXPECT_NEAR(predicted, real, 0.05 * real) << optimizer;
    for (const auto& [category, bytes] : p["by_category"].items()) {
      EXPECT_NEAR(bytes.get<double>(), t["peak_by_category"][category].get<double>(), 0.05 * real) << category;
    }
  }
}

// A plan that does not fit is the command's failure (exit 1, not a usage error), after the
// whole report and its JSON.
TEST(CliPlan, APlanThatDoesNotFitExitsOneAfterItsReport) {
  const CliRun run = run_cli({"plan", "--model", "fashion-cnn", "--batch", "256", "--threads", "1", "--memory",
                              "grow:1MiB", "--json"});
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_NE(run.out.find("DOES NOT FIT"), std::string::npos) << run.out;
  EXPECT_NE(run.err.find("--memory grow:1MiB"), std::string::npos) << run.err;
  const json p = json::parse(run.last_line());
  EXPECT_EQ(p["fits"], false);
  EXPECT_FALSE(p["failure"].is_null());
}

// --device cuda:0 is planned without a GPU (it used to be refused): the CUDA backend's
// workspaces plus cuBLAS's, which the CPU plan of the same flags does not have; the weights,
// gradients and optimizer state are the same tensors either way.
TEST(CliPlan, PlansForACudaDeviceWithoutAGpu) {
  const std::vector<std::string> flags = {"plan", "--model", "cifar10-separable", "--batch", "32", "--threads", "1",
                                          "--no-eval", "--epochs", "1", "--json"};
  std::vector<std::string> cuda_flags = flags;
  cuda_flags.insert(cuda_flags.end(), {"--device", "cuda:0"});
  const json cpu = last_json(flags);
  const json gpu = last_json(cuda_flags);
  EXPECT_EQ(gpu["device"], "cuda:0");
  EXPECT_NE(gpu["backend"].get<std::string>().find("cuda:0"), std::string::npos) << gpu["backend"];
  EXPECT_EQ(cpu["device"], "host");
  EXPECT_TRUE(gpu["fits"].get<bool>());
  EXPECT_GE(gpu["by_category"]["workspace"].get<std::uint64_t>(), 4u << 20);  // cuBLAS's, at least
  for (const char* same : {"weights", "gradients", "optimizer state"}) {
    EXPECT_EQ(gpu["by_category"][same], cpu["by_category"][same]) << same;
  }
  const CliRun bad = run_cli({"plan", "--device", "gpu0"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("cpu or cuda:N"), std::string::npos) << bad.err;
}

TEST(CliPlan, BadValuesAreClearErrors) {
  const CliRun bad_memory = run_cli({"plan", "--memory", "lots"});
  EXPECT_EQ(bad_memory.exit_code, 1);
  EXPECT_NE(bad_memory.err.find("grow, grow:LIMIT or prealloc:SIZE"), std::string::npos) << bad_memory.err;
  const CliRun bad_size = run_cli({"plan", "--memory", "prealloc:12 apples"});
  EXPECT_EQ(bad_size.exit_code, 1);
  EXPECT_NE(bad_size.err.find("cannot read"), std::string::npos) << bad_size.err;
  const CliRun bad_batch = run_cli({"plan", "--batch", "1"});
  EXPECT_EQ(bad_batch.exit_code, 1);
  EXPECT_NE(bad_batch.err.find("--batch"), std::string::npos) << bad_batch.err;
  const CliRun auto_without_limit = run_cli({"plan", "--batch", "auto"});
  EXPECT_EQ(auto_without_limit.exit_code, 1);
  EXPECT_NE(auto_without_limit.err.find("memory limit"), std::string::npos) << auto_without_limit.err;
}

TEST(CliTrainMemory, PreallocShowsReservedAndInUseApart) {
  TempDir dir;
  make_split_folder(dir);
  const json t = last_json({"train", "--data", dir.path().string(), "--model", "fashion-cnn", "--steps", "1",
                            "--batch", "4", "--threads", "1", "--memory", "prealloc:64MiB", "--json"});
  EXPECT_EQ(t["memory"]["mode"], "prealloc");
  EXPECT_EQ(t["memory"]["limit_bytes"], 64u << 20);
  EXPECT_EQ(t["peak_reserved_bytes"], 64u << 20);
  EXPECT_LT(t["peak_in_use_bytes"].get<std::uint64_t>(), 64u << 20);
  EXPECT_EQ(t["peak_in_use_bytes"], t["peak_device_bytes"]);
  const CliRun too_small = run_cli({"train", "--data", dir.path().string(), "--model", "fashion-cnn", "--steps", "1",
                                    "--batch", "4", "--threads", "1", "--memory", "prealloc:1MiB"});
  EXPECT_EQ(too_small.exit_code, 1);
}

TEST(CliTrainMemory, ProfileWritesAChromeTraceAndASummary) {
  TempDir dir;
  make_split_folder(dir);
  const std::string trace = (dir / "trace.json").string();
  const CliRun run = run_cli({"train", "--data", dir.path().string(), "--model", "fashion-cnn", "--steps", "3",
                              "--batch", "4", "--threads", "1", "--profile", trace});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("memory profile (3 steps"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("reserved, peak"), std::string::npos) << run.out;
  std::ifstream f(trace);
  std::stringstream text;
  text << f.rdbuf();
  const json j = json::parse(text.str());
  int counters = 0, steps = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "C") ++counters;
    if (e["ph"] == "X" && e["name"].get<std::string>().rfind("step ", 0) == 0) ++steps;
  }
  EXPECT_GT(counters, 10);
  EXPECT_EQ(steps, 3);
}

TEST(CliTrainMemory, BatchAutoFindsABatchUnderTheLimit) {
  TempDir dir;
  make_split_folder(dir);  // 24 training images: the batch found must stay below (one step)
  const json t = last_json({"train", "--data", dir.path().string(), "--model", "fashion-cnn", "--steps", "1",
                            "--batch", "auto", "--memory", "grow:9MiB", "--threads", "1", "--no-eval", "--json"});
  const json& s = t["batch_search"];
  ASSERT_TRUE(s.is_object()) << t.dump();
  EXPECT_EQ(t["batch"], s["batch"]);
  EXPECT_LE(s["trials"].size(), 6u);
  EXPECT_LE(t["peak_device_bytes"].get<std::uint64_t>(), 9u << 20);
}

// --batch auto with --accumulate K searches the multiples of K only: every batch it finds splits
// into K equal micro-batches (it used to start at 2 and fail for K = 3).
TEST(CliTrainMemory, BatchAutoWithAccumulationFindsAMultipleOfIt) {
  TempDir dir;
  make_split_folder(dir);
  const json t = last_json({"train", "--data", dir.path().string(), "--model", "fashion-cnn", "--steps", "1",
                            "--batch", "auto", "--accumulate", "3", "--memory", "grow:9MiB", "--threads", "1",
                            "--no-eval", "--json"});
  const json& s = t["batch_search"];
  ASSERT_TRUE(s.is_object()) << t.dump();
  EXPECT_EQ(t["accumulate"], 3);
  EXPECT_EQ(t["batch"].get<int>() % 3, 0) << t["batch"];
  for (const json& trial : s["trials"]) EXPECT_EQ(trial["batch"].get<int>() % 3, 0) << trial;
  EXPECT_LE(t["peak_device_bytes"].get<std::uint64_t>(), 9u << 20);
}

TEST(CliTrainMemory, AccumulateAutoKeepsTheBatchAndFitsTheLimit) {
  TempDir dir;
  make_split_folder(dir);  // 24 training images: batches of 8
  const json t = last_json({"train", "--data", dir.path().string(), "--model", "fashion-cnn", "--steps", "1",
                            "--batch", "8", "--accumulate", "auto", "--memory", "grow:9MiB", "--threads", "1",
                            "--no-eval", "--json"});
  EXPECT_EQ(t["batch"], 8);
  EXPECT_EQ(t["accumulate"], 2);  // micro-batches of 8 run out under 9 MiB, of 4 fit (sluice plan says so too)
  EXPECT_EQ(t["batch_search"]["accumulate"], 2);
  EXPECT_LE(t["batch_search"]["trials"].size(), 6u);
  EXPECT_LE(t["peak_device_bytes"].get<std::uint64_t>(), 9u << 20);
}

}  // namespace
}  // namespace sluice::test
