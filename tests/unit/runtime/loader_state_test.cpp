// LoaderState alone: a saved state reads back to the same resume point; a finished epoch resumes
// at the next one's start; the resume point is used once, by its own epoch; split by shards, a
// state keeps one segment per world size the epoch ran at; states of another pipeline (items,
// seeds), another global batch (naming the world sizes that work), an older sluice, another size
// or with any byte damaged are refused with a message.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "pipeline_support.hpp"
#include "runtime/loader_state.hpp"
#include "sluice/sluice.hpp"
#include "stages/program/resolved_pipeline.hpp"
#include "test_support.hpp"

namespace sluice::runtime {
namespace {

using test::TempDir;

class LoaderStateTest : public ::testing::Test {
 protected:
  void SetUp() override { items_ = test::make_coded_items(dir_.path(), 12); }
  stages::ResolvedPipeline plan(int batch = 4, std::uint64_t seed = 1) const {
    return stages::resolve_pipeline(Pipeline::from_items(items_).shuffle_files(5).read().decode_jpeg().batch(batch).spec(),
                                 BuildOptions{.seed = seed});
  }
  static std::string refusal(const LoaderState& state, const std::vector<std::uint8_t>& bytes) {
    try {
      state.parse(bytes);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      return e.what();
    }
    return "";
  }

  TempDir dir_;
  std::vector<Item> items_;
};

// The steps delivered of the epoch a point names, as one segment (split by samples, a state holds
// one: the global steps so far).
std::int64_t steps_of(const ResumePoint& point) {
  EXPECT_LE(point.done.size(), 1u);
  return point.done.empty() ? 0 : point.done.front().steps;
}

TEST_F(LoaderStateTest, ASavedPositionReadsBackAndIsUsedOnceByItsEpoch) {
  const auto p = plan();
  LoaderState state(p);
  const auto bytes = state.save(2, 1, 3);  // epoch 2, one of three batches handed out
  const ResumePoint point = state.parse(bytes);
  EXPECT_EQ(point.epoch, 2);
  EXPECT_EQ(steps_of(point), 1);
  state.set_resume(point);
  EXPECT_EQ(state.resume_epoch(), 2);
  const auto done = state.begin_epoch(2);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].steps, 1);
  EXPECT_TRUE(state.begin_epoch(2).empty());  // used up
  EXPECT_EQ(state.resume_epoch(), 0);

  state.set_resume(point);
  EXPECT_TRUE(state.begin_epoch(5).empty());  // another epoch started: the point is dropped
  EXPECT_TRUE(state.begin_epoch(2).empty());
}

TEST_F(LoaderStateTest, WhileARestoredPointIsPendingSaveGivesThatPoint) {
  const auto p = plan();
  LoaderState state(p);
  const auto restored = state.save(2, 1, 3);
  state.set_resume(state.parse(restored));
  // The consumer's own position (epoch 0, two of three batches) is the abandoned run's.
  EXPECT_EQ(state.save(0, 2, 3), restored);
  EXPECT_EQ(state.begin_epoch(2).size(), 1u);
  const ResumePoint now = state.parse(state.save(2, 2, 3));  // the restored epoch started
  EXPECT_EQ(now.epoch, 2);
  EXPECT_EQ(steps_of(now), 2);
}

TEST_F(LoaderStateTest, AFinishedEpochResumesAtTheNextOnesStartAndNoEpochAtZero) {
  const auto p = plan();
  LoaderState state(p);
  const ResumePoint finished = state.parse(state.save(4, 3, 3));
  EXPECT_EQ(finished.epoch, 5);
  EXPECT_EQ(steps_of(finished), 0);
  const ResumePoint fresh = state.parse(state.save(-1, 0, 0));
  EXPECT_EQ(fresh.epoch, 0);
  EXPECT_EQ(steps_of(fresh), 0);
}

