// Normalize: values equal torchvision's (x / 255 - mean) / std in f32, f16 and bf16 are that
// value rounded once, layouts and flips put every element where it belongs, bad options fail.
#include <gtest/gtest.h>

#include <cstring>
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
            NormalizeKernel scalar;
            scalar.setup(options, channels);
            scalar.use_scalar_kernels();
            const std::size_t bytes = fast.sample_bytes({w, 3});
            std::vector<std::uint8_t> a(bytes + 4), b(bytes + 4);
            fast.run(img.view(), flip, a.data() + 4);  // +4: not 32-byte aligned
            scalar.run(img.view(), flip, b.data() + 4);
            ASSERT_EQ(a, b) << "w " << w << " c " << channels << " dtype " << to_string(t) << " flip " << flip;
          }
        }
      }
    }
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
