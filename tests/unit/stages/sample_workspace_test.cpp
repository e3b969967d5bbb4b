// A worker's workspace (stages/program/sample_program.hpp): the coefficient share
// workspace_requirements gives (the probed coefficients with their headroom, rounded up to whole
// 2 MiB from 1 MiB on, so the buffer a decoder keeps for them, a huge-page mapping of exactly that
// share, has no tail of 4 KiB pages), and make_workspace's buffers faulted in when it is made (in
// set-up), not by the first epoch's samples.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>

#include "resident_pages.hpp"
#include "sluice/memory/budget.hpp"
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

// The process's resident bytes (/proc/self/statm).
std::uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

// make_workspace leaves its buffers resident: the read, decode and resample buffers at their
// shares, the decoder's coefficient buffer at its share (a mapping of its own: the process's
// resident memory grows by it), and for a program that decodes crops (so splices files at their
// resume points) the splice buffer's first 2 MiB, taken from free budget as the first splice would
// take them, and not taken where the budget has no 2 MiB free or the program never splices.
TEST(SampleWorkspace, MakeWorkspaceFaultsItsBuffersIn) {
  WorkspaceProbes probes;
  probes.largest_file = 1'500'000;
  probes.largest_image = 1000 * 750 * 3;
  probes.decoder.coefficients = 3'000'000;
  for (const bool crops : {true, false}) {
    SampleProgramConfig config;
    config.output = {224, 224};
    if (crops) {
      config.geometry = {{spec::ResizeShorter{256, {}}, 1}, {spec::CenterCrop{224, 224}, 2}};
    } else {
      config.geometry = {{spec::Resize{224, 224, {}}, 1}};
    }
    const SampleProgram program(config);
    ASSERT_EQ(SampleProgram::keeps_resume_points(config), crops);
    const WorkspaceShare share = SampleProgram::workspace_requirements(config, probes);
    ASSERT_EQ(share.decoder.coefficients, 4 * kMiB);
    const std::uint64_t splice = crops ? 2 * kMiB : 0;

    MemoryBudget budget(256 * kMiB);
    const std::uint64_t before = resident_bytes();
    const auto ws = program.make_workspace(budget, share);
    const std::uint64_t grew = resident_bytes() - before;
    for (const AlignedBuffer* b : {&ws->file, &ws->decoded, &ws->resized, &ws->scratch}) {
      ASSERT_GT(b->capacity(), 0u);
      EXPECT_EQ(test::nonresident_pages(b->data(), b->capacity()), 0)
          << "buffer " << b - &ws->file << " of " << test::whole_pages(b->data(), b->capacity()) << " pages";
    }
    EXPECT_GE(grew, share.decoder.coefficients) << "crops " << crops;
    EXPECT_EQ(budget.used(), share.total() + splice) << "crops " << crops;

    // No 2 MiB free beside the share: no splice buffer yet (the first splice takes what it needs).
    MemoryBudget tight(share.total() + kMiB);
    const auto tight_ws = program.make_workspace(tight, share);
    EXPECT_EQ(tight.used(), share.total()) << "crops " << crops;
  }
}

// Only the start of each buffer is faulted in: a share sized for one very large probed image (a
// 128 MiB decoded buffer, 60 MiB of coefficients) leaves set-up with a few MiB resident per buffer,
// not the whole share.
TEST(SampleWorkspace, MakeWorkspaceFaultsInOnlyTheStartOfALargeShare) {
  WorkspaceProbes probes;
  probes.largest_file = 1'500'000;
  probes.largest_image = 6000 * 4000 * 3;
  probes.decoder.coefficients = 50'000'000;
  SampleProgramConfig config;
  config.output = {224, 224};
  config.geometry = {{spec::ResizeShorter{256, {}}, 1}, {spec::CenterCrop{224, 224}, 2}};
  const SampleProgram program(config);
  const WorkspaceShare share = SampleProgram::workspace_requirements(config, probes);
  ASSERT_GE(share.decoded, 64 * kMiB);
  ASSERT_GE(share.decoder.coefficients, 60 * kMiB);
  MemoryBudget budget(1024 * kMiB);
  const std::uint64_t before = resident_bytes();
  const auto ws = program.make_workspace(budget, share);
  const std::uint64_t grew = resident_bytes() - before;
  EXPECT_LT(grew, 32 * kMiB) << "of a share of " << share.total();
  EXPECT_EQ(test::nonresident_pages(ws->decoded.data(), 4 * kMiB), 0);
  EXPECT_EQ(budget.used(), share.total() + 2 * kMiB);  // the shares are held whole all the same
}

}  // namespace
}  // namespace sluice::stages
