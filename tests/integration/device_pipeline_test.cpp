// The device path through the pipeline, without a GPU: to_device(cuda(0)) fails at build() with
// a clear message when no device is usable; to_device(host()) changes nothing; staged through the
// transfer ring's host backend, batches keep their order and bytes, labels travel in the slot,
// normalize_on_device gives the host pipeline's exact values, held batches stay intact while the
// ring recycles, and the page-locked slots are counted in the budget.
#include <gtest/gtest.h>

#include <cstring>

#include "pipeline_support.hpp"
#include "sluice/device/device.hpp"
#include "sluice/sluice.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

using test::TempDir;

const NormalizeOptions kNorm{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}, Layout::kNCHW, DType::kF32};

Pipeline base(const std::vector<Item>& items) {
  return Pipeline::from_items(items).shuffle_files(4).read().decode_jpeg().resize(20, 12);
}

struct Collected {
  std::vector<std::vector<std::uint8_t>> data;
  std::vector<std::vector<std::int32_t>> labels;
};

Collected collect(Loader& loader, bool device) {
  Collected c;
  for (Batch& b : loader.epoch(1)) {
    const TensorView& v = device ? b.device_data() : b.data();
    const auto* p = static_cast<const std::uint8_t*>(v.data);
    c.data.emplace_back(p, p + v.bytes());
    const std::int32_t* l = device ? b.device_labels() : b.labels().data();
    c.labels.emplace_back(l, l + b.size());
  }
  return c;
}

TEST(DevicePipeline, CudaWithoutAUsableGpuFailsAtBuildSayingSo) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present: tests/gpu covers it";
  TempDir dir;
  const auto items = test::make_coded_items(dir.path(), 8);
  try {
    base(items).batch(4).to_device(cuda(0)).build({.threads = 2});
    FAIL() << "build() accepted cuda(0) without a device";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("cuda(0)"), std::string::npos) << e.what();
  }
}

TEST(DevicePipeline, ToHostChangesNothing) {
  TempDir dir;
  const auto items = test::make_coded_items(dir.path(), 30);
  Loader plain = base(items).normalize(kNorm).batch(8).build({.threads = 2});
  Loader to_host = base(items).normalize(kNorm).batch(8).to_device(host()).build({.threads = 2});
  EXPECT_EQ(test::epoch_checksum(plain, 0), test::epoch_checksum(to_host, 0));
  for (Batch& b : to_host.epoch(1)) EXPECT_FALSE(b.on_device());
}

TEST(DevicePipeline, StagedThroughTheRingBatchesKeepOrderBytesAndLabels) {
  TempDir dir;
  const auto items = test::make_coded_items(dir.path(), 103);
  for (int threads : {1, 2}) {
    Loader plain = base(items).normalize(kNorm).batch(8).build({.threads = threads});
    Loader ring = base(items).normalize(kNorm).batch(8).prefetch(1).to_device(host(), {.stage_through_ring = true})
                      .build({.threads = threads});
    const Collected a = collect(plain, false);
    const Collected b = collect(ring, true);
    ASSERT_EQ(a.data.size(), 13u);  // many more batches than the ring's 3 slots
    EXPECT_EQ(a.data, b.data);
    EXPECT_EQ(a.labels, b.labels);
  }
}

TEST(DevicePipeline, NormalizeOnDeviceEqualsNormalizeOnTheHost) {
  TempDir dir;
  const auto items = test::make_coded_items(dir.path(), 40);
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    NormalizeOptions norm = kNorm;
    norm.dtype = dtype;
    Loader host_side = base(items).normalize(norm).batch(8).build({.threads = 2});
    Loader device_side = base(items).normalize(norm).batch(8).to_device(
        host(), {.normalize_on_device = true, .stage_through_ring = true}).build({.threads = 2});
    const Collected a = collect(host_side, false);
    const Collected b = collect(device_side, true);
    EXPECT_EQ(a.data, b.data) << to_string(dtype);
    // What crossed the "bus" is u8: a quarter of the f32 bytes.
    for (Batch& batch : device_side.epoch(2)) {
      EXPECT_EQ(batch.data().dtype, DType::kU8);
      EXPECT_EQ(batch.device_data().dtype, dtype);
      EXPECT_EQ(batch.device_data().shape, (Shape{batch.size(), 3, 12, 20}));
    }
  }
}

