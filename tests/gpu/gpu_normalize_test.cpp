// The GPU normalize kernel against its CPU twin, bit for bit: channels 1, 3 and 4, f32, f16 and
// bf16, NCHW and NHWC, odd image sizes, a batch larger than one grid's 65535 images, a
// 224 x 224 ImageNet batch, and the kernel run as a transfer ring's normalize step. Skips
// without a GPU.
#include <gtest/gtest.h>

#include <vector>

#include "gpu_test_util.hpp"
#include "sluice/detail/device/device_pool.hpp"
#include "sluice/detail/device/gpu_normalize.hpp"
#include "sluice/detail/device/transfer_ring.hpp"

namespace sluice {
namespace {

struct Geometry {
  int batch, height, width;
};

// Runs the kernel on random bytes and compares with the twin; returns false with a message.
::testing::AssertionResult kernel_equals_twin(const GpuNormalizeOptions& options, int channels, Geometry g,
                                              DevicePool& pool, Stream& stream, std::uint64_t seed) {
  GpuNormalizer n;
  n.setup(options, channels);
  const std::size_t in = n.input_bytes(g.batch, g.height, g.width);
  const std::size_t out = n.output_bytes(g.batch, g.height, g.width);
  std::vector<std::uint8_t> src(in);
  test::fill_random(src.data(), in, seed);
  DeviceBuffer d_src(pool, in);
  DeviceBuffer d_dst(pool, out);
  copy_to_device(cuda(0), d_src.data(), src.data(), in);
  n.run(d_src.data(), d_dst.data(), g.batch, g.height, g.width, stream);
  stream.synchronize();
  const std::vector<std::uint8_t> got = test::download(cuda(0), d_dst.data(), out);
  std::vector<std::uint8_t> expected(out);
  n.run_reference(src.data(), expected.data(), g.batch, g.height, g.width);
  for (std::size_t i = 0; i < out; ++i) {
    if (got[i] != expected[i]) {
      return ::testing::AssertionFailure() << "byte " << i << " of " << out << ": kernel " << int(got[i]) << ", twin "
                                           << int(expected[i]) << " (channels " << channels << ", "
                                           << to_string(options.dtype) << ", " << to_string(options.layout) << ", "
                                           << g.batch << "x" << g.height << "x" << g.width << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(GpuNormalize, KernelEqualsCpuTwinForEveryChannelCountDtypeAndLayout) {
  SLUICE_REQUIRE_GPU();
  auto pool = make_caching_pool(cuda(0));
  Stream stream(cuda(0));
  const std::vector<std::pair<std::vector<float>, std::vector<float>>> stats = {
      {{0.485f, 0.456f, 0.406f, 0.5f}, {0.229f, 0.224f, 0.225f, 0.25f}},
      {{}, {}},
      {{0.502f}, {1.0f}},  // f16 subnormals
      {{0.1f, 0.9f, 0.3f, 0.7f}, {3.0f, 0.01f, 1.0f, 0.07f}},
  };
  std::uint64_t seed = 1;
  for (int channels : {1, 3, 4}) {
    for (const auto& [mean4, std4] : stats) {
      std::vector<float> mean = mean4;
      std::vector<float> std = std4;
      if (mean.size() > 1) mean.resize(static_cast<std::size_t>(channels));
      if (std.size() > 1) std.resize(static_cast<std::size_t>(channels));
      for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
        for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
          for (Geometry g : {Geometry{1, 1, 1}, Geometry{3, 17, 23}, Geometry{2, 64, 1000}}) {
            EXPECT_TRUE(kernel_equals_twin({.mean = mean, .std = std, .layout = layout, .dtype = dtype}, channels, g,
                                           *pool, stream, seed++));
          }
        }
      }
    }
  }
}

TEST(GpuNormalize, ImageNetBatchAndMoreImagesThanOneGrid) {
  SLUICE_REQUIRE_GPU();
  auto pool = make_caching_pool(cuda(0));
  Stream stream(cuda(0));
  const GpuNormalizeOptions imagenet{.mean = {0.485f, 0.456f, 0.406f}, .std = {0.229f, 0.224f, 0.225f},
                                     .layout = Layout::kNCHW, .dtype = DType::kF16};
  EXPECT_TRUE(kernel_equals_twin(imagenet, 3, {64, 224, 224}, *pool, stream, 7));
  EXPECT_TRUE(kernel_equals_twin(imagenet, 3, {70'000, 2, 3}, *pool, stream, 8));  // gridDim.y chunks
}

TEST(GpuNormalize, RingNormalizeStepShipsU8AndDeliversTheTwinsValues) {
  SLUICE_REQUIRE_GPU();
  constexpr int kBatch = 16, kH = 224, kW = 224, kC = 3;
  GpuNormalizer n;
  n.setup({.mean = {0.485f, 0.456f, 0.406f}, .std = {0.229f, 0.224f, 0.225f}, .dtype = DType::kBF16}, kC);
  const std::size_t in = n.input_bytes(kBatch, kH, kW);
  const std::size_t out = n.output_bytes(kBatch, kH, kW);
  const std::size_t out_offset = (in + 4095) / 4096 * 4096;
  TransferRing ring({.device = cuda(0), .slots = 3, .host_slot_bytes = in, .device_slot_bytes = out_offset + out});
  Stream consumer(cuda(0));
  const DeviceNormalizeStep step{.normalizer = &n, .src_offset = 0, .dst_offset = out_offset,
                                 .batch = kBatch, .height = kH, .width = kW};
  std::vector<std::uint8_t> expected(out);
  for (int b = 0; b < 6; ++b) {
    const int slot = b % 3;
    ring.begin_fill(slot);
    test::fill_random(ring.host_slot(slot).data(), in, 50 + static_cast<std::uint64_t>(b));
    n.run_reference(ring.host_slot(slot).data(), expected.data(), kBatch, kH, kW);
    ring.submit(slot, in, &step);
    ring.hand_over(slot, consumer);
    std::vector<std::uint8_t> got(out);
    copy_to_host_async(got.data(), static_cast<std::uint8_t*>(ring.device_slot(slot)) + out_offset, out, consumer);
    ring.release(slot, consumer);
    consumer.synchronize();
    ASSERT_EQ(got, expected) << "batch " << b;
  }
  EXPECT_EQ(ring.stats().bytes_copied, 6u * in);  // u8 over the bus: half of bf16's bytes
}

}  // namespace
}  // namespace sluice
