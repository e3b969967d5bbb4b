// Device selection with two GPUs or more: every entry point that works on a device
// makes it current for its calls and gives the caller's thread its own current device back; page-
// locked memory is now allocated and freed that way too (it used to run in whatever context was
// current, creating cuda:0's on a thread that never chose a device, for a ring meant for cuda:1).
// Here the caller keeps cuda:1 current while it drives cuda:0. Skips with fewer than two devices
// (the device check's H200 has one: this runs on multi-GPU machines only).
#include <gtest/gtest.h>

#include <cstring>

#include "gpu_test_util.hpp"
#include "sluice/device/pinned.hpp"
#include "sluice/device/transfer_ring.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/context.hpp"
#include "sluice/train/ops.hpp"

namespace sluice {
namespace {

TEST(GpuDeviceSelection, DrivingCuda0LeavesTheCallersCuda1Current) {
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs two CUDA devices, this process sees " << cuda_device_count();
  (void)device_detail::enter_device(1);
  ASSERT_EQ(device_detail::current_device(), 1);
  {
    PinnedBuffer pinned(cuda(0), 1 << 20);
    EXPECT_TRUE(pinned.pinned());
    EXPECT_EQ(device_detail::current_device(), 1) << "PinnedBuffer";
    TransferRing ring({.device = cuda(0), .slots = 2, .host_slot_bytes = 4096});
    Stream consumer(cuda(0));
    ring.begin_fill(0);
    std::memset(ring.host_slot(0).data(), 7, 4096);
    ring.submit(0, 4096);
    ring.hand_over(0, consumer);
    ring.release(0, consumer);
    consumer.synchronize();
    EXPECT_EQ(device_detail::current_device(), 1) << "TransferRing";
    Allocator allocator(cuda(0));
    train::Context ctx(allocator);
    train::Tensor t = ctx.zeros({1024}, DType::kF32, TensorCategory::kActivations);
    train::ops::scale(ctx, t, 2.0f);
    ctx.synchronize();
    EXPECT_EQ(device_detail::current_device(), 1) << "the CUDA training backend";
  }
  EXPECT_EQ(device_detail::current_device(), 1) << "the destructors";
  (void)device_detail::enter_device(0);
}

}  // namespace
}  // namespace sluice