TEST(DevicePipeline, HeldBatchesStayIntactWhileTheRingRecycles) {
  TempDir dir;
  const auto items = test::make_coded_items(dir.path(), 60);
  Loader loader = base(items).batch(5).prefetch(2).to_device(host(), {.stage_through_ring = true}).build({.threads = 2});
  std::vector<Batch> held;
  std::vector<std::vector<std::uint8_t>> copies;
  int batches = 0;
  for (Batch& b : loader.epoch(0)) {
    ++batches;
    if (held.size() < 2) {
      const auto* p = static_cast<const std::uint8_t*>(b.device_data().data);
      copies.emplace_back(p, p + b.device_data().bytes());
      held.push_back(std::move(b));
    }
  }
  EXPECT_EQ(batches, 12);
  for (std::size_t i = 0; i < held.size(); ++i) {
    const auto* p = static_cast<const std::uint8_t*>(held[i].device_data().data);
    EXPECT_EQ(std::memcmp(p, copies[i].data(), copies[i].size()), 0) << "held batch " << i << " was overwritten";
  }
}

// Batch::record_stream (what __dlpack__(stream) and sluice_batch_use_on_stream call): nothing to
// order for a batch on the host, so a no-op that leaves the batches as they are; on a released
// batch, an error rather than a touch of a slot it no longer owns.
TEST(DevicePipeline, RecordStreamIsANoOpOnTheHostAndAnErrorOnceReleased) {
  TempDir dir;
  const auto items = test::make_coded_items(dir.path(), 30);
  Loader staged =
      base(items).normalize(kNorm).batch(8).to_device(host(), {.stage_through_ring = true}).build({.threads = 2});
  Loader plain = base(items).normalize(kNorm).batch(8).build({.threads = 2});
  const Collected expected = collect(plain, false);
  std::size_t i = 0;
  for (Batch& b : staged.epoch(1)) {
    b.record_stream(nullptr);
    ASSERT_LT(i, expected.data.size());
    const auto* p = static_cast<const std::uint8_t*>(b.device_data().data);
    EXPECT_EQ(std::vector<std::uint8_t>(p, p + b.device_data().bytes()), expected.data[i]) << "batch " << i;
    ++i;
    Batch mine = std::move(b);
    mine.release();
    try {
      mine.record_stream(nullptr);
      ADD_FAILURE() << "record_stream on a released batch was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    }
  }
  EXPECT_EQ(i, expected.data.size());
}

TEST(DevicePipeline, PinnedSlotsAreCountedInTheBudget) {
  TempDir dir;
  const auto items = test::make_coded_items(dir.path(), 20);
  Loader loader = base(items).normalize(kNorm).batch(4).prefetch(2).to_device(host(), {.stage_through_ring = true})
                      .build({.memory_budget = 64_MiB, .threads = 2});
  for (Batch& b : loader.epoch(0)) (void)b;
  const Stats s = loader.stats();
  std::uint64_t pinned = 0;
  for (const auto& m : s.memory) {
    if (m.use == "pinned") pinned = m.peak;
  }
  // 4 slots of labels (256 B) + 4 x 3 x 12 x 20 floats, page-aligned.
  EXPECT_GE(pinned, 4u * (256 + 4 * 3 * 12 * 20 * 4));
  EXPECT_LE(s.memory_peak, 64_MiB);
}

TEST(DevicePipeline, NormalizeOnDeviceNeedsAFloatNormalize) {
  TempDir dir;
  const auto items = test::make_coded_items(dir.path(), 4);
  EXPECT_THROW(base(items).batch(2).to_device(host(), {.normalize_on_device = true}).build(), Error);
  EXPECT_THROW(base(items).to_device(host()).batch(2).build(), Error);  // before batch()
}

}  // namespace
}  // namespace sluice
