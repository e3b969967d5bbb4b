// resolve_pipeline's ordering rules come from the stages' descriptors: every stage placed in a phase
// its rule does not allow is refused with the rule's message and its place; in a phase it
// allows, the order is not what is refused; a once-only stage is refused the second time.
#include "stages/program/resolved_pipeline.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pipeline/stage_registry.hpp"
#include "sluice/core/error.hpp"
#include "stage_examples.hpp"

namespace sluice::stages {
namespace {

using schema::Phase;

constexpr Phase kPhases[] = {Phase::kStart,       Phase::kRead,       Phase::kDecoded,
                             Phase::kTransformed, Phase::kNormalized, Phase::kBatched};

const char* name_of(Phase p) {
  switch (p) {
    case Phase::kStart: return "start";
    case Phase::kRead: return "read";
    case Phase::kDecoded: return "decoded";
    case Phase::kTransformed: return "transformed";
    case Phase::kNormalized: return "normalized";
    case Phase::kBatched: return "batched";
  }
  return "?";
}

// Valid stages that leave the chain in phase `p`.
std::vector<spec::Stage> reaching(Phase p) {
  std::vector<spec::Stage> stages;
  if (p == Phase::kStart) return stages;
  stages.emplace_back(spec::Read{});
  if (p == Phase::kRead) return stages;
  stages.emplace_back(spec::DecodeJpeg{});
  if (p == Phase::kTransformed) stages.emplace_back(spec::CenterCrop{8, 8});
  if (p == Phase::kNormalized) stages.emplace_back(spec::Normalize{});
  if (p == Phase::kBatched) stages.emplace_back(spec::Batch{1});
  return stages;
}

// The message resolve_pipeline refuses the chain with, or "" when it plans it.
std::string refusal(std::vector<spec::Stage> stages) {
  PipelineSpec spec;
  spec.stages = std::move(stages);
  try {
    resolve_pipeline(spec, BuildOptions{});
  } catch (const Error& e) {
    return e.cause();
  }
  return "";
}

std::string place(const spec::Stage& s, std::size_t index) {
  return std::string(spec::name_of(s)) + " (stage " + std::to_string(index + 1) + "): ";
}

TEST(ResolvedPipelineOrder, EveryStageOutsideItsPhasesIsRefusedWithItsRule) {
  int refused = 0;
  for (const spec::Stage& s : test::stage_examples()) {
    const schema::StageDescriptor& d = schema::descriptor_of(s);
    for (Phase p : kPhases) {
      std::vector<spec::Stage> chain = reaching(p);
      const std::size_t at = chain.size();
      chain.push_back(s);
      const std::string message = refusal(chain);
      if (d.order.allowed.contains(p)) {
        // Refused maybe (the chain is unfinished, the data set empty), but not for a stage's place.
        EXPECT_EQ(message.find(" (stage "), std::string::npos) << d.name << " after " << name_of(p) << ": " << message;
      } else {
        EXPECT_EQ(message, place(s, at) + d.order.misplaced) << d.name << " after " << name_of(p);
        ++refused;
      }
    }
  }
  EXPECT_GT(refused, 30);  // the rules do refuse: most stages fit only a phase or two
}

TEST(ResolvedPipelineOrder, OnceOnlyStagesAreRefusedTheSecondTime) {
  int once = 0;
  for (const spec::Stage& s : test::stage_examples()) {
    const schema::StageDescriptor& d = schema::descriptor_of(s);
    if (!d.order.once) continue;
    ++once;
    for (Phase p : kPhases) {
      if (!d.order.allowed.contains(p)) continue;
      std::vector<spec::Stage> chain = reaching(p);
      chain.push_back(s);
      chain.push_back(s);
      EXPECT_EQ(refusal(chain), place(s, chain.size() - 1) + "only one " + d.name + "() per pipeline")
          << d.name << " after " << name_of(p);
      break;
    }
  }
  EXPECT_GE(once, 3);  // cache, shuffle, to_device
}

// A stage's checks run after its order, with the same place: the first error is the order's.
TEST(ResolvedPipelineOrder, ChecksFollowTheOrderRule) {
  EXPECT_EQ(refusal({spec::Batch{0}}), "batch (stage 1): batch() needs decoded samples: add read() and "
                                       "decode() before it");
  EXPECT_EQ(refusal({spec::Read{}, spec::DecodeJpeg{}, spec::Batch{0}}),
            "batch (stage 3): batch size must be at least 1, got 0");
  EXPECT_EQ(refusal({spec::Read{}, spec::DecodeJpeg{}, spec::RandomCrop{8, 8, {.padding = -1}}}),
            "random_crop (stage 3): padding must be from 0 to 1048576, got -1");
  // Past the bound: an image's side plus twice the padding would overflow an int.
  EXPECT_EQ(refusal({spec::Read{}, spec::DecodeJpeg{}, spec::RandomCrop{8, 8, {.padding = 2147483647}}}),
            "random_crop (stage 3): padding must be from 0 to 1048576, got 2147483647");
}

}  // namespace
}  // namespace sluice::stages
