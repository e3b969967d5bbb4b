// launcher_rank() and Pipeline::shard_from_launcher(): the rank and world size read from what
// torchrun, mpirun (OpenMPI, MPICH/Hydra, MVAPICH) and srun export, their precedence, the Slurm
// batch script that is not a rank, a lone RANK that is not torchrun's, malformed values, and that the shard taken from the environment
// delivers the same disjoint slices as shard(rank, world).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "pipeline_support.hpp"
#include "sluice/pipeline/launcher.hpp"
#include "sluice/sluice.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

constexpr const char* kVariables[] = {
    "RANK",                 "WORLD_SIZE",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK",     "PMI_SIZE",
    "MV2_COMM_WORLD_RANK",  "MV2_COMM_WORLD_SIZE",  "SLURM_PROCID", "SLURM_STEP_NUM_TASKS",
    "SLURM_NTASKS"};

// Clears every launcher variable for the test (the suite itself may run under mpirun or srun)
// and puts the process's own values back afterwards.
class LauncherEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kVariables) {
      const char* value = std::getenv(name);
      saved_.emplace_back(name, value ? std::optional<std::string>(value) : std::nullopt);
      unsetenv(name);
    }
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }
  static void set(const char* name, const char* value) { ASSERT_EQ(setenv(name, value, 1), 0); }

  static std::string invalid_message() {
    try {
      launcher_rank();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      return e.what();
    }
    ADD_FAILURE() << "launcher_rank() did not throw";
    return {};
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST_F(LauncherEnv, NoLauncherIsRankZeroOfOne) {
  const LauncherRank r = launcher_rank();
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.world, 1);
  EXPECT_EQ(r.source, "");
}

TEST_F(LauncherEnv, OpenMpiMpirun) {
  set("OMPI_COMM_WORLD_RANK", "3");
  set("OMPI_COMM_WORLD_SIZE", "4");
  const LauncherRank r = launcher_rank();
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.world, 4);
  EXPECT_EQ(r.source, "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE");
}

TEST_F(LauncherEnv, MpichHydraPmi) {
  set("PMI_RANK", "1");
  set("PMI_SIZE", "2");
  const LauncherRank r = launcher_rank();
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.world, 2);
  EXPECT_EQ(r.source, "PMI_RANK/PMI_SIZE");
}

TEST_F(LauncherEnv, Mvapich) {
  set("MV2_COMM_WORLD_RANK", "5");
  set("MV2_COMM_WORLD_SIZE", "8");
  const LauncherRank r = launcher_rank();
  EXPECT_EQ(r.rank, 5);
  EXPECT_EQ(r.world, 8);
}

TEST_F(LauncherEnv, SrunTask) {
  set("SLURM_PROCID", "6");
  set("SLURM_STEP_NUM_TASKS", "16");
  set("SLURM_NTASKS", "32");  // the job's, not the step's
  const LauncherRank r = launcher_rank();
  EXPECT_EQ(r.rank, 6);
  EXPECT_EQ(r.world, 16);
  EXPECT_EQ(r.source, "SLURM_PROCID/SLURM_STEP_NUM_TASKS");
}

TEST_F(LauncherEnv, SlurmBatchScriptIsOneProcess) {
  // What an sbatch script itself sees: no step, so not one of SLURM_NTASKS ranks.
  set("SLURM_PROCID", "0");
  set("SLURM_NTASKS", "4");
  const LauncherRank r = launcher_rank();
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.world, 1);
  EXPECT_EQ(r.source, "");
}

TEST_F(LauncherEnv, MpirunInsideASlurmAllocationUsesMpirunsRanks) {
  set("SLURM_PROCID", "0");
  set("SLURM_STEP_NUM_TASKS", "1");
  set("OMPI_COMM_WORLD_RANK", "1");
  set("OMPI_COMM_WORLD_SIZE", "2");
  const LauncherRank r = launcher_rank();
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.world, 2);
}

TEST_F(LauncherEnv, Torchrun) {
  set("RANK", "5");
  set("WORLD_SIZE", "8");
  const LauncherRank r = launcher_rank();
  EXPECT_EQ(r.rank, 5);
  EXPECT_EQ(r.world, 8);
  EXPECT_EQ(r.source, "RANK/WORLD_SIZE");
}

TEST_F(LauncherEnv, TorchrunStartedBySrunUsesTorchrunsRanks) {
  // One torchrun per node under srun: SLURM_PROCID is the node's index, RANK the process's.
  set("SLURM_PROCID", "1");
  set("SLURM_STEP_NUM_TASKS", "2");
  set("RANK", "6");
  set("WORLD_SIZE", "8");
  const LauncherRank r = launcher_rank();
  EXPECT_EQ(r.rank, 6);
  EXPECT_EQ(r.world, 8);
}

