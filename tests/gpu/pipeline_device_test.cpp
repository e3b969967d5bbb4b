// The pipeline's to_device(cuda(0)) on a real GPU: device batches, copied back, equal the host
// pipeline's batches bit for bit (with and without normalize_on_device), labels included, in
// order, over more batches than the ring has slots. Skips without a usable device.
#include <gtest/gtest.h>

#include <vector>

#include "pipeline_support.hpp"
#include "sluice/device/copy.hpp"
#include "sluice/device/device.hpp"
#include "sluice/device/stream.hpp"
#include "sluice/sluice.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

TEST(GpuPipeline, DeviceBatchesEqualHostBatchesBitForBit) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no usable CUDA device: " << cuda_unavailable_reason();
  test::TempDir dir;
  const auto items = test::make_coded_items(dir.path(), 101);
  const NormalizeOptions norm{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}, Layout::kNCHW, DType::kF16};
  for (bool on_device : {false, true}) {
    auto base = [&] { return Pipeline::from_items(items).shuffle_files(2).read().decode_jpeg().resize(20, 12).normalize(norm).batch(8); };
    Loader host_loader = base().build({.threads = 2});
    Loader gpu_loader = base().prefetch(1).to_device(cuda(0), {.normalize_on_device = on_device}).build({.threads = 2});
    std::vector<std::vector<std::uint8_t>> expected;
    std::vector<std::vector<std::int32_t>> expected_labels;
    for (Batch& b : host_loader.epoch(0)) {
      const auto* p = static_cast<const std::uint8_t*>(b.data().data);
      expected.emplace_back(p, p + b.data().bytes());
      expected_labels.emplace_back(b.labels().begin(), b.labels().end());
    }
    std::size_t i = 0;
    for (Batch& b : gpu_loader.epoch(0)) {
      ASSERT_TRUE(b.on_device());
      Stream::wrap(cuda(0), nullptr).synchronize();  // the default stream waited on the copy event
      std::vector<std::uint8_t> got(b.device_data().bytes());
      copy_to_host(cuda(0), got.data(), b.device_data().data, got.size());
      std::vector<std::int32_t> labels(static_cast<std::size_t>(b.size()));
      copy_to_host(cuda(0), labels.data(), b.device_labels(), labels.size() * sizeof(std::int32_t));
      ASSERT_LT(i, expected.size());
      EXPECT_EQ(got, expected[i]) << "batch " << i << (on_device ? " (normalised on the device)" : "");
      EXPECT_EQ(labels, expected_labels[i]);
      ++i;
    }
    EXPECT_EQ(i, expected.size());
  }
}

}  // namespace
}  // namespace sluice
