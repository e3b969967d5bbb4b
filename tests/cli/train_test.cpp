// `sluice train`: the JSON contract (accuracy, images/s, peak memory by category) on a tiny
// generated data set for both models, pruning and optimizer offload as reported, the
// prepared-data and device errors, and usage errors.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "cli_test_support.hpp"
#include "test_support.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;

// DIR/train and DIR/test, 3 classes of generated side x side RGB JPEGs.
void make_split_folder(const TempDir& dir, int side, int per_class_train, int per_class_test) {
  make_image_folder(dir / "train", 3, per_class_train, side, side);
  make_image_folder(dir / "test", 3, per_class_test, side, side);
}

json train_json(const std::vector<std::string>& args) {
  std::vector<std::string> all{"train"};
  all.insert(all.end(), args.begin(), args.end());
  all.push_back("--json");
  const CliRun run = run_cli(all);
  EXPECT_EQ(run.exit_code, 0) << run.err << run.out;
  return json::parse(run.last_line());
}

void expect_contract(const json& j, std::int64_t steps) {
  for (const char* key : {"test_accuracy", "train_images_per_sec", "pipeline_images_per_sec", "peak_device_bytes",
                          "peak_by_category", "reserved_bytes", "per_epoch", "steps", "parameters"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["steps"], steps);
  const double accuracy = j["test_accuracy"];
  EXPECT_GE(accuracy, 0.0);
  EXPECT_LE(accuracy, 1.0);
  EXPECT_GT(j["train_images_per_sec"].get<double>(), 0.0);
  EXPECT_GT(j["pipeline_images_per_sec"].get<double>(), 0.0);
  const auto peak = j["peak_device_bytes"].get<std::uint64_t>();
  EXPECT_GT(peak, 0u);
  EXPECT_GE(j["reserved_bytes"].get<std::uint64_t>(), peak);
  const json& by = j["peak_by_category"];
  for (const char* c : {"weights", "gradients", "optimizer state", "activations", "workspace"}) {
    ASSERT_TRUE(by.contains(c)) << c;
    EXPECT_GT(by[c].get<std::uint64_t>(), 0u) << c;
    EXPECT_LE(by[c].get<std::uint64_t>(), peak) << c;
  }
  ASSERT_FALSE(j["per_epoch"].empty());
  EXPECT_TRUE(j["per_epoch"][0].contains("loss"));
}

TEST(CliTrain, FashionCnnOnATinyGreyFolderReportsTheContract) {
  TempDir dir;
  make_split_folder(dir, 28, 8, 4);  // 24 training images: 3 steps of 8
  const json j = train_json({"--data", dir.path().string(), "--model", "fashion-cnn", "--steps", "4", "--batch", "8",
                             "--threads", "1", "--seed", "3"});
  expect_contract(j, 4);
  EXPECT_EQ(j["model"], "fashion-cnn");
  EXPECT_EQ(j["parameters"], 421738);
  EXPECT_EQ(j["epochs"], 2);  // 3 steps an epoch, so the 4th is in epoch 2
  EXPECT_EQ(j["per_epoch"].size(), 2u);
}

TEST(CliTrain, Cifar10SeparableWithAdamAndSavedWeights) {
  TempDir dir;
  make_split_folder(dir, 32, 6, 2);
  const std::string weights = (dir / "w.bin").string();
  const json j = train_json({"--data", dir.path().string(), "--model", "cifar10-separable", "--steps", "2", "--batch",
                             "6", "--optimizer", "adam", "--threads", "2", "--save", weights});
  expect_contract(j, 2);
  EXPECT_EQ(j["optimizer"], "adam");
  EXPECT_GT(read_bytes(weights).size(), 4u * 200000u);
}

TEST(CliTrain, SameSeedSameResult) {
  TempDir dir;
  make_split_folder(dir, 28, 8, 4);
  const std::vector<std::string> args{"--data", dir.path().string(), "--model", "fashion-cnn", "--steps", "3",
                                      "--batch", "8", "--seed", "5"};
  std::vector<std::string> one = args, two = args;
  one.insert(one.end(), {"--threads", "1"});
  two.insert(two.end(), {"--threads", "2"});
  const json a = train_json(one), b = train_json(two);
  EXPECT_EQ(a["final_loss"], b["final_loss"]);
  EXPECT_EQ(a["test_loss"], b["test_loss"]);
}

TEST(CliTrain, MixedPrecisionReportsItsLossScaleCounters) {
  TempDir dir;
  make_split_folder(dir, 28, 8, 4);
  for (const char* precision : {"mixed_f16", "mixed_bf16"}) {
    const json j = train_json({"--data", dir.path().string(), "--model", "fashion-cnn", "--steps", "3", "--batch",
                               "8", "--threads", "1", "--precision", precision});
    expect_contract(j, 3);
    EXPECT_EQ(j["precision"], precision);
    for (const json* o : {&j, &j["per_epoch"][0]}) {
      for (const char* key : {"loss_scale", "skipped_steps", "growth_events"}) EXPECT_TRUE(o->contains(key)) << key;
    }
    if (std::string(precision) == "mixed_bf16") {
      EXPECT_EQ(j["loss_scale"], 1.0);
      EXPECT_EQ(j["skipped_steps"], 0);
    } else {
      // 2^16 halved once per skipped step.
      EXPECT_EQ(j["loss_scale"].get<double>(), std::ldexp(1.0, 16 - j["skipped_steps"].get<int>()));
    }
  }
  const json f32 = train_json({"--data", dir.path().string(), "--model", "fashion-cnn", "--steps", "1", "--batch", "8",
                               "--threads", "1"});
  EXPECT_EQ(f32["precision"], "f32");
  EXPECT_EQ(f32["loss_scale"], 1.0);
}

TEST(CliTrain, PruningReportsItsScheduleAndSparsityAndSavesCompressedWeights) {
  TempDir dir;
  make_split_folder(dir, 28, 8, 4);  // 3 steps an epoch
  const std::string packed = (dir / "pruned.bin").string();
  const json j = train_json({"--data", dir.path().string(), "--model", "fashion-cnn", "--steps", "6", "--batch", "8",
                             "--threads", "1", "--prune", "0.5", "--prune-frequency", "1", "--prune-end", "3",
                             "--save-pruned", packed});
  expect_contract(j, 6);
  ASSERT_TRUE(j.contains("pruning"));
  const json& p = j["pruning"];
  EXPECT_EQ(p["target_sparsity"], 0.5);
  EXPECT_EQ(p["end_step"], 3);
  EXPECT_EQ(p["frequency"], 1);
  // The masks reached 50% at step 3 and held it: each tensor keeps round(n / 2) elements.
  EXPECT_NEAR(p["sparsity"].get<double>(), 0.5, 1e-3);
  EXPECT_LT(p["resident_bytes"].get<std::uint64_t>(), p["dense_bytes"].get<std::uint64_t>());
  EXPECT_EQ(p["file_bytes"].get<std::uint64_t>(), read_bytes(packed).size());
  ASSERT_EQ(j["per_epoch"].size(), 2u);
  for (const json& e : j["per_epoch"]) {
    EXPECT_TRUE(e.contains("sparsity"));
    EXPECT_TRUE(e.contains("target_sparsity"));
  }
  EXPECT_LT(j["per_epoch"][0]["target_sparsity"].get<double>(), 0.5);  // the schedule's step 2
  EXPECT_EQ(j["per_epoch"][1]["target_sparsity"], 0.5);
}

TEST(CliTrain, OffloadKeepsTheOptimizerStateInHostMemory) {
  TempDir dir;
  make_split_folder(dir, 28, 8, 4);
  const json j = train_json({"--data", dir.path().string(), "--model", "fashion-cnn", "--steps", "2", "--batch", "8",
                             "--threads", "1", "--optimizer", "adam", "--offload", "optimizer"});
  expect_contract(j, 2);
  ASSERT_TRUE(j.contains("offload"));
  EXPECT_EQ(j["offload"]["what"], "optimizer");
  EXPECT_EQ(j["offload"]["host_memory"], "pageable");
  // AdamW's two f32 moments per parameter live on the host; the device holds a staging buffer.
  const auto host_state = j["offload"]["host_state_bytes"].get<std::uint64_t>();
  EXPECT_GE(host_state, 2u * 4u * 421738u);
  EXPECT_LT(j["peak_by_category"]["optimizer state"].get<std::uint64_t>(), host_state);
}

TEST(CliTrain, UnpreparedDatasetSaysHowToPrepareIt) {
  TempDir dir;
  const CliRun run = run_cli({"train", "--dataset", "fashion-mnist", "--data-root", dir.path().string()});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("sluice prepare fashion-mnist"), std::string::npos) << run.err;
}

