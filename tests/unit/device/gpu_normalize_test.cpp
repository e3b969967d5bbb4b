// The CPU twin of the GPU normalize kernel: every byte value of every channel, in every layout
// and dtype, against the straightforward formula written out here; f16 and bf16 checked to be
// the nearest representable value (ties to even) independently of sluice's converters; and the
// whole output against the pipeline's own normalize (src/stages), which the twin must equal bit
// for bit. The GPU kernel is then held to this twin by tests/gpu/gpu_normalize_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/detail/core/half.hpp"
#include "sluice/detail/device/gpu_normalize.hpp"
#include "stages/image/normalize.hpp"

namespace sluice {
namespace {

struct Case {
  std::vector<float> mean;
  std::vector<float> std;
};

const Case kCases[] = {
    {{0.485f, 0.456f, 0.406f, 0.5f}, {0.229f, 0.224f, 0.225f, 0.25f}},  // ImageNet (+ a 4th)
    {{}, {}},                                                          // x / 255
    {{0.5f}, {0.5f}},                                                  // one for all
    {{0.502f}, {1.0f}},  // values near 0: f16 subnormals around x = 128
    {{0.1f, 0.9f, 0.3f, 0.7f}, {3.0f, 0.01f, 1.0f, 0.07f}},  // wide range: f16 near its limits
};

// Every byte value in every channel: image (batch 2, 16 x 16), pixel p of image n has channel c
// = (p * 7 + c * 85 + n * 3) % 256, so each channel sees all 256 values.
std::vector<std::uint8_t> all_values(int batch, int h, int w, int channels) {
  std::vector<std::uint8_t> v(static_cast<std::size_t>(batch * h * w * channels));
  for (int n = 0; n < batch; ++n)
    for (int p = 0; p < h * w; ++p)
      for (int c = 0; c < channels; ++c)
        v[static_cast<std::size_t>((n * h * w + p) * channels + c)] = static_cast<std::uint8_t>((p * 7 + c * 85 + n * 3) % 256);
  return v;
}

float formula(std::uint8_t x, const Case& k, int c) {
  const float mean = k.mean.empty() ? 0.0f : k.mean[k.mean.size() == 1 ? 0 : static_cast<std::size_t>(c)];
  const float std = k.std.empty() ? 1.0f : k.std[k.std.size() == 1 ? 0 : static_cast<std::size_t>(c)];
  return (static_cast<float>(x) / 255.0f - mean) / std;
}

// True when `bits` decodes to the value nearest `v` of its format, ties to an even mantissa.
bool is_nearest(float v, std::uint16_t bits, float (*decode)(std::uint16_t)) {
  const double d = decode(bits);
  const double err = std::fabs(static_cast<double>(v) - d);
  for (int step : {-1, 1}) {
    const auto neighbour = static_cast<std::uint16_t>(bits + step);
    const double dn = decode(neighbour);
    if (std::isnan(dn) || std::signbit(dn) != std::signbit(d)) continue;
    const double en = std::fabs(static_cast<double>(v) - dn);
    if (en < err || (en == err && (bits & 1u))) return false;
  }
  return true;
}

Case channels_of(const Case& k, int channels) {
  Case out = k;
  if (out.mean.size() > 1) out.mean.resize(static_cast<std::size_t>(channels));
  if (out.std.size() > 1) out.std.resize(static_cast<std::size_t>(channels));
  return out;
}

TEST(GpuNormalizeTwin, EqualsTheFormulaForEveryValueLayoutAndDtype) {
  constexpr int kBatch = 2, kH = 16, kW = 16;
  for (int channels : {1, 3, 4}) {
    const std::vector<std::uint8_t> src = all_values(kBatch, kH, kW, channels);
    for (const Case& base : kCases) {
      const Case k = channels_of(base, channels);
      for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
        for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
          GpuNormalizer n;
          n.setup({.mean = k.mean, .std = k.std, .layout = layout, .dtype = dtype}, channels);
          std::vector<std::uint8_t> out(n.output_bytes(kBatch, kH, kW));
          n.run_reference(src.data(), out.data(), kBatch, kH, kW);
          const std::size_t pixels = kH * kW;
          for (std::size_t b = 0; b < kBatch; ++b) {
            for (std::size_t p = 0; p < pixels; ++p) {
              for (int c = 0; c < channels; ++c) {
                const std::uint8_t x = src[(b * pixels + p) * channels + c];
                const std::size_t at = layout == Layout::kNCHW ? (b * channels + c) * pixels + p : (b * pixels + p) * channels + c;
                const float v = formula(x, k, c);
                if (dtype == DType::kF32) {
                  float got;
                  std::memcpy(&got, out.data() + at * 4, 4);
                  ASSERT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(v));
                } else {
                  std::uint16_t got;
                  std::memcpy(&got, out.data() + at * 2, 2);
                  const bool f16 = dtype == DType::kF16;
                  ASSERT_EQ(got, f16 ? float_to_f16(v) : float_to_bf16(v)) << "x " << int(x) << " c " << c;
                  ASSERT_TRUE(is_nearest(v, got, f16 ? f16_to_float : bf16_to_float)) << v;
#ifdef __FLT16_MAX__
                  if (f16) {
                    ASSERT_EQ(got, std::bit_cast<std::uint16_t>(static_cast<_Float16>(v))) << v;
                  }
#endif
                }
              }
            }
          }
        }
      }
    }
  }
}

