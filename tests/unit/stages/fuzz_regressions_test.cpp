// Regression tests for what fuzz/decode_fuzzer found, one per finding, each reduced to
// the smallest input that showed it: the geometry, the header or the bytes embedded here. The
// fuzzer's parameter bytes are spelled out as the pipeline options they stand for, so each test
// reads as the pipeline a user could have written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "sluice/core/error.hpp"
#include "stages/image/geometry.hpp"
#include "stages/image/resample.hpp"
#include "stages/program/sample_program.hpp"
#include "stages/source/source.hpp"
#include "test_support.hpp"

namespace sluice::stages {
namespace {

using Bytes = std::vector<std::uint8_t>;

// Finding 1 (geometry.cpp): random_crop with padding at least the crop's size can place the crop
// entirely in the right or bottom padding. The valid source range then became one pixel past
// the image's edge, the resampler's footprint pointed outside the image, and the sample failed
// with kInvalidArgument ("resample: src must hold the footprint", or the decoder's "region lies
// outside the image") instead of coming out as padding, as torchvision's RandomCrop gives it.
// The fuzzer's input: chain 2 (random_crop 3x3, padding 5, fill 194) on a 707x370 image.
TEST(FuzzRegressions, RandomCropEntirelyInRightPaddingKeepsTheValidRangeInsideTheImage) {
  const std::vector<GeometryStep> steps = {
      GeometryStep{spec::RandomCrop{3, 3, {.padding = 5, .fill = 194}}, 0x5151}};
  const Size2 image{707, 370};
  int right_of_image = 0;
  int below_image = 0;
  for (std::int64_t item = 0; item < 4000; ++item) {
    const SampleGeometry plan = plan_geometry(steps, image, SampleKey{0, item, 0});
    for (const auto& [axis, size] : {std::pair{plan.x, image.width}, std::pair{plan.y, image.height}}) {
      ASSERT_GE(axis.valid_lo, 0) << item;
      ASSERT_LT(axis.valid_lo, axis.valid_hi) << item;
      ASSERT_LE(axis.valid_hi, size) << item;
    }
    right_of_image += plan.x.origin >= image.width ? 1 : 0;
    below_image += plan.y.origin >= image.height ? 1 : 0;
    Resampler resampler;
    resampler.setup(ResampleParams{plan.x, plan.y, 3, plan.filter, plan.antialias, plan.fill});
    const Rect fp = resampler.footprint();
    if (fp.width > 0) {
      ASSERT_GE(fp.x, 0) << item;
      ASSERT_GE(fp.y, 0) << item;
      ASSERT_LE(fp.x + fp.width, image.width) << item;
      ASSERT_LE(fp.y + fp.height, image.height) << item;
    }
    if (plan.x.origin >= image.width || plan.y.origin >= image.height) {
      EXPECT_EQ(fp.width, 0) << item << ": a crop wholly in padding reads no source pixel";
    }
  }
  // The draws did reach the case (3 of 715 positions on x, 3 of 378 on y).
  EXPECT_GT(right_of_image, 0);
  EXPECT_GT(below_image, 0);
}

// The same through the fused program a worker runs, on a decoded JPEG: every sample succeeds,
// and a crop wholly in padding is all fill.
TEST(FuzzRegressions, SampleProgramRandomCropWithLargePaddingNeverFailsOneThread) {
  test::TempDir dir;
  const std::string path = (dir / "img.jpg").string();
  test::write_bytes(path, test::encode_jpeg(test::make_pattern(32, 32, 3, 7), 32, 32, 3));
  constexpr std::uint8_t kFill = 194;
  SampleProgramConfig config;
  config.geometry.push_back(GeometryStep{spec::RandomCrop{4, 4, {.padding = 8, .fill = kFill}}, 0x5151});
  config.normalize = NormalizeOptions{.mean = {}, .std = {}, .layout = Layout::kNHWC, .dtype = DType::kU8};
  config.output = {4, 4};
  const SampleProgram program(config);
  auto ws = program.make_workspace();
  const Dataset one = load_dataset(spec::Items{{Item{path, 0}}});
  Bytes out(program.sample_bytes());
  int all_fill = 0;
  for (std::int64_t item = 0; item < 400; ++item) {
    const SampleKey key{0, item, 0};
    ASSERT_NO_THROW(program.run(one.items, 0, key, *ws, out.data())) << item;
    const SampleGeometry plan = plan_geometry(config.geometry, {32, 32}, key);
    const bool outside = plan.x.origin >= 32 || plan.y.origin >= 32 || plan.x.origin <= -4 || plan.y.origin <= -4;
    if (outside) {
      ++all_fill;
      EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](std::uint8_t v) { return v == kFill; })) << item;
    }
  }
  EXPECT_GT(all_fill, 0);
}

}  // namespace
}  // namespace sluice::stages
