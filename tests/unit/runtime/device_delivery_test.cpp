// DeviceDelivery alone, on the transfer ring's host backend (to_device(host()) staged through the
// ring; tests/gpu runs the CUDA one): each slot's labels and samples lie in its own page-locked
// slot; a shipped batch reaches the consumer's Batch byte for byte, or normalised on the "device"
// to the host normaliser's values; a copy that cannot be made comes back as an error value, not
// an exception; a batch's other consumer streams reach the transfer ring through the slots its
// batches share; the ring's memory is the budget's (kPinned) and goes back to it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "pipeline_support.hpp"
#include "runtime/batch_access.hpp"
#include "runtime/device_delivery.hpp"
#include "runtime/shared_slots.hpp"
#include "sluice/sluice.hpp"
#include "stages/program/resolved_pipeline.hpp"
#include "test_support.hpp"

namespace sluice::runtime {
namespace {

using test::TempDir;

constexpr int kBatch = 4;

class DeviceDeliveryTest : public ::testing::Test {
 protected:
  void SetUp() override { items_ = test::make_coded_items(dir_.path(), 8); }
  stages::ResolvedPipeline plan(bool normalize_on_device) const {
    Pipeline p = Pipeline::from_items(items_).read().decode_jpeg().resize(6, 4);
    if (normalize_on_device) p.normalize({{0.5f, 0.25f, 0.75f}, {0.5f, 0.25f, 0.125f}, Layout::kNCHW, DType::kF32});
    p.batch(kBatch).to_device(host(), {.normalize_on_device = normalize_on_device, .stage_through_ring = true});
    return stages::resolve_pipeline(p.spec(), BuildOptions{});
  }
  // A batch of `samples` whose byte i is (seed + i) & 0xff and whose labels are 10 + i, written
  // into `slot` as workers would.
  static void write_batch(DeviceDelivery& d, int slot, std::size_t sample_bytes, int samples, int seed) {
    std::uint8_t* data = d.host_data(slot);
    for (std::size_t i = 0; i < sample_bytes * static_cast<std::size_t>(samples); ++i) {
      data[i] = static_cast<std::uint8_t>(seed + static_cast<int>(i));
    }
    for (int i = 0; i < samples; ++i) d.host_labels(slot)[i] = 10 + i;
  }
  static Batch host_batch(DeviceDelivery& d, int slot, const stages::SampleProgram& program, int samples) {
    const Shape s = program.sample_shape();
    return BatchAccess::make(TensorView{d.host_data(slot), program.dtype(), Shape{samples, s[0], s[1], s[2]}},
                             std::span<const std::int32_t>(d.host_labels(slot), static_cast<std::size_t>(samples)),
                             0, 0, 0, slot, nullptr);
  }

