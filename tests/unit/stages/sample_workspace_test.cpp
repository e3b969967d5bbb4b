// SampleProgram::workspace_requirements' coefficient share (stages/program/sample_program.hpp): the
// probed coefficients with their headroom, rounded up to whole 2 MiB from 1 MiB on, so the buffer a
// decoder keeps for them (a huge-page mapping of exactly that share) has no tail of 4 KiB pages.
#include <gtest/gtest.h>

#include <cstdint>

#include "stages/program/sample_program.hpp"

namespace sluice::stages {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

std::uint64_t coefficient_share(std::uint64_t probed) {
  SampleProgramConfig config;
  config.output = {224, 224};
  WorkspaceProbes probes;
  probes.largest_image = 500 * 375 * 3;
  probes.decoder.coefficients = probed;
  return SampleProgram::workspace_requirements(config, probes).decoder.coefficients;
}

TEST(SampleWorkspace, TheCoefficientShareIsWhole2MiBFromOneMiBOn) {
  EXPECT_EQ(coefficient_share(0), 0u);
  EXPECT_EQ(coefficient_share(400'000), 500'000u);  // under 1 MiB: the headroom only
  EXPECT_EQ(coefficient_share(900'000), 2 * kMiB);   // 1,125,000 with the headroom
  EXPECT_EQ(coefficient_share(3'080'000), 4 * kMiB);
  EXPECT_EQ(coefficient_share(3'600'000), 6 * kMiB);  // 4,500,000: never below the headroom
}

}  // namespace
}  // namespace sluice::stages
