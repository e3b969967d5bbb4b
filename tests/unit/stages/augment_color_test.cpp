// The colour kernels (stages/augment/color.hpp) against torchvision on PIL images, their
// reference: brightness, contrast, saturation and hue at factors inside and outside [0, 1], both
// grayscales, ColorJitter's loop for given draws (fn_idx order and factors), on real photos (RGB)
// and on L images. torchvision runs in the system interpreter through
// tests/reference/torchvision_color.py, which also writes the input pixels, so only the op is
// compared. The kernels use Pillow's arithmetic: every byte must be equal.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "stages/augment/color.hpp"
#include "reference_script.hpp"
#include "test_support.hpp"

namespace sluice::stages {
namespace {

constexpr int kWidth = 160;
constexpr int kHeight = 120;

struct Case {
  std::string photo;
  std::string mode;  // RGB or L
  std::string op;
  std::string args;  // factor=... or order=... factors=...
};

struct Outcome {
  std::vector<std::uint8_t> input;
  std::vector<std::uint8_t> want;
};

// Runs every case through the reference script in one interpreter.
std::vector<Outcome> reference(const std::vector<Case>& cases, const test::TempDir& dir, std::string& error) {
  std::ostringstream jobs;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    jobs << "in=" << c.photo << " w=" << kWidth << " h=" << kHeight << " mode=" << c.mode << " raw="
         << (dir / ("in" + std::to_string(i))).string() << " out=" << (dir / ("out" + std::to_string(i))).string()
         << " op=" << c.op << " " << c.args << "\n";
  }
  const std::string text = jobs.str();
  test::write_bytes(dir / "jobs", std::vector<std::uint8_t>(text.begin(), text.end()));
  const test::ScriptRun run = test::run_reference_script("torchvision_color.py", {(dir / "jobs").string()});
  if (!run.started) {
    error = std::string("cannot start ") + SLUICE_SYSTEM_PYTHON;
    return {};
  }
  if (!run.ok()) {
    error = "the torchvision reference failed: " + run.output;
    return {};
  }
  std::vector<Outcome> out;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    out.push_back({test::read_bytes(dir / ("in" + std::to_string(i))), test::read_bytes(dir / ("out" + std::to_string(i)))});
  }
  return out;
}

// The kernel's output for a case, on a copy of its input.
std::vector<std::uint8_t> run_kernel(const Case& c, std::vector<std::uint8_t> pixels) {
  const int channels = c.mode == "RGB" ? 3 : 1;
  ImageView image{pixels.data(), kWidth, kHeight, channels, static_cast<std::ptrdiff_t>(kWidth) * channels};
  const auto factor = [&c] { return std::stod(c.args.substr(c.args.find('=') + 1)); };
  if (c.op == "brightness") adjust_brightness(image, factor());
  if (c.op == "contrast") adjust_contrast(image, factor());
  if (c.op == "saturation") adjust_saturation(image, factor());
  if (c.op == "hue") adjust_hue(image, factor());
  if (c.op == "grayscale3") grayscale(image);
  if (c.op == "grayscale1") {
    const ImageView grey = grayscale_to_one_channel(image);
    pixels.resize(static_cast<std::size_t>(grey.width) * grey.height);
  }
  if (c.op == "jitter") {
    // "order=i,j,k,l factors=b,c,s,h"
    int order[4];
    std::string factors[4];
    std::sscanf(c.args.c_str(), "order=%d,%d,%d,%d", &order[0], &order[1], &order[2], &order[3]);
    std::istringstream list(c.args.substr(c.args.find("factors=") + 8));
    for (std::string& f : factors) std::getline(list, f, ',');
    for (const int op : order) {
      const std::string& f = factors[op];
      if (f == "none") continue;
      const double v = std::stod(f);
      if (op == 0) adjust_brightness(image, v);
      if (op == 1) adjust_contrast(image, v);
      if (op == 2) adjust_saturation(image, v);
      if (op == 3) adjust_hue(image, v);
    }
  }
  return pixels;
}

std::vector<std::string> photos(const std::filesystem::path& folder, std::size_t count) {
  std::vector<std::string> all;
  for (const auto& e : std::filesystem::directory_iterator(folder)) all.push_back(e.path().string());
  std::sort(all.begin(), all.end());
  all.resize(std::min(count, all.size()));
  return all;
}

