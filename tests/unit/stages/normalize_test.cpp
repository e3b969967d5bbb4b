// Normalize: values equal torchvision's (x / 255 - mean) / std in f32, f16 and bf16 are that
// value rounded once, layouts and flips put every element where it belongs, bad options fail.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/detail/core/half.hpp"
#include "stages/image/normalize.hpp"

namespace sluice::stages {
namespace {

struct Image {
  std::vector<std::uint8_t> pixels;
  int w, h, c;
  ConstImageView view() const { return {pixels.data(), w, h, c, static_cast<std::ptrdiff_t>(w * c)}; }
  std::uint8_t at(int x, int y, int ch) const { return pixels[static_cast<std::size_t>((y * w + x) * c + ch)]; }
};

Image make_image(int w, int h, int c) {
  Image img{std::vector<std::uint8_t>(static_cast<std::size_t>(w * h * c)), w, h, c};
  for (std::size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = static_cast<std::uint8_t>(i * 37 + 11);
  return img;
}

const NormalizeOptions kImageNet{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}, Layout::kNCHW, DType::kF32};

float reference(std::uint8_t v, int c) {
  return (static_cast<float>(v) / 255.0f - kImageNet.mean[static_cast<std::size_t>(c)]) /
         kImageNet.std[static_cast<std::size_t>(c)];
}

TEST(Normalize, F32ChwEqualsTorchvisionFormulaExactly) {
  const Image img = make_image(7, 5, 3);
  NormalizeKernel k;
  k.setup(kImageNet, 3);
  std::vector<float> out(7 * 5 * 3);
  k.run(img.view(), false, out.data());
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 5; ++y)
      for (int x = 0; x < 7; ++x) ASSERT_EQ(out[static_cast<std::size_t>((c * 5 + y) * 7 + x)], reference(img.at(x, y, c), c));
}

TEST(Normalize, HwcWithFlipMirrorsColumns) {
  const Image img = make_image(6, 4, 3);
  NormalizeKernel k;
  auto options = kImageNet;
  options.layout = Layout::kNHWC;
  k.setup(options, 3);
  std::vector<float> out(6 * 4 * 3);
  k.run(img.view(), true, out.data());
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 6; ++x)
      for (int c = 0; c < 3; ++c)
        ASSERT_EQ(out[static_cast<std::size_t>((y * 6 + x) * 3 + c)], reference(img.at(5 - x, y, c), c));
}

TEST(Normalize, ChwWithFlip) {
  const Image img = make_image(5, 3, 3);
  NormalizeKernel k;
  k.setup(kImageNet, 3);
  std::vector<float> out(5 * 3 * 3);
  k.run(img.view(), true, out.data());
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 3; ++y)
      for (int x = 0; x < 5; ++x)
        ASSERT_EQ(out[static_cast<std::size_t>((c * 3 + y) * 5 + x)], reference(img.at(4 - x, y, c), c));
}

TEST(Normalize, HalfTypesAreTheF32ValueRoundedOnce) {
  const Image img = make_image(16, 16, 3);
  for (DType t : {DType::kF16, DType::kBF16}) {
    NormalizeKernel k;
    auto options = kImageNet;
    options.dtype = t;
    k.setup(options, 3);
    EXPECT_EQ(k.sample_bytes({16, 16}), 16u * 16 * 3 * 2);
    std::vector<std::uint16_t> out(16 * 16 * 3);
    k.run(img.view(), false, out.data());
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 16; ++y)
        for (int x = 0; x < 16; ++x) {
          const float f = reference(img.at(x, y, c), c);
          const std::uint16_t expect = t == DType::kF16 ? float_to_f16(f) : float_to_bf16(f);
          ASSERT_EQ(out[static_cast<std::size_t>((c * 16 + y) * 16 + x)], expect);
        }
  }
}

TEST(Normalize, NoStatsMeansScaleToUnitRangeOrRawBytes) {
  const Image img = make_image(4, 4, 1);
  NormalizeKernel f;
  f.setup({{}, {}, Layout::kNCHW, DType::kF32}, 1);
  std::vector<float> out(16);
  f.run(img.view(), false, out.data());
  for (int i = 0; i < 16; ++i) EXPECT_EQ(out[static_cast<std::size_t>(i)], img.pixels[static_cast<std::size_t>(i)] / 255.0f);

  NormalizeKernel u;
  u.setup({{}, {}, Layout::kNHWC, DType::kU8}, 1);
  EXPECT_TRUE(u.is_identity());
  std::vector<std::uint8_t> bytes(16);
  u.run(img.view(), false, bytes.data());
  EXPECT_EQ(bytes, img.pixels);
}

TEST(Normalize, U8ChwTransposes) {
  const Image img = make_image(3, 2, 3);
  NormalizeKernel u;
  u.setup({{}, {}, Layout::kNCHW, DType::kU8}, 3);
  EXPECT_FALSE(u.is_identity());
  std::vector<std::uint8_t> out(18);
  u.run(img.view(), false, out.data());
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 2; ++y)
      for (int x = 0; x < 3; ++x) ASSERT_EQ(out[static_cast<std::size_t>((c * 2 + y) * 3 + x)], img.at(x, y, c));
}