TEST_F(LauncherEnv, RankAloneIsNotALauncher) {
  // RANK is a common name; torchrun always sets WORLD_SIZE with it.
  set("RANK", "3");
  LauncherRank r = launcher_rank();
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.world, 1);
  EXPECT_EQ(r.source, "");
  set("OMPI_COMM_WORLD_RANK", "1");
  set("OMPI_COMM_WORLD_SIZE", "2");
  r = launcher_rank();
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.source, "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE");
}

TEST_F(LauncherEnv, TorchrunMalformedWorldSizeNamesTheVariable) {
  set("RANK", "0");
  set("WORLD_SIZE", "many");
  const std::string message = invalid_message();
  EXPECT_NE(message.find("WORLD_SIZE"), std::string::npos) << message;
  EXPECT_NE(message.find("\"many\""), std::string::npos) << message;
}

TEST_F(LauncherEnv, RankWithoutSizeNamesBothVariables) {
  set("OMPI_COMM_WORLD_RANK", "0");
  const std::string message = invalid_message();
  EXPECT_NE(message.find("OMPI_COMM_WORLD_RANK"), std::string::npos) << message;
  EXPECT_NE(message.find("OMPI_COMM_WORLD_SIZE"), std::string::npos) << message;
}

TEST_F(LauncherEnv, MalformedValuesAreRefusedNamingTheVariable) {
  set("PMI_RANK", "one");
  set("PMI_SIZE", "2");
  std::string message = invalid_message();
  EXPECT_NE(message.find("PMI_RANK"), std::string::npos) << message;
  EXPECT_NE(message.find("\"one\""), std::string::npos) << message;

  set("PMI_RANK", "1");
  set("PMI_SIZE", "2x");
  message = invalid_message();
  EXPECT_NE(message.find("PMI_SIZE"), std::string::npos) << message;

  set("PMI_SIZE", "0");
  message = invalid_message();
  EXPECT_NE(message.find("PMI_SIZE"), std::string::npos) << message;

  set("PMI_SIZE", "2");
  set("PMI_RANK", "2");
  message = invalid_message();
  EXPECT_NE(message.find("PMI_RANK"), std::string::npos) << message;
  EXPECT_NE(message.find("[0, 1]"), std::string::npos) << message;

  set("PMI_RANK", "-1");
  message = invalid_message();
  EXPECT_NE(message.find("PMI_RANK"), std::string::npos) << message;
}

TEST_F(LauncherEnv, ShardFromLauncherSetsTheSpec) {
  set("OMPI_COMM_WORLD_RANK", "2");
  set("OMPI_COMM_WORLD_SIZE", "3");
  const Pipeline p = Pipeline::from_folder("unused").shard_from_launcher();
  EXPECT_EQ(p.spec().shard_rank, 2);
  EXPECT_EQ(p.spec().shard_world, 3);

  unsetenv("OMPI_COMM_WORLD_RANK");
  unsetenv("OMPI_COMM_WORLD_SIZE");
  const Pipeline alone = Pipeline::from_folder("unused").shard_from_launcher();
  EXPECT_EQ(alone.spec().shard_rank, 0);
  EXPECT_EQ(alone.spec().shard_world, 1);
}

// Labels of every sample of an epoch of a pipeline sharded from the environment.
std::vector<int> epoch_labels(const std::vector<Item>& items) {
  Loader loader = Pipeline::from_items(items)
                      .shard_from_launcher()
                      .shuffle_files(11)
                      .read()
                      .decode_jpeg()
                      .batch(4)
                      .build({.threads = 1});
  std::vector<int> labels;
  for (Batch& b : loader.epoch(1)) {  // padding (a short rank's repeats) left out
    for (std::int64_t i = 0; i < b.size() - b.padding(); ++i) labels.push_back(b.labels()[static_cast<std::size_t>(i)]);
  }
  return labels;
}

TEST_F(LauncherEnv, ThreeRanksFromTheEnvironmentAreDisjointAndCoverTheEpoch) {
  test::TempDir dir;
  const std::vector<Item> items = test::make_coded_items(dir.path(), 23);
  std::set<int> seen;
  std::size_t total = 0;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string r = std::to_string(rank);
    set("PMI_RANK", r.c_str());
    set("PMI_SIZE", "3");
    const std::vector<int> labels = epoch_labels(items);
    EXPECT_GE(labels.size(), 7u);
    EXPECT_LE(labels.size(), 8u);
    for (const int label : labels) EXPECT_TRUE(seen.insert(label).second) << "label " << label << " on two ranks";
    total += labels.size();
  }
  EXPECT_EQ(total, items.size());
  EXPECT_EQ(seen.size(), items.size());
  EXPECT_EQ(*seen.begin(), 0);
  EXPECT_EQ(*seen.rbegin(), 22);
}

}  // namespace
}  // namespace sluice