// The pipeline's CPU normalize (stages::NormalizeKernel, with its AVX2 row kernels where the CPU
// has them) on each image of the batch gives the same bytes as the twin on the whole batch.
TEST(GpuNormalizeTwin, EqualsThePipelinesCpuNormalizeBitForBit) {
  constexpr int kBatch = 3, kH = 9, kW = 300;  // wider than the pipeline's 256-pixel chunks
  for (int channels : {1, 3}) {
    const std::vector<std::uint8_t> src = all_values(kBatch, kH, kW, channels);
    for (const Case& base : kCases) {
      const Case k = channels_of(base, channels);
      for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
        for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
          GpuNormalizer twin;
          twin.setup({.mean = k.mean, .std = k.std, .layout = layout, .dtype = dtype}, channels);
          std::vector<std::uint8_t> expected(twin.output_bytes(kBatch, kH, kW));
          twin.run_reference(src.data(), expected.data(), kBatch, kH, kW);

          stages::NormalizeKernel pipeline;
          pipeline.setup({.mean = k.mean, .std = k.std, .layout = layout, .dtype = dtype}, channels);
          const std::size_t sample = pipeline.sample_bytes({kW, kH});
          ASSERT_EQ(sample * kBatch, expected.size());
          std::vector<std::uint8_t> got(expected.size());
          for (int b = 0; b < kBatch; ++b) {
            const ConstImageView image(src.data() + static_cast<std::size_t>(b) * kH * kW * channels, kW, kH, channels,
                                       static_cast<std::ptrdiff_t>(kW) * channels);
            pipeline.run(image, /*flip=*/false, got.data() + b * sample);
          }
          ASSERT_EQ(got, expected) << "channels " << channels << " dtype " << to_string(dtype) << " layout "
                                   << to_string(layout);
        }
      }
    }
  }
}

TEST(GpuNormalizeTwin, RunOnAHostStreamIsTheTwin) {
  GpuNormalizer n;
  n.setup({.mean = {0.5f}, .std = {0.25f}, .layout = Layout::kNCHW, .dtype = DType::kBF16}, 3);
  const std::vector<std::uint8_t> src = all_values(2, 4, 5, 3);
  std::vector<std::uint8_t> a(n.output_bytes(2, 4, 5));
  std::vector<std::uint8_t> b(a.size());
  n.run_reference(src.data(), a.data(), 2, 4, 5);
  Stream host_stream;
  n.run(src.data(), b.data(), 2, 4, 5, host_stream);
  EXPECT_EQ(a, b);
}

TEST(GpuNormalizeTwin, SizesAndAccessors) {
  GpuNormalizer n;
  n.setup({.mean = {0.1f, 0.2f, 0.3f}, .std = {1, 2, 3}, .layout = Layout::kNHWC, .dtype = DType::kF16}, 3);
  EXPECT_EQ(n.input_bytes(4, 10, 20), 4u * 10 * 20 * 3);
  EXPECT_EQ(n.output_bytes(4, 10, 20), 4u * 10 * 20 * 3 * 2);  // the bytes the bus no longer carries
  EXPECT_EQ(n.channels(), 3);
  EXPECT_EQ(n.layout(), Layout::kNHWC);
  EXPECT_EQ(n.dtype(), DType::kF16);
  EXPECT_EQ(n.mean(2), 0.3f);
  EXPECT_EQ(n.std(1), 2.0f);
  std::vector<std::uint8_t> none;
  n.run_reference(none.data(), none.data(), 0, 10, 20);  // an empty batch writes nothing
}

TEST(GpuNormalizeTwin, BadOptionsNameWhatToChange) {
  const auto message = [](const GpuNormalizeOptions& o, int channels) -> std::string {
    try {
      GpuNormalizer n;
      n.setup(o, channels);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message({}, 0).find("channel count"), std::string::npos);
  EXPECT_NE(message({}, 5).find("channel count"), std::string::npos);
  EXPECT_NE(message({.mean = {0.1f, 0.2f}}, 3).find("one value per channel"), std::string::npos);
  EXPECT_NE(message({.std = {0.0f}}, 3).find("std must be > 0"), std::string::npos);
  EXPECT_NE(message({.dtype = DType::kU8}, 3).find("f32, f16 or bf16"), std::string::npos);
  EXPECT_NE(message({.dtype = DType::kI32}, 3).find("f32, f16 or bf16"), std::string::npos);
  GpuNormalizer unset;
  Stream s;
  std::uint8_t byte = 0;
  EXPECT_THROW(unset.run(&byte, &byte, 1, 1, 1, s), Error);
  EXPECT_THROW(unset.run_reference(&byte, &byte, 1, 1, 1), Error);
  GpuNormalizer n;
  n.setup({}, 1);
  EXPECT_THROW((void)n.output_bytes(-1, 2, 2), Error);
}

}  // namespace
}  // namespace sluice
