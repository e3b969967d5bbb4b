// The device path's timing contract on a real GPU: a copy on the ring's copy stream runs while a
// kernel runs on another stream (event timings show the copy finishing inside the kernel's
// span); in steady state the producer never blocks the host on the device; and a slot's device
// memory is not overwritten until the consumer's queued work on it has run, even though the host
// never waited for that work, also when that work ran on another stream than the one the slot was
// released on (record_stream: DLPack's consumer stream). Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "gpu_test_util.hpp"
#include "sluice/core/error.hpp"
#include "sluice/detail/device/pinned.hpp"
#include "sluice/device/stream.hpp"
#include "sluice/detail/device/transfer_ring.hpp"

namespace sluice {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

TEST(GpuOverlap, CopyRunsWhileAKernelRunsOnAnotherStream) {
  SLUICE_REQUIRE_GPU();
  constexpr std::size_t kBytes = 256u << 20;
  auto pool = make_caching_pool(cuda(0));
  PinnedBuffer src(cuda(0), kBytes);
  std::memset(src.data(), 1, kBytes);
  DeviceBuffer dst(*pool, kBytes);
  Stream compute(cuda(0));
  Stream copy(cuda(0));
  Event k0(cuda(0), {.timing = true}), k1(cuda(0), {.timing = true});
  Event c0(cuda(0), {.timing = true}), c1(cuda(0), {.timing = true});
  copy_to_device_async(dst.data(), src.data(), kBytes, copy);  // warm up the path
  copy.synchronize();

  k0.record(compute);
  test::spin(compute, 200'000'000);  // 200 ms
  k1.record(compute);
  c0.record(copy);
  copy_to_device_async(dst.data(), src.data(), kBytes, copy, &c1);
  c1.synchronize();
  k1.synchronize();
  const float kernel_ms = Event::elapsed_ms(k0, k1);
  const float copy_ms = Event::elapsed_ms(c0, c1);
  const float copy_end_in_kernel = Event::elapsed_ms(k0, c1);
  std::printf("kernel %.1f ms, copy of 256 MiB %.2f ms (%.1f GB/s), copy finished %.1f ms into the kernel\n",
              kernel_ms, copy_ms, kBytes / 1e6 / copy_ms, copy_end_in_kernel);
  EXPECT_GT(kernel_ms, 150.0f);
  EXPECT_LT(copy_end_in_kernel, kernel_ms) << "the copy waited for the kernel: no overlap";
  EXPECT_GT(Event::elapsed_ms(c0, k1), 0.0f);
}

TEST(GpuOverlap, SteadyStateNeverBlocksTheHostPerBatch) {
  SLUICE_REQUIRE_GPU();
  constexpr std::size_t kBytes = 4u << 20;
  constexpr int kSlots = 4, kBatches = 300;
  TransferRing ring({.device = cuda(0), .slots = kSlots, .host_slot_bytes = kBytes});
  Stream consumer(cuda(0));
  double slowest_call_ms = 0;
  for (int b = 0; b < kBatches; ++b) {
    const int slot = b % kSlots;
    ring.begin_fill(slot);
    std::memset(ring.host_slot(slot).data(), b & 0xff, kBytes);  // the CPU's work: slower than the copy
    const auto t = Clock::now();
    ring.submit(slot, kBytes);
    ring.hand_over(slot, consumer);
    test::spin(consumer, 20'000);  // a 20 us "training step" on the batch
    ring.release(slot, consumer);
    if (b >= kSlots) slowest_call_ms = std::max(slowest_call_ms, ms_since(t));
  }
  consumer.synchronize();
  const TransferRingStats s = ring.stats();
  std::printf("%d batches: %llu host waits in begin_fill, slowest submit+hand_over+release %.3f ms\n", kBatches,
              static_cast<unsigned long long>(s.fill_waits), slowest_call_ms);
  EXPECT_EQ(s.submitted, static_cast<std::uint64_t>(kBatches));
  EXPECT_LE(s.fill_waits, static_cast<std::uint64_t>(kSlots)) << "the host waited on the device in steady state";
  EXPECT_LT(slowest_call_ms, 5.0) << "an enqueue blocked the host";
}

TEST(GpuOverlap, ReusedSlotWaitsForTheConsumersQueuedWork) {
  SLUICE_REQUIRE_GPU();
  constexpr std::size_t kBytes = 1u << 20;
  constexpr int kSlots = 2, kBatches = 12;
  TransferRing ring({.device = cuda(0), .slots = kSlots, .host_slot_bytes = kBytes});
  Stream consumer(cuda(0));
  std::vector<PinnedBuffer> seen;
  for (int b = 0; b < kBatches; ++b) seen.emplace_back(cuda(0), kBytes);
  const auto start = Clock::now();
  for (int b = 0; b < kBatches; ++b) {
    const int slot = b % kSlots;
    ring.begin_fill(slot);  // blocks only on the ring's own copy, never on `consumer` directly
    std::memset(ring.host_slot(slot).data(), 1 + b, kBytes);
    ring.submit(slot, kBytes);
    ring.hand_over(slot, consumer);
    test::spin(consumer, 10'000'000);  // 10 ms before the consumer reads the batch
    copy_to_host_async(seen[static_cast<std::size_t>(b)].data(), ring.device_slot(slot), kBytes, consumer);
    ring.release(slot, consumer);  // the next copy into this slot must wait for the read above
  }
  consumer.synchronize();
  std::printf("%d batches through %d slots with a 10 ms consumer: %.1f ms\n", kBatches, kSlots, ms_since(start));
  for (int b = 0; b < kBatches; ++b) {
    const std::uint8_t* p = seen[static_cast<std::size_t>(b)].data();
    ASSERT_EQ(p[0], 1 + b) << "batch " << b << " was overwritten before the consumer read it";
    ASSERT_EQ(p[kBytes - 1], 1 + b);
  }
}

// The consumer reads each batch on `reader`, a stream of its own (torch's current stream through
// __dlpack__(stream)), and releases the slot on `release_stream`, which has no work queued: the
// release event there is complete at once, so without record_stream the next copy into the slot
// would overwrite the batch before `reader` got to it (10 ms later).
TEST(GpuOverlap, ReusedSlotWaitsForWorkOnARecordedStream) {
  SLUICE_REQUIRE_GPU();
  constexpr std::size_t kBytes = 1u << 20;
  constexpr int kSlots = 2, kBatches = 12;
  TransferRing ring({.device = cuda(0), .slots = kSlots, .host_slot_bytes = kBytes});
  Stream release_stream(cuda(0));
  Stream reader(cuda(0));
  std::vector<PinnedBuffer> seen;
  for (int b = 0; b < kBatches; ++b) seen.emplace_back(cuda(0), kBytes);
  for (int b = 0; b < kBatches; ++b) {
    const int slot = b % kSlots;
    ring.begin_fill(slot);
    std::memset(ring.host_slot(slot).data(), 1 + b, kBytes);
    ring.submit(slot, kBytes);
    ring.hand_over(slot, reader);
    test::spin(reader, 10'000'000);
    copy_to_host_async(seen[static_cast<std::size_t>(b)].data(), ring.device_slot(slot), kBytes, reader);
    ring.record_stream(slot, reader.native_handle());
    ring.record_stream(slot, reader.native_handle());  // again: recorded once
    ring.release(slot, release_stream);
  }
  reader.synchronize();
  for (int b = 0; b < kBatches; ++b) {
    const std::uint8_t* p = seen[static_cast<std::size_t>(b)].data();
    ASSERT_EQ(p[0], 1 + b) << "batch " << b << " was overwritten before the reading stream read it";
    ASSERT_EQ(p[kBytes - 1], 1 + b);
  }
  const TransferRingStats s = ring.stats();
  EXPECT_EQ(s.streams_recorded, 2u * kBatches);
  EXPECT_EQ(s.stream_waits, static_cast<std::uint64_t>(kBatches - kSlots));  // every reuse waited once
}

TEST(GpuOverlap, AFifthRecordedStreamIsRefused) {
  SLUICE_REQUIRE_GPU();
  TransferRing ring({.device = cuda(0), .slots = 1, .host_slot_bytes = 4096});
  std::vector<Stream> streams;
  for (int i = 0; i < 5; ++i) streams.emplace_back(cuda(0));
  ring.begin_fill(0);
  ring.submit(0, 4096);
  for (int i = 0; i < 4; ++i) ring.record_stream(0, streams[static_cast<std::size_t>(i)].native_handle());
  EXPECT_THROW(ring.record_stream(0, streams[4].native_handle()), Error);
  Stream consumer(cuda(0));
  ring.release(0, consumer);
  ring.begin_fill(0);
  ring.submit(0, 4096);                               // waits on the four records
  ring.record_stream(0, streams[4].native_handle());  // a new batch starts with none
  ring.release(0, consumer);
  ring.copy_stream().synchronize();
  EXPECT_EQ(ring.stats().stream_waits, 4u);
}

}  // namespace
}  // namespace sluice