TEST(CliTrain, CudaWithoutABackendIsAClearError) {
  TempDir dir;
  make_split_folder(dir, 28, 2, 1);
  const CliRun run = run_cli({"train", "--data", dir.path().string(), "--model", "fashion-cnn", "--device", "cuda:0",
                              "--steps", "1", "--batch", "2"});
  if (run.exit_code == 0) GTEST_SKIP() << "this build and machine train on cuda:0";
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("--device cuda:0"), std::string::npos) << run.err;
}

// --save, --save-pruned and --profile are checked before training (an unwritable --save failed
// after the whole run), and a symlink at --save is never written through.
TEST(CliTrain, OutputsAreCheckedBeforeTheRun) {
  TempDir dir;
  make_split_folder(dir, 28, 2, 1);
  CliRun run = run_cli({"train", "--data", dir.path().string(), "--model", "fashion-cnn", "--steps", "1", "--batch",
                        "2", "--save", (dir / "absent" / "w.bin").string()});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("No such file or directory"), std::string::npos) << run.err;
  EXPECT_EQ(run.out.find("step"), std::string::npos) << "trained before checking: " << run.out;
  write_bytes(dir / "victim", {'v'});
  std::filesystem::create_symlink(dir / "victim", dir / "w.bin");
  run = run_cli({"train", "--data", dir.path().string(), "--model", "fashion-cnn", "--steps", "1", "--batch", "2",
                 "--profile", (dir / "w.bin").string()});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("symbolic link"), std::string::npos) << run.err;
  EXPECT_EQ(read_bytes(dir / "victim"), (std::vector<std::uint8_t>{'v'}));
}

TEST(CliTrain, UsageErrors) {
  EXPECT_EQ(run_cli({"train"}).exit_code, 2);  // neither --dataset nor --data
  EXPECT_EQ(run_cli({"train", "--dataset", "fashion-mnist", "--model", "resnet"}).exit_code, 2);
  EXPECT_EQ(run_cli({"train", "--dataset", "fashion-mnist", "--epochs", "2", "--steps", "3"}).exit_code, 2);
  EXPECT_EQ(run_cli({"train", "--dataset", "fashion-mnist", "--precision", "f16"}).exit_code, 2);
  const CliRun bad_device = run_cli({"train", "--dataset", "fashion-mnist", "--device", "gpu"});
  EXPECT_EQ(bad_device.exit_code, 1);
  EXPECT_NE(bad_device.err.find("cpu or cuda:N"), std::string::npos) << bad_device.err;
}

}  // namespace
}  // namespace sluice::test
