// The eval transform against torchvision (Resize(256) + CenterCrop(224) on PIL images, run by
// Debian's python3-torchvision) on real photographs: sluice's fused pipeline (region decode,
// one resampling straight from the source) must stay within one grey level of it on average.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "sluice/sluice.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

struct Difference {
  double mean_abs = 0;
  int max_abs = 0;
};

std::vector<Item> photos(const std::filesystem::path& dir, int n) {
  std::vector<Item> items;
  for (int i = 0; i < n; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "photo_%04d.jpg", i * 41 % 1000);
    items.push_back(Item{(dir / name).string(), i});
  }
  return items;
}

// Runs torchvision on the items into dir, returns false (with the reason) if it cannot.
bool run_torchvision(const std::vector<Item>& items, const std::filesystem::path& out, std::string& why) {
  std::string cmd = std::string(SLUICE_SYSTEM_PYTHON) + " -c 'import torchvision' 2>/dev/null";
  if (std::system(cmd.c_str()) != 0) {
    why = "python3-torchvision is not installed for /usr/bin/python3 (scripts/setup installs it)";
    return false;
  }
  cmd = std::string(SLUICE_SYSTEM_PYTHON) + " " + SLUICE_SOURCE_DIR + "/tests/reference/torchvision_eval.py " +
        out.string() + " 256 224";
  for (const auto& item : items) cmd += " " + item.path;
  if (std::system(cmd.c_str()) != 0) {
    why = "the torchvision reference script failed";
    return false;
  }
  return true;
}

Difference compare(Loader& loader, const std::filesystem::path& reference) {
  Difference d;
  double sum = 0;
  std::size_t count = 0;
  for (Batch& b : loader.epoch(0)) {
    const std::size_t sample = 224 * 224 * 3;
    const auto* px = static_cast<const std::uint8_t*>(b.data().data);
    for (std::int64_t i = 0; i < b.size(); ++i) {
      const auto expected = test::read_bytes(reference / (std::to_string(b.labels()[static_cast<std::size_t>(i)]) + ".raw"));
      EXPECT_EQ(expected.size(), sample);
      for (std::size_t k = 0; k < sample && k < expected.size(); ++k) {
        const int diff = std::abs(static_cast<int>(px[i * sample + k]) - static_cast<int>(expected[k]));
        sum += diff;
        d.max_abs = std::max(d.max_abs, diff);
        ++count;
      }
    }
  }
  d.mean_abs = sum / static_cast<double>(count);
  return d;
}

Loader eval_loader(const std::vector<Item>& items, DecodeOptions decode) {
  return Pipeline::from_items(items)
      .read()
      .decode_jpeg(decode)
      .resize_shorter(256)
      .center_crop(224)
      .normalize({.mean = {}, .std = {}, .layout = Layout::kNHWC, .dtype = DType::kU8})
      .batch(8)
      .build({.threads = 2});
}

TEST(TorchvisionParity, EvalTransformWithinOneLevelOnWallpaperCrops) {
  SLUICE_REQUIRE_DATASET(dir, "wallpaper-crops");
  const auto items = photos(dir, 24);
  test::TempDir out;
  std::string why;
  ASSERT_TRUE(run_torchvision(items, out.path(), why)) << why;

  // Pillow decodes with libjpeg's accurate IDCT and full-size: the same decode, sluice's region
  // decode included, leaves only the resampling to compare.
  Loader same_decode = eval_loader(items, {.fast_dct = false, .dct_scaling = false});
  const Difference exact = compare(same_decode, out.path());
  std::printf("accurate IDCT, no DCT scaling: mean |diff| %.4f, max %d\n", exact.mean_abs, exact.max_abs);
  EXPECT_LT(exact.mean_abs, 1.0);

  // The defaults (fast IDCT, DCT scaling when the image is at least twice the output) trade a
  // little fidelity for speed; bound it too, so a regression shows.
  Loader fast = eval_loader(items, {});
  const Difference defaults = compare(fast, out.path());
  std::printf("defaults: mean |diff| %.4f, max %d\n", defaults.mean_abs, defaults.max_abs);
  EXPECT_LT(defaults.mean_abs, 2.0);
}

}  // namespace
}  // namespace sluice