  TempDir dir_;
  std::vector<Item> items_;
};

TEST_F(DeviceDeliveryTest, EachSlotHasItsOwnLabelsAndSamples) {
  const auto p = plan(false);
  stages::SampleProgram program(p.program);
  MemoryBudget budget(0);
  DeviceDelivery d(p, program, 4, budget);
  ASSERT_EQ(d.slots(), 4);
  const std::size_t batch_bytes = program.sample_bytes() * kBatch;
  for (int s = 0; s < 4; ++s) {
    const auto* labels = reinterpret_cast<const std::uint8_t*>(d.host_labels(s));
    EXPECT_GE(d.host_data(s), labels + kBatch * sizeof(std::int32_t));  // labels first
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(d.host_data(s)) % 256, 0u);
    if (s > 0) EXPECT_GE(labels, d.host_data(s - 1) + batch_bytes);  // after the previous slot's batch
  }
}

TEST_F(DeviceDeliveryTest, AShippedBatchReachesTheConsumerByteForByte) {
  const auto p = plan(false);
  stages::SampleProgram program(p.program);
  MemoryBudget budget(0);
  DeviceDelivery d(p, program, 3, budget);
  for (int round = 0; round < 3; ++round) {  // each slot reused: begin_fill after release
    const int slot = round % 3;
    const int samples = round == 2 ? 3 : kBatch;  // a short last batch ships only its samples
    d.begin_fill(slot);
    write_batch(d, slot, program.sample_bytes(), samples, round * 7);
    EXPECT_EQ(d.ship(slot, samples), nullptr);
    Batch b = host_batch(d, slot, program, samples);
    d.hand_over(slot, samples, b);
    ASSERT_TRUE(b.on_device());
    EXPECT_EQ(b.device(), host());
    EXPECT_EQ(b.device_data().shape, b.data().shape);
    EXPECT_EQ(std::memcmp(b.device_data().data, b.data().data, b.data().bytes()), 0);
    EXPECT_EQ(std::memcmp(b.device_labels(), b.labels().data(), b.labels().size_bytes()), 0);
    d.release(slot);
  }
}

TEST_F(DeviceDeliveryTest, NormaliseOnDeviceGivesTheNormalisedValuesInTheRequestedLayout) {
  const auto p = plan(true);
  stages::SampleProgram program(p.program);
  ASSERT_EQ(program.dtype(), DType::kU8);  // the host ships bytes
  MemoryBudget budget(0);
  DeviceDelivery d(p, program, 3, budget);
  d.begin_fill(1);
  write_batch(d, 1, program.sample_bytes(), 2, 3);
  ASSERT_EQ(d.ship(1, 2), nullptr);
  Batch b = host_batch(d, 1, program, 2);
  d.hand_over(1, 2, b);
  const TensorView& out = b.device_data();
  EXPECT_EQ(out.dtype, DType::kF32);
  ASSERT_EQ(out.shape, (Shape{2, 3, 4, 6}));  // NCHW
  const float mean[3] = {0.5f, 0.25f, 0.75f};
  const float stdev[3] = {0.5f, 0.25f, 0.125f};
  const auto* in = d.host_data(1);  // NHWC u8
  const auto* f = static_cast<const float*>(out.data);
  for (int n = 0; n < 2; ++n) {
    for (int c = 0; c < 3; ++c) {
      for (int y = 0; y < 4; ++y) {
        for (int x = 0; x < 6; ++x) {
          const std::uint8_t v = in[((n * 4 + y) * 6 + x) * 3 + c];
          const float expected = (static_cast<float>(v) / 255.0f - mean[c]) / stdev[c];
          EXPECT_NEAR(f[((n * 3 + c) * 4 + y) * 6 + x], expected, 1e-5f);
        }
      }
    }
  }
  d.release(1);
}

TEST_F(DeviceDeliveryTest, ACopyThatCannotBeMadeIsReturnedNotThrown) {
  const auto p = plan(false);
  stages::SampleProgram program(p.program);
  MemoryBudget budget(0);
  DeviceDelivery d(p, program, 3, budget);
  d.begin_fill(0);
  std::exception_ptr error;
  EXPECT_NO_THROW(error = d.ship(0, 2 * kBatch));  // more samples than a slot holds
  ASSERT_NE(error, nullptr);
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("do not fit"), std::string::npos) << e.what();
  }
}

// Batch::record_stream reaches the loader through its BatchRecycler, the SharedSlots: the stream
// must reach the transfer ring (which records the slot's release there too), and a slot the ring
// does not have is refused there.
TEST_F(DeviceDeliveryTest, ARecordedStreamReachesTheTransferRingThroughTheSharedSlots) {
  const auto p = plan(false);
  stages::SampleProgram program(p.program);
  SharedSlots shared(std::make_shared<MemoryBudget>(0));
  shared.device = std::make_unique<DeviceDelivery>(p, program, 3, *shared.budget);
  EXPECT_EQ(shared.device->transfer_stats().streams_recorded, 0u);
  BatchRecycler& recycler = shared;
  recycler.record_stream(1, nullptr);
  recycler.record_stream(2, reinterpret_cast<void*>(std::uintptr_t{0x1000}));
  EXPECT_EQ(shared.device->transfer_stats().streams_recorded, 2u);
  try {
    recycler.record_stream(3, nullptr);
    ADD_FAILURE() << "a slot the ring does not have was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
  SharedSlots host_only(std::make_shared<MemoryBudget>(0));  // no device delivery: nothing to record, nothing to fail
  EXPECT_NO_THROW(static_cast<BatchRecycler&>(host_only).record_stream(0, nullptr));
}

TEST_F(DeviceDeliveryTest, TheRingsMemoryIsTheBudgetsAndGoesBack) {
  const auto p = plan(false);
  stages::SampleProgram program(p.program);
  MemoryBudget budget(0);
  {
    DeviceDelivery d(p, program, 5, budget);
    const std::uint64_t pinned = budget.used(MemoryUse::kPinned);
    EXPECT_GE(pinned, 5 * program.sample_bytes() * kBatch);
    EXPECT_LE(pinned, 5 * (program.sample_bytes() * kBatch + 2 * 4096));  // slots take whole pages
  }
  EXPECT_EQ(budget.used(), 0u);

  MemoryBudget tight(4096);
  EXPECT_THROW(DeviceDelivery(p, program, 5, tight), Error);
  EXPECT_EQ(tight.used(), 0u);
}

}  // namespace
}  // namespace sluice::runtime