TEST(Normalize, VectorKernelsEqualScalarKernelsBitForBit) {
  if (normalize_detail::avx2_kernels() == nullptr) GTEST_SKIP() << "no AVX2/F16C on this CPU";
  // Widths around the chunk (256 px) and vector (8) boundaries, an unaligned destination, every
  // dtype, layout, channel count and flip.
  for (int w : {1, 7, 23, 224, 255, 257, 300}) {
    for (int channels : {1, 3, 4}) {
      const Image img = make_image(w, 3, channels);
      for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
        for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
          for (bool flip : {false, true}) {
            NormalizeOptions options{std::vector<float>(static_cast<std::size_t>(channels), 0.45f),
                                     std::vector<float>(static_cast<std::size_t>(channels), 0.226f), layout, t};
            options.mean[0] = 0.485f;
            options.std[0] = 0.229f;
            NormalizeKernel fast;
            fast.setup(options, channels);
            ASSERT_TRUE(fast.divides_by_fma());
            NormalizeKernel table;  // the vector kernels' gather from the table
            table.setup(options, channels);
            table.use_table_lookup();
            NormalizeKernel scalar;
            scalar.setup(options, channels);
            scalar.use_scalar_kernels();
            const std::size_t bytes = fast.sample_bytes({w, 3});
            std::vector<std::uint8_t> a(bytes + 4), b(bytes + 4), g(bytes + 4);
            fast.run(img.view(), flip, a.data() + 4);  // +4: not 32-byte aligned
            table.run(img.view(), flip, g.data() + 4);
            scalar.run(img.view(), flip, b.data() + 4);
            ASSERT_EQ(a, b) << "w " << w << " c " << channels << " dtype " << to_string(t) << " flip " << flip;
            ASSERT_EQ(g, b) << "table; w " << w << " c " << channels << " dtype " << to_string(t) << " flip " << flip;
          }
        }
      }
    }
  }
}

// The vector kernels divide by multiplying with the reciprocal and correcting once with an FMA;
// setup keeps that only where it equals the division for all 256 byte values. Here: the largest
// difference from torchvision's (x / 255 - mean) / std is 0 ulp for no statistics and for 2,000
// random ones (ImageNet's: the setup checks below); the one-FMA form fma(x, 1/(255 std),
// -mean/std), which the kernels do not use, differs on ImageNet's by up to 116 ulp (blue, byte
// 103; docs/decisions/normalize-fma.md).
TEST(Normalize, FmaDivisionsEqualTorchvisionFormulaForEveryByte) {
  const auto ulps = [](float a, float b) {
    std::int32_t ia, ib;
    std::memcpy(&ia, &a, 4);
    std::memcpy(&ib, &b, 4);
    if (ia < 0) ia = std::numeric_limits<std::int32_t>::min() - ia;  // order negative floats
    if (ib < 0) ib = std::numeric_limits<std::int32_t>::min() - ib;
    return std::abs(static_cast<std::int64_t>(ia) - ib);
  };
  std::mt19937 rng(29);
  std::uniform_real_distribution<float> mean_of(-2.0f, 2.0f), std_of(0.001f, 10.0f);
  std::int64_t worst_fma = 0, worst_one_fma = 0;
  for (int set = 0; set < 2001; ++set) {
    const float mean = set == 0 ? 0.0f : mean_of(rng), sd = set == 0 ? 1.0f : std_of(rng);
    const float rstd = 1.0f / sd;
    for (int v = 0; v < 256; ++v) {
      const float exact = (static_cast<float>(v) / 255.0f - mean) / sd;
      const float by_fma = normalize_detail::affine_by_fma(static_cast<std::uint8_t>(v), mean, sd, rstd);
      worst_fma = std::max(worst_fma, ulps(exact, by_fma));
    }
  }
  for (int c = 0; c < 3; ++c) {
    const float mean = kImageNet.mean[static_cast<std::size_t>(c)], sd = kImageNet.std[static_cast<std::size_t>(c)];
    for (int v = 0; v < 256; ++v) {
      const float one_fma = std::fma(static_cast<float>(v), 1.0f / (255.0f * sd), -mean / sd);
      worst_one_fma = std::max(worst_one_fma, ulps(reference(static_cast<std::uint8_t>(v), c), one_fma));
    }
  }
  EXPECT_EQ(worst_fma, 0);
  EXPECT_EQ(worst_one_fma, 116);
  for (int channels : {1, 3}) {
    NormalizeKernel k;
    k.setup(kImageNet, 3);
    EXPECT_TRUE(k.divides_by_fma());
    k.setup({{}, {}, Layout::kNCHW, DType::kF32}, channels);
    EXPECT_TRUE(k.divides_by_fma());
  }
}

TEST(Normalize, BadOptionsSayWhatToChange) {
  NormalizeKernel k;
  EXPECT_THROW(k.setup({{0.5f, 0.5f}, {0.5f, 0.5f}, Layout::kNCHW, DType::kF32}, 3), Error);
  EXPECT_THROW(k.setup({{0.5f}, {0.0f}, Layout::kNCHW, DType::kF32}, 1), Error);
  EXPECT_THROW(k.setup({{0.5f}, {0.5f}, Layout::kNCHW, DType::kI32}, 1), Error);
  try {
    k.setup({{0.5f}, {0.5f}, Layout::kNCHW, DType::kU8}, 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("u8"), std::string::npos);
  }
  EXPECT_NO_THROW(k.setup({{0.5f}, {0.25f}, Layout::kNCHW, DType::kF32}, 3));  // one value for all
}

}  // namespace
}  // namespace sluice::stages
