// LoaderState alone: a saved state reads back to the same resume point; a finished epoch resumes
// at the next one's start; the resume point is used once, by its own epoch; states of another
// pipeline (items, batching, seeds), of another size or with any byte damaged are refused with a
// message.
#include <gtest/gtest.h>

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

TEST_F(LoaderStateTest, ASavedPositionReadsBackAndIsUsedOnceByItsEpoch) {
  const auto p = plan();
  LoaderState state(p);
  const auto bytes = state.save(2, 1, 3);  // epoch 2, one of three batches handed out
  const ResumePoint point = state.parse(bytes);
  EXPECT_EQ(point.epoch, 2);
  EXPECT_EQ(point.batch, 1);
  state.set_resume(point);
  EXPECT_EQ(state.resume_epoch(), 2);
  EXPECT_EQ(state.take_first_batch(2), 1);
  EXPECT_EQ(state.take_first_batch(2), 0);  // used up
  EXPECT_EQ(state.resume_epoch(), 0);

  state.set_resume(point);
  EXPECT_EQ(state.take_first_batch(5), 0);  // another epoch started: the point is dropped
  EXPECT_EQ(state.take_first_batch(2), 0);
}

TEST_F(LoaderStateTest, WhileARestoredPointIsPendingSaveGivesThatPoint) {
  const auto p = plan();
  LoaderState state(p);
  const auto restored = state.save(2, 1, 3);
  state.set_resume(state.parse(restored));
  // The consumer's own position (epoch 0, two of three batches) is the abandoned run's.
  EXPECT_EQ(state.save(0, 2, 3), restored);
  EXPECT_EQ(state.take_first_batch(2), 1);
  const ResumePoint now = state.parse(state.save(2, 2, 3));  // the restored epoch started
  EXPECT_EQ(now.epoch, 2);
  EXPECT_EQ(now.batch, 2);
}

TEST_F(LoaderStateTest, AFinishedEpochResumesAtTheNextOnesStartAndNoEpochAtZero) {
  const auto p = plan();
  LoaderState state(p);
  const ResumePoint finished = state.parse(state.save(4, 3, 3));
  EXPECT_EQ(finished.epoch, 5);
  EXPECT_EQ(finished.batch, 0);
  const ResumePoint fresh = state.parse(state.save(-1, 0, 0));
  EXPECT_EQ(fresh.epoch, 0);
  EXPECT_EQ(fresh.batch, 0);
}

TEST_F(LoaderStateTest, StatesOfAnotherPipelineAreRefused) {
  const auto p = plan();
  const auto bytes = LoaderState(p).save(1, 1, 3);
  for (const auto& other : {plan(3), plan(4, 2)}) {
    const LoaderState state(other);
    EXPECT_NE(state.fingerprint(), LoaderState(p).fingerprint());
    EXPECT_NE(refusal(state, bytes).find("different pipeline"), std::string::npos);
  }
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
  EXPECT_NE(refusal(state, longer).find("bytes, got"), std::string::npos);
  EXPECT_NE(refusal(state, {}).find("bytes, got"), std::string::npos);
}

}  // namespace
}  // namespace sluice::runtime
