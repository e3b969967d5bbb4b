// `sluice train --accumulate K --checkpoint POLICY`: the settings in the summary and the --json
// object, the same result with and without checkpointing, and clear errors for a K that does not
// divide the batch, K <= 0 and bad policies, before any data is read.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_test_support.hpp"
#include "test_support.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;

CliRun train(const TempDir& dir, std::vector<std::string> extra) {
  std::vector<std::string> args{"train", "--data", dir.path().string(), "--model", "fashion-cnn", "--steps", "2",
                                "--batch", "8", "--threads", "1", "--seed", "3"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_cli(args);
}

class CliTrainMemoryFlags : public ::testing::Test {
 protected:
  void SetUp() override {
    make_image_folder(dir_ / "train", 3, 8, 28, 28);
    make_image_folder(dir_ / "test", 3, 2, 28, 28);
  }
  TempDir dir_;
};

TEST_F(CliTrainMemoryFlags, SettingsAreReported) {
  const CliRun run = train(dir_, {"--accumulate", "4", "--checkpoint", "every:3", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  EXPECT_NE(run.out.find("accumulation: 4 micro-batches of 2; gradient checkpointing: every:3 "
                         "(segments of 3 of 13 layers)"),
            std::string::npos)
      << run.out;
  const json j = json::parse(run.last_line());
  EXPECT_EQ(j["accumulate"], 4);
  EXPECT_EQ(j["micro_batch"], 2);
  EXPECT_EQ(j["checkpoint"], "every:3");
  EXPECT_EQ(j["batch"], 8);
  EXPECT_EQ(j["steps"], 2);

  const CliRun plain = train(dir_, {"--json"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const json p = json::parse(plain.last_line());
  EXPECT_EQ(p["accumulate"], 1);
  EXPECT_EQ(p["checkpoint"], "none");
  EXPECT_NE(plain.out.find("accumulation: none; gradient checkpointing: none"), std::string::npos) << plain.out;
}

TEST_F(CliTrainMemoryFlags, CheckpointingDoesNotChangeTheResult) {
  const CliRun a = train(dir_, {"--json"});
  const CliRun b = train(dir_, {"--checkpoint", "sqrt", "--json"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const json ja = json::parse(a.last_line()), jb = json::parse(b.last_line());
  EXPECT_EQ(ja["final_loss"], jb["final_loss"]);
  EXPECT_EQ(ja["test_loss"], jb["test_loss"]);
}

TEST_F(CliTrainMemoryFlags, BadValuesAreClearErrors) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"--accumulate", "3"}, "--accumulate 3 does not divide --batch 8"},
      {{"--accumulate", "0"}, "--accumulate must be >= 1"},
      {{"--accumulate", "-2"}, "--accumulate must be >= 1"},
      {{"--checkpoint", "every:0"}, "--checkpoint: checkpoint policy \"every:0\": K must be >= 1"},
      {{"--checkpoint", "foo"}, "--checkpoint: checkpoint policy \"foo\": unknown policy"},
  };
  for (const auto& [args, message] : cases) {
    const CliRun run = train(dir_, args);
    EXPECT_EQ(run.exit_code, 1) << args[1];
    EXPECT_NE(run.err.find(message), std::string::npos) << run.err;
  }
}

}  // namespace
}  // namespace sluice::test
