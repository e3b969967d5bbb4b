// The pipeline's to_device(cuda(0)) on a real GPU: device batches, copied back, equal the host
// pipeline's batches bit for bit (with and without normalize_on_device), labels included, in
// order, over more batches than the ring has slots; and a consumer that reads each batch on a
// stream of its own, recorded with Batch::record_stream, reads every batch intact although the
// loader's consumer stream never waited for it; with mixup() and cutmix() the soft labels arrive
// on the device with the batch, equal to the host pipeline's. Skips without a usable device.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "gpu_test_util.hpp"
#include "pipeline_support.hpp"
#include "sluice/detail/device/copy.hpp"
#include "sluice/device/device.hpp"
#include "sluice/detail/device/pinned.hpp"
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
    // What the consumer receives, whichever side normalises: the host pipeline's batch, on the device.
    const OutputDescription out = gpu_loader.outputs()[0];
    EXPECT_EQ(out.shape, host_loader.batch_shape());
    EXPECT_EQ(out.dtype, DType::kF16);
    EXPECT_EQ(out.layout, "NCHW");
    EXPECT_EQ(out.device, cuda(0));
    EXPECT_EQ(gpu_loader.outputs()[1].device, cuda(0));
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

TEST(GpuPipeline, MixedBatchesAndSoftLabelsEqualTheHostPipelines) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no usable CUDA device: " << cuda_unavailable_reason();
  test::TempDir dir;
  constexpr int kClasses = 37;
  const auto items = test::make_coded_items(dir.path(), kClasses);
  for (bool on_device : {false, true}) {
    // normalize_on_device leaves a u8 host batch, which only CutMix (a copy) can mix.
    const NormalizeOptions norm{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}, Layout::kNCHW, DType::kF32};
    auto base = [&] {
      Pipeline p = Pipeline::from_items(items).shuffle_files(2).read().decode_jpeg().resize(20, 12).normalize(norm).batch(8);
      if (!on_device) p.mixup(0.4, kClasses);
      p.cutmix(1.0, kClasses);
      return p;
    };
    Loader host_loader = base().build({.threads = 2, .seed = 11});
    Loader gpu_loader = base().to_device(cuda(0), {.normalize_on_device = on_device}).build({.threads = 2, .seed = 11});
    EXPECT_EQ(gpu_loader.outputs()[1].shape, (Shape{8, kClasses}));
    EXPECT_EQ(gpu_loader.outputs()[1].device, cuda(0));
    std::vector<std::vector<std::uint8_t>> expected;
    std::vector<std::vector<float>> expected_soft;
    for (Batch& b : host_loader.epoch(1)) {
      const auto* p = static_cast<const std::uint8_t*>(b.data().data);
      expected.emplace_back(p, p + b.data().bytes());
      const auto* f = static_cast<const float*>(b.soft_labels().data);
      expected_soft.emplace_back(f, f + b.soft_labels().shape.elements());
    }
    std::size_t i = 0;
    for (Batch& b : gpu_loader.epoch(1)) {
      ASSERT_TRUE(b.on_device());
      ASSERT_LT(i, expected.size());
      Stream::wrap(cuda(0), nullptr).synchronize();
      std::vector<std::uint8_t> got(b.device_data().bytes());
      copy_to_host(cuda(0), got.data(), b.device_data().data, got.size());
      std::vector<float> soft(static_cast<std::size_t>(b.device_soft_labels().shape.elements()));
      copy_to_host(cuda(0), soft.data(), b.device_soft_labels().data, soft.size() * sizeof(float));
      EXPECT_EQ(got, expected[i]) << "batch " << i << (on_device ? " (normalised on the device)" : "");
      EXPECT_EQ(soft, expected_soft[i]) << "batch " << i;
      ++i;
    }
    EXPECT_EQ(i, expected.size());
  }
}

TEST(GpuPipeline, BatchesReadOnARecordedStreamAreNotOverwritten) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no usable CUDA device: " << cuda_unavailable_reason();
  test::TempDir dir;
  const auto items = test::make_coded_items(dir.path(), 96);
  auto base = [&] { return Pipeline::from_items(items).read().decode_jpeg().resize(20, 12).batch(8); };
  Loader host_loader = base().build({.threads = 2});
  Stream loader_stream(cuda(0));  // the pipeline's consumer stream: the consumer never uses it
  Loader gpu_loader =
      base().prefetch(1).to_device(cuda(0), {.stream = loader_stream.native_handle()}).build({.threads = 2});
  std::vector<std::vector<std::uint8_t>> expected;
  for (Batch& b : host_loader.epoch(0)) {
    const auto* p = static_cast<const std::uint8_t*>(b.data().data);
    expected.emplace_back(p, p + b.data().bytes());
  }
  Stream reader(cuda(0));
  std::vector<PinnedBuffer> got;
  for (Batch& b : gpu_loader.epoch(0)) {
    device_detail::stream_wait_event(0, reader.native_handle(), b.ready_event());  // as __dlpack__(stream) does
    test::spin(reader, 5'000'000);  // the consumer's step, 5 ms, before it reads the batch
    got.emplace_back(cuda(0), b.device_data().bytes());
    copy_to_host_async(got.back().data(), b.device_data().data, b.device_data().bytes(), reader);
    b.record_stream(reader.native_handle());
  }
  reader.synchronize();
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(std::memcmp(got[i].data(), expected[i].data(), expected[i].size()), 0)
        << "batch " << i << " was overwritten before the reading stream read it";
  }
}

}  // namespace
}  // namespace sluice
