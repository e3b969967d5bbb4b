// The automatic policies (stages/augment/policy.hpp): every op of their tables, signed
// magnitudes included, against torchvision's _apply_op on PIL images (through
// tests/reference/torchvision_color.py); the magnitude tables at their ends; the draws cover every
// op and both signs and stay inside the bins.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "stages/augment/policy.hpp"
#include "reference_script.hpp"
#include "test_support.hpp"

namespace sluice::stages {
namespace {

constexpr int kWidth = 96;
constexpr int kHeight = 72;

struct Case {
  const char* name;  // torchvision's op name
  PolicyOp op;
  double magnitude;
  const char* interpolation;
};

TEST(AugmentPolicyVsTorchvision, EveryOpEqualsApplyOp) {
  SLUICE_REQUIRE_DATASET(folder, "imagenet-photos");
  std::vector<std::string> photos;
  for (const auto& e : std::filesystem::directory_iterator(folder)) photos.push_back(e.path().string());
  std::sort(photos.begin(), photos.end());
  photos.resize(2);
  const Case cases[] = {
      {"Identity", PolicyOp::kIdentity, 0, "nearest"},       {"ShearX", PolicyOp::kShearX, 0.3, "nearest"},
      {"ShearX", PolicyOp::kShearX, -0.62, "bilinear"},      {"ShearY", PolicyOp::kShearY, 0.5, "nearest"},
      {"ShearY", PolicyOp::kShearY, -0.2, "bilinear"},       {"TranslateX", PolicyOp::kTranslateX, 17.6, "nearest"},
      {"TranslateX", PolicyOp::kTranslateX, -9.9, "nearest"}, {"TranslateY", PolicyOp::kTranslateY, -30.2, "nearest"},
      {"Rotate", PolicyOp::kRotate, 27.0, "nearest"},        {"Rotate", PolicyOp::kRotate, -121.5, "bilinear"},
      {"Brightness", PolicyOp::kBrightness, 0.66, "nearest"}, {"Brightness", PolicyOp::kBrightness, -0.5, "nearest"},
      {"Color", PolicyOp::kColor, -0.9, "nearest"},          {"Contrast", PolicyOp::kContrast, 0.363, "nearest"},
      {"Sharpness", PolicyOp::kSharpness, 0.9, "nearest"},   {"Sharpness", PolicyOp::kSharpness, -0.4, "nearest"},
      {"Posterize", PolicyOp::kPosterize, 3, "nearest"},     {"Solarize", PolicyOp::kSolarize, 110.5, "nearest"},
      {"AutoContrast", PolicyOp::kAutoContrast, 0, "nearest"}, {"Equalize", PolicyOp::kEqualize, 0, "nearest"},
      {"Invert", PolicyOp::kInvert, 0, "nearest"},
  };
  const test::TempDir dir;
  std::ostringstream jobs;
  int n = 0;
  for (const std::string& photo : photos) {
    for (const Case& c : cases) {
      jobs << "in=" << photo << " w=" << kWidth << " h=" << kHeight << " mode=RGB raw=" << (dir / ("in" + std::to_string(n))).string()
           << " out=" << (dir / ("out" + std::to_string(n))).string() << " op=policy name=" << c.name
           << " magnitude=" << c.magnitude << " interpolation=" << c.interpolation << "\n";
      ++n;
    }
  }
  const std::string text = jobs.str();
  test::write_bytes(dir / "jobs", std::vector<std::uint8_t>(text.begin(), text.end()));
  const test::ScriptRun run = test::run_reference_script("torchvision_color.py", {(dir / "jobs").string()});
  ASSERT_TRUE(run.started);
  ASSERT_TRUE(run.ok()) << run.output;
  std::vector<std::byte> workspace(policy_workspace_bytes({kWidth, kHeight}, 3));
  n = 0;
  int exact = 0;
  for (std::size_t p = 0; p < photos.size(); ++p) {
    for (const Case& c : cases) {
      std::vector<std::uint8_t> pixels = test::read_bytes(dir / ("in" + std::to_string(n)));
      const std::vector<std::uint8_t> want = test::read_bytes(dir / ("out" + std::to_string(n)));
      ++n;
      const ImageView image{pixels.data(), kWidth, kHeight, 3, kWidth * 3};
      const auto interpolation = std::string(c.interpolation) == "bilinear" ? WarpInterpolation::kBilinear
                                                                             : WarpInterpolation::kNearest;
      apply_policy_step({c.op, c.magnitude}, image, interpolation, {}, workspace);
      ASSERT_EQ(pixels.size(), want.size());
      int worst = 0;
      for (std::size_t k = 0; k < pixels.size(); ++k) worst = std::max(worst, std::abs(pixels[k] - want[k]));
      EXPECT_EQ(worst, 0) << c.name << " " << c.magnitude << " " << c.interpolation << " on " << photos[p];
      exact += worst == 0 ? 1 : 0;
    }
  }
  std::printf("[ vs torchvision ] %d of %d policy op cases byte-exact\n", exact, n);
}

TEST(AugmentPolicy, MagnitudeTablesEndWhereTorchvisionsDo) {
  EXPECT_FLOAT_EQ(trivial_augment_magnitude(PolicyOp::kShearX, 30, 31), 0.99f);
  EXPECT_EQ(trivial_augment_magnitude(PolicyOp::kShearX, 0, 31), 0.0);
  EXPECT_FLOAT_EQ(trivial_augment_magnitude(PolicyOp::kRotate, 30, 31), 135.0f);
  EXPECT_FLOAT_EQ(trivial_augment_magnitude(PolicyOp::kTranslateY, 15, 31), 16.0f);
  EXPECT_EQ(trivial_augment_magnitude(PolicyOp::kPosterize, 0, 31), 8);
  EXPECT_EQ(trivial_augment_magnitude(PolicyOp::kPosterize, 30, 31), 2);
  EXPECT_EQ(trivial_augment_magnitude(PolicyOp::kSolarize, 0, 31), 255);
  EXPECT_EQ(trivial_augment_magnitude(PolicyOp::kSolarize, 30, 31), 0);
  EXPECT_FLOAT_EQ(rand_augment_magnitude(PolicyOp::kTranslateX, 30, 31, {224, 160}), static_cast<float>(150.0 / 331.0 * 224));
  EXPECT_FLOAT_EQ(rand_augment_magnitude(PolicyOp::kTranslateY, 30, 31, {224, 160}), static_cast<float>(150.0 / 331.0 * 160));
  EXPECT_EQ(rand_augment_magnitude(PolicyOp::kPosterize, 9, 10, {8, 8}), 4);  // 8 - round(9 / 2.25)
  EXPECT_FLOAT_EQ(rand_augment_magnitude(PolicyOp::kBrightness, 9, 10, {8, 8}), 0.9f);
}

TEST(AugmentPolicy, DrawsCoverEveryOpAndBothSigns) {
  std::set<int> ops;
  std::set<int> negative;
  for (std::uint64_t i = 0; i < 2000; ++i) {
    CounterRng rng(7, i, 0);
    const PolicyStep s = trivial_augment_wide_step(31, rng);
    ops.insert(static_cast<int>(s.op));
    if (s.magnitude < 0) negative.insert(static_cast<int>(s.op));
    EXPECT_NE(s.op, PolicyOp::kInvert);  // not in TrivialAugmentWide's table
  }
  EXPECT_EQ(ops.size(), 14u);
  EXPECT_EQ(negative.size(), 9u);  // the shears, translations, rotation and the four enhancements
  std::set<int> auto_ops;
  for (std::uint64_t i = 0; i < 2000; ++i) {
    CounterRng rng(8, i, 0);
    for (const PolicyStep& s : auto_augment_steps(AutoAugmentTable::kCifar10, {32, 32}, rng)) auto_ops.insert(static_cast<int>(s.op));
  }
  EXPECT_EQ(auto_ops.size(), 14u);  // the 13 ops of CIFAR-10s table (no ShearX), and identity when an op is not drawn
}

}  // namespace
}  // namespace sluice::stages
