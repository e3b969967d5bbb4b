// Geometry planning: torchvision's sizes and offsets, the random ops' parameter ranges, how
// flips compose with crops, which source range the filter may use, and the DCT scale choice.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "sluice/core/error.hpp"
#include "stages/image/geometry.hpp"

namespace sluice::stages {
namespace {

std::vector<GeometryStep> steps(std::initializer_list<GeometryOp> ops) {
  std::vector<GeometryStep> out;
  std::uint64_t key = 100;
  for (const auto& op : ops) out.push_back(GeometryStep{op, key++});
  return out;
}

TEST(Geometry, ResizeShorterThenCenterCropMatchesTorchvision) {
  // torchvision: Resize(256) on 500x375 gives 341x256; CenterCrop(224) starts at
  // round((341-224)/2)=58 (half to even), round((256-224)/2)=16.
  const auto plan = plan_geometry(steps({spec::ResizeShorter{256}, spec::CenterCrop{224, 224}}),
                                  {500, 375}, {});
  EXPECT_EQ(plan.out, (Size2{224, 224}));
  const double sx = 500.0 / 341;
  const double sy = 375.0 / 256;
  EXPECT_DOUBLE_EQ(plan.x.scale, sx);
  EXPECT_DOUBLE_EQ(plan.y.scale, sy);
  EXPECT_DOUBLE_EQ(plan.x.origin, 58 * sx);
  EXPECT_DOUBLE_EQ(plan.y.origin, 16 * sy);
  // Resize then crop: the filter may use the whole image.
  EXPECT_EQ(plan.x.valid_lo, 0);
  EXPECT_EQ(plan.x.valid_hi, 500);
  EXPECT_EQ(plan.y.valid_hi, 375);
  EXPECT_FALSE(plan.flip);
}

TEST(Geometry, ResizeShorterKeepsAspectWithTruncation) {
  EXPECT_EQ(plan_geometry(steps({spec::ResizeShorter{256}}), {375, 500}, {}).out, (Size2{256, 341}));
  EXPECT_EQ(plan_geometry(steps({spec::ResizeShorter{100}}), {333, 333}, {}).out, (Size2{100, 100}));
}

TEST(Geometry, CenterCropLargerThanImagePadsLikeTorchvision) {
  const auto plan = plan_geometry(steps({spec::CenterCrop{40, 40}}), {32, 35}, {});
  EXPECT_EQ(plan.out, (Size2{40, 40}));
  EXPECT_DOUBLE_EQ(plan.x.origin, -4);  // (40 - 32) // 2
  EXPECT_DOUBLE_EQ(plan.y.origin, -2);  // (40 - 35) // 2
  EXPECT_EQ(plan.x.valid_lo, 0);
  EXPECT_EQ(plan.x.valid_hi, 32);
}

TEST(Geometry, CropThenResizeLimitsTheFilterToTheCrop) {
  const auto plan = plan_geometry(steps({spec::CenterCrop{100, 80}, spec::Resize{50, 40}}), {300, 200}, {});
  EXPECT_EQ(plan.x.valid_lo, 100);
  EXPECT_EQ(plan.x.valid_hi, 200);
  EXPECT_EQ(plan.y.valid_lo, 60);
  EXPECT_EQ(plan.y.valid_hi, 140);
  EXPECT_DOUBLE_EQ(plan.x.scale, 2.0);
}

TEST(Geometry, RandomResizedCropStaysInsideWithTorchvisionRanges) {
  const auto chain = steps({spec::RandomResizedCrop{224, 224, {}}});
  int fallbacks = 0;
  for (std::int64_t item = 0; item < 2000; ++item) {
    const auto plan = plan_geometry(chain, {500, 375}, {0, item, 0});
    ASSERT_EQ(plan.out, (Size2{224, 224}));
    const double w = plan.x.valid_hi - plan.x.valid_lo;
    const double h = plan.y.valid_hi - plan.y.valid_lo;
    ASSERT_GE(plan.x.valid_lo, 0);
    ASSERT_LE(plan.x.valid_hi, 500);
    ASSERT_GE(plan.y.valid_lo, 0);
    ASSERT_LE(plan.y.valid_hi, 375);
    EXPECT_DOUBLE_EQ(plan.x.origin, plan.x.valid_lo);
    EXPECT_DOUBLE_EQ(plan.x.scale, w / 224);
    const double area = w * h / (500.0 * 375);
    const double ratio = w / h;
    // Rounding to whole pixels moves area and ratio slightly outside the drawn ranges.
    if (area > 1.0 - 1e-9 || ratio < 0.7 || ratio > 1.4) ++fallbacks;
    EXPECT_GE(area, 0.075);
    EXPECT_LE(area, 1.0);
    EXPECT_GE(ratio, 0.70);
    EXPECT_LE(ratio, 1.40);
  }
  EXPECT_LT(fallbacks, 40);
}

TEST(Geometry, RandomResizedCropFallsBackToTheCentreForExtremeAspect) {
  // 1000x50 can never hold a crop with ratio <= 4/3 of area >= 8%: torchvision's fallback is
  // the centred crop of height 50 and width round(50 * 4/3) = 67.
  const auto plan = plan_geometry(steps({spec::RandomResizedCrop{32, 32, {}}}), {1000, 50}, {0, 1, 0});
  EXPECT_EQ(plan.x.valid_hi - plan.x.valid_lo, 67);
  EXPECT_EQ(plan.x.valid_lo, (1000 - 67) / 2);
  EXPECT_EQ(plan.y.valid_lo, 0);
  EXPECT_EQ(plan.y.valid_hi, 50);
}

TEST(Geometry, RandomCropWithPaddingCoversEveryOffset) {
  const auto chain = steps({spec::RandomCrop{32, 32, {.padding = 4}}});
  std::set<std::pair<int, int>> offsets;
  for (std::int64_t item = 0; item < 3000; ++item) {
    const auto plan = plan_geometry(chain, {32, 32}, {0, item, 0});
    const int x = static_cast<int>(plan.x.origin);
    const int y = static_cast<int>(plan.y.origin);
    ASSERT_GE(x, -4);
    ASSERT_LE(x, 4);
    ASSERT_GE(y, -4);
    ASSERT_LE(y, 4);
    EXPECT_EQ(plan.x.scale, 1.0);
    // A crop before any resize bounds the valid source range to the crop's part of the image.
    EXPECT_EQ(plan.x.valid_lo, std::max(0, x));
    EXPECT_EQ(plan.x.valid_hi, std::min(32, x + 32));
    offsets.insert({x, y});
  }
  EXPECT_EQ(offsets.size(), 81u);
}

TEST(Geometry, RandomCropLargerThanPaddedImageIsAnError) {
  EXPECT_THROW(plan_geometry(steps({spec::RandomCrop{48, 48, {.padding = 4}}}), {32, 32}, {}), Error);
}

TEST(Geometry, SameKeySamePlanOtherEpochOtherPlan) {
  const auto chain = steps({spec::RandomResizedCrop{64, 64, {}}, spec::FlipHorizontal{0.5}});
  int differ = 0;
  for (std::int64_t item = 0; item < 50; ++item) {
    const auto a = plan_geometry(chain, {300, 200}, {3, item, 0});
    const auto b = plan_geometry(chain, {300, 200}, {3, item, 0});
    const auto c = plan_geometry(chain, {300, 200}, {4, item, 0});
    EXPECT_EQ(a.x.origin, b.x.origin);
    EXPECT_EQ(a.flip, b.flip);
    differ += a.x.origin != c.x.origin || a.y.origin != c.y.origin;
  }
  EXPECT_GT(differ, 45);
}

TEST(Geometry, FlipBeforeACropMirrorsTheCrop) {
  // Flip always, then take the left 10 columns of the mirrored image: that is the right 10
  // columns of the source, written mirrored.
  const auto plan = plan_geometry(steps({spec::FlipHorizontal{1.0}, spec::CenterCrop{10, 20}}), {31, 20}, {});
  EXPECT_TRUE(plan.flip);
  // Centre crop of 10 from 31 starts at round(10.5) = 10 in the mirrored image, which is
  // 31 - 10 - 10 = 11 in the source.
  EXPECT_DOUBLE_EQ(plan.x.origin, 11);
  const auto never = plan_geometry(steps({spec::FlipHorizontal{0.0}, spec::CenterCrop{10, 20}}), {31, 20}, {});
  EXPECT_FALSE(never.flip);
  EXPECT_DOUBLE_EQ(never.x.origin, 10);
}

TEST(Geometry, FlipProbabilityIsHonoured) {
  const auto chain = steps({spec::FlipHorizontal{0.3}});
  int flips = 0;
  for (std::int64_t item = 0; item < 10000; ++item) flips += plan_geometry(chain, {8, 8}, {0, item, 0}).flip;
  EXPECT_NEAR(flips, 3000, 200);
}

TEST(Geometry, ChooseDenomNeverGoesBelowOnePixelPerOutput) {
  SampleGeometry plan;
  plan.x.scale = 9.0;
  plan.y.scale = 4.5;
  EXPECT_EQ(choose_denom(plan), 4);
  plan.y.scale = 1.9;
  EXPECT_EQ(choose_denom(plan), 1);
  plan.y.scale = 2.0;
  EXPECT_EQ(choose_denom(plan), 2);
}

TEST(Geometry, ScalePlanDividesCoordinates) {
  const auto plan = plan_geometry(steps({spec::Resize{100, 50}}), {1001, 600}, {});
  const auto scaled = scale_plan(plan, {1001, 600}, 8);
  EXPECT_DOUBLE_EQ(scaled.x.scale, plan.x.scale / 8);
  EXPECT_EQ(scaled.x.valid_hi, 126);  // ceil(1001 / 8)
  EXPECT_EQ(scaled.y.valid_hi, 75);
}

TEST(Geometry, StaticAnalysisFindsImpossibleCrops) {
  EXPECT_TRUE(analyse_geometry(steps({spec::ResizeShorter{100}, spec::CenterCrop{224, 224}})).error);
  EXPECT_TRUE(analyse_geometry(steps({spec::Resize{32, 32}, spec::RandomCrop{48, 48, {.padding = 4}}})).error);
  EXPECT_FALSE(analyse_geometry(steps({spec::Resize{32, 32}, spec::RandomCrop{40, 40, {.padding = 4}}})).error);
  const auto ok = analyse_geometry(steps({spec::ResizeShorter{256}, spec::CenterCrop{224, 200}}));
  EXPECT_FALSE(ok.error);
  EXPECT_EQ(ok.out, (Size2{224, 200}));
  EXPECT_FALSE(analyse_geometry(steps({spec::ResizeShorter{256}})).out);
}

}  // namespace
}  // namespace sluice::stages