TEST(AugmentColorVsTorchvision, EveryOpEqualsTorchvisionOnPilImages) {
  SLUICE_REQUIRE_DATASET(folder, "imagenet-photos");
  std::vector<Case> cases;
  for (const std::string& photo : photos(folder, 4)) {
    for (const char* f : {"0.0", "0.35", "1.0", "1.7", "3.2"}) cases.push_back({photo, "RGB", "brightness", "factor=" + std::string(f)});
    for (const char* f : {"0.0", "0.2", "0.9", "1.6"}) cases.push_back({photo, "RGB", "contrast", "factor=" + std::string(f)});
    for (const char* f : {"0.0", "0.5", "1.8"}) cases.push_back({photo, "RGB", "saturation", "factor=" + std::string(f)});
    for (const char* f : {"-0.5", "-0.3", "-0.05", "0.0", "0.02", "0.25", "0.5"}) {
      cases.push_back({photo, "RGB", "hue", "factor=" + std::string(f)});
    }
    cases.push_back({photo, "RGB", "grayscale1", ""});
    cases.push_back({photo, "RGB", "grayscale3", ""});
    cases.push_back({photo, "RGB", "jitter", "order=2,0,3,1 factors=0.7,1.3,1.5,0.1"});
    cases.push_back({photo, "RGB", "jitter", "order=3,1,0,2 factors=1.2,none,0.3,-0.2"});
    cases.push_back({photo, "L", "brightness", "factor=1.4"});
    cases.push_back({photo, "L", "contrast", "factor=0.6"});
    cases.push_back({photo, "L", "saturation", "factor=0.3"});  // unchanged, as torchvision
    cases.push_back({photo, "L", "hue", "factor=0.2"});
  }
  const test::TempDir dir;
  std::string error;
  const std::vector<Outcome> want = reference(cases, dir, error);
  ASSERT_TRUE(error.empty()) << error;
  int exact = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::vector<std::uint8_t> got = run_kernel(cases[i], want[i].input);
    ASSERT_EQ(got.size(), want[i].want.size()) << cases[i].op;
    int worst = 0;
    std::size_t differ = 0;
    for (std::size_t k = 0; k < got.size(); ++k) {
      const int d = std::abs(int{got[k]} - int{want[i].want[k]});
      worst = std::max(worst, d);
      differ += d != 0 ? 1 : 0;
    }
    EXPECT_EQ(worst, 0) << cases[i].op << " " << cases[i].args << " (" << cases[i].mode << ") on " << cases[i].photo
                        << ": " << differ << " of " << got.size() << " bytes differ";
    exact += worst == 0 ? 1 : 0;
  }
  std::printf("[ vs torchvision ] %d of %zu colour cases byte-exact\n", exact, cases.size());
}

// The kernels change what they should: not a test that passes on a copy.
TEST(AugmentColor, OpsChangeThePixelsAndIdentitiesDoNot) {
  std::vector<std::uint8_t> pixels = test::make_pattern(64, 48, 3, 7);
  const std::vector<std::uint8_t> original = pixels;
  ImageView image{pixels.data(), 64, 48, 3, 64 * 3};
  adjust_brightness(image, 1.0);
  adjust_contrast(image, 1.0);
  adjust_saturation(image, 1.0);
  EXPECT_EQ(pixels, original);  // a factor of 1 blends to the image itself
  adjust_hue(image, 0.25);
  EXPECT_NE(pixels, original);
  pixels = original;
  adjust_brightness(image, 0.0);
  EXPECT_TRUE(std::all_of(pixels.begin(), pixels.end(), [](std::uint8_t v) { return v == 0; }));
  pixels = original;
  grayscale(image);
  for (std::size_t i = 0; i < pixels.size(); i += 3) {
    EXPECT_EQ(pixels[i], luma(original[i], original[i + 1], original[i + 2]));
    EXPECT_EQ(pixels[i + 1], pixels[i]);
    EXPECT_EQ(pixels[i + 2], pixels[i]);
  }
}

// Contrast at factor 0 writes the rounded mean luma into every byte, so its output shows the sum
// the vector loop takes over eight pixels a step: every width from 1 to 48 (whole steps and
// every tail), 1 to 3 rows, noise, against the sum of luma() pixel by pixel.
TEST(AugmentColor, ContrastMeanIsTheLumaSumAtEveryWidth) {
  for (int width = 1; width <= 48; ++width) {
    for (int height = 1; height <= 3; ++height) {
      std::mt19937 rng(static_cast<std::uint32_t>(width * 7 + height));
      std::vector<std::uint8_t> pixels(static_cast<std::size_t>(width) * height * 3);
      for (auto& v : pixels) v = static_cast<std::uint8_t>(rng() >> 24);
      std::uint64_t sum = 0;
      for (std::size_t i = 0; i < pixels.size(); i += 3) sum += luma(pixels[i], pixels[i + 1], pixels[i + 2]);
      const int mean = static_cast<int>(static_cast<double>(sum) / (width * height) + 0.5);
      ImageView image{pixels.data(), width, height, 3, width * 3};
      adjust_contrast(image, 0.0);
      ASSERT_TRUE(std::all_of(pixels.begin(), pixels.end(), [mean](std::uint8_t v) { return v == mean; }))
          << width << "x" << height << ": mean luma " << mean << ", got " << int{pixels[0]};
    }
  }
}

}  // namespace
}  // namespace sluice::stages