// By shards, a resize keeps one (world, steps) segment per run of the epoch: resumed at 2 ranks
// after 3 steps at 4, then 1 step at 2, the state holds both; the same world continues its own.
TEST_F(LoaderStateTest, ShardsModeKeepsASegmentPerWorldSize) {
  const auto shards_plan = [&](int world) {
    stages::ResolvedPipeline p = plan(12 / world);
    p.order.shard_world = world;
    p.order.split = stages::ShardSplit::kShards;
    return p;
  };
  const auto four = shards_plan(4);
  const auto bytes = LoaderState(four).save(1, 3, 5);
  const auto two = shards_plan(2);
  LoaderState state(two);
  state.set_resume(state.parse(bytes));
  ASSERT_EQ(state.begin_epoch(1).size(), 1u);
  // This run's first batch index is 3 (the steps before it); it handed out one more.
  const ResumePoint after = state.parse(state.save(1, 4, 6));
  ASSERT_EQ(after.done.size(), 2u);
  EXPECT_EQ(after.done[0].world, 4);
  EXPECT_EQ(after.done[0].steps, 3);
  EXPECT_EQ(after.done[1].world, 2);
  EXPECT_EQ(after.done[1].steps, 1);
  LoaderState again(two);
  again.set_resume(again.parse(state.save(1, 4, 6)));
  again.begin_epoch(1);
  const ResumePoint continued = again.parse(again.save(1, 5, 6));  // the same world: one segment grows
  ASSERT_EQ(continued.done.size(), 2u);
  EXPECT_EQ(continued.done[1].steps, 2);
}

TEST_F(LoaderStateTest, AGlobalBatchTheWorldDoesNotSplitIsRefusedWithTheSizesThatDo) {
  const auto p = plan(4);  // one rank: a global batch of 4
  const auto bytes = LoaderState(p).save(0, 1, 3);
  stages::ResolvedPipeline three = plan(4);
  three.order.shard_world = 3;
  EXPECT_NE(refusal(LoaderState(three), bytes).find("does not split over 3 ranks; world sizes that divide it: 1, 2, 4"),
            std::string::npos)
      << refusal(LoaderState(three), bytes);
  stages::ResolvedPipeline two = plan(4);
  two.order.shard_world = 2;
  EXPECT_NE(refusal(LoaderState(two), bytes).find("use batch(2)"), std::string::npos);
  two.batch_size = 2;
  EXPECT_EQ(LoaderState(two).parse(bytes).epoch, 0);
}

TEST_F(LoaderStateTest, AnOlderSluicesStateIsRefusedSayingWhatToDo) {
  const auto p = plan();
  std::vector<std::uint8_t> v1(40, 0);  // version 1: magic, version, fingerprint, epoch, batch, check
  const std::uint32_t head[2] = {0x54534c53, 1};
  std::memcpy(v1.data(), head, sizeof head);
  EXPECT_NE(refusal(LoaderState(p), v1).find("version 1"), std::string::npos);
  EXPECT_NE(refusal(LoaderState(p), v1).find("start the saved epoch again"), std::string::npos);
}

TEST_F(LoaderStateTest, StatesOfAnotherPipelineAreRefused) {
  const auto p = plan();
  const auto bytes = LoaderState(p).save(1, 1, 3);
  const auto seed_plan = plan(4, 2);  // a LoaderState refers to its plan: keep it alive
  const LoaderState other_seed(seed_plan);
  EXPECT_NE(other_seed.fingerprint(), LoaderState(p).fingerprint());
  EXPECT_NE(refusal(other_seed, bytes).find("different pipeline"), std::string::npos);
  const auto batch_plan = plan(3);
  EXPECT_NE(refusal(LoaderState(batch_plan), bytes).find("global batch"), std::string::npos);
  std::vector<Item> fewer(items_.begin(), items_.end() - 1);
  const auto less = stages::resolve_pipeline(
      Pipeline::from_items(fewer).shuffle_files(5).read().decode_jpeg().batch(4).spec(), BuildOptions{.seed = 1});
  EXPECT_NE(refusal(LoaderState(less), bytes).find("different pipeline"), std::string::npos);
}

TEST_F(LoaderStateTest, DamagedOrMisSizedBytesAreRefused) {
  const auto p = plan();
  const LoaderState state(p);
  const auto bytes = state.save(1, 2, 3);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    auto damaged = bytes;
    damaged[i] ^= 0x10;
    EXPECT_FALSE(refusal(state, damaged).empty()) << "byte " << i;
  }
  auto longer = bytes;
  longer.push_back(0);
  EXPECT_NE(refusal(state, longer).find("damaged"), std::string::npos);
  EXPECT_NE(refusal(state, {}).find("bytes, got 0"), std::string::npos);
}

}  // namespace
}  // namespace sluice::runtime
