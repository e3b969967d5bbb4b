// Host <-> device copies on a real GPU: pinned and pageable sources arrive bit for bit at every
// size and offset, streams and events behave as CUDA's, the caching pool reuses device memory,
// and a transfer ring carries many batches to the device intact. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "gpu_test_util.hpp"
#include "sluice/core/error.hpp"
#include "sluice/detail/device/device_pool.hpp"
#include "sluice/detail/device/pinned.hpp"
#include "sluice/device/stream.hpp"
#include "sluice/detail/device/transfer_ring.hpp"

namespace sluice {
namespace {

TEST(GpuDevice, DescribeCuda0) {
  SLUICE_REQUIRE_GPU();
  const DeviceInfo info = describe(cuda(0));
  std::printf("cuda:0 %s, %.1f GiB, sm_%d%d, %d SMs, %d copy engines, PCI %s, NUMA node %d of %d\n",
              info.name.c_str(), static_cast<double>(info.total_memory) / (1ull << 30), info.compute_major,
              info.compute_minor, info.multiprocessors, info.async_engines, info.pci_bus_id.c_str(),
              info.numa_node, numa_node_count());
  EXPECT_FALSE(info.name.empty());
  EXPECT_GT(info.total_memory, 0u);
  EXPECT_GE(info.compute_major, 7);
  EXPECT_EQ(info.pci_bus_id, sysfs_pci_address(info.pci_bus_id));
  EXPECT_THROW(require_device(cuda(cuda_device_count())), Error);
}

TEST(GpuCopy, PinnedAndPageableSourcesArriveBitForBitAtEverySizeAndOffset) {
  SLUICE_REQUIRE_GPU();
  auto pool = make_caching_pool(cuda(0));
  Stream stream(cuda(0));
  constexpr std::size_t kMax = (64u << 20) + 4096;
  PinnedBuffer pinned(cuda(0), kMax);
  ASSERT_TRUE(pinned.pinned());
  PinnedBuffer back(cuda(0), kMax);
  std::vector<std::uint8_t> pageable(kMax);
  DeviceBuffer device(*pool, kMax);
  test::fill_random(pinned.data(), kMax, 1);
  test::fill_random(pageable.data(), kMax, 2);
  for (const std::size_t bytes : {std::size_t{1}, std::size_t{255}, std::size_t{4099}, std::size_t{1} << 20, std::size_t{64} << 20}) {
    for (const std::size_t offset : {std::size_t{0}, std::size_t{1}, std::size_t{4093}}) {
      for (const bool from_pinned : {true, false}) {
        const std::uint8_t* src = (from_pinned ? pinned.data() : pageable.data()) + offset;
        auto* dst = static_cast<std::uint8_t*>(device.data()) + offset;
        Event done(cuda(0));
        copy_to_device_async(dst, src, bytes, stream, &done);
        std::memset(back.data(), 0, bytes);
        stream.wait(done);
        copy_to_host_async(back.data(), dst, bytes, stream);
        stream.synchronize();
        ASSERT_TRUE(done.query());
        ASSERT_EQ(std::memcmp(back.data(), src, bytes), 0)
            << bytes << " bytes at offset " << offset << (from_pinned ? " from pinned" : " from pageable");
      }
    }
  }
}

TEST(GpuStream, EventsOrderStreamsAndTimeWork) {
  SLUICE_REQUIRE_GPU();
  Stream a(cuda(0));
  Stream b(cuda(0), {.priority = -1});
  Stream legacy = Stream::wrap(cuda(0), nullptr);
  Event start(cuda(0), {.timing = true});
  Event end(cuda(0), {.timing = true});
  EXPECT_TRUE(end.query());  // never recorded
  start.record(a);
  test::spin(a, 20'000'000);  // 20 ms
  end.record(a);
  b.wait(end);
  legacy.wait(end);
  end.synchronize();
  EXPECT_TRUE(end.query());
  const float ms = Event::elapsed_ms(start, end);
  EXPECT_GT(ms, 15.0f);
  EXPECT_LT(ms, 1000.0f);
  b.synchronize();
  EXPECT_TRUE(b.query());
  Event untimed(cuda(0));
  untimed.record(a);
  untimed.synchronize();
  EXPECT_THROW((void)Event::elapsed_ms(start, untimed), Error);
}

TEST(GpuPool, CachingPoolReusesDeviceMemoryWithoutNewMallocs) {
  SLUICE_REQUIRE_GPU();
  auto pool = make_caching_pool(cuda(0));
  for (int i = 0; i < 100; ++i) {
    DeviceBuffer a(*pool, 10u << 20);
    DeviceBuffer b(*pool, 1000);
  }
  const DevicePoolStats s = pool->stats();
  EXPECT_EQ(s.backend_allocations, 2u);
  EXPECT_EQ(s.cache_hits, 198u);
  EXPECT_EQ(s.in_use_bytes, 0u);
  EXPECT_EQ(s.reserved_bytes, (10u << 20) + 1024u);
}

TEST(GpuTransferRing, FiftyBatchesArriveIntactOnTheConsumersStream) {
  SLUICE_REQUIRE_GPU();
  constexpr std::size_t kBytes = 8u << 20;
  TransferRing ring({.device = cuda(0), .slots = 3, .host_slot_bytes = kBytes});
  EXPECT_TRUE(ring.pinned());
  Stream consumer(cuda(0));
  PinnedBuffer seen(cuda(0), kBytes);
  std::vector<std::uint8_t> expected(kBytes);
  for (int b = 0; b < 50; ++b) {
    const int slot = b % 3;
    ring.begin_fill(slot);
    test::fill_random(ring.host_slot(slot).data(), kBytes, 100 + static_cast<std::uint64_t>(b));
    std::memcpy(expected.data(), ring.host_slot(slot).data(), kBytes);
    ring.submit(slot, kBytes);
    ring.hand_over(slot, consumer);  // no host wait: the consumer's copy below is ordered after
    copy_to_host_async(seen.data(), ring.device_slot(slot), kBytes, consumer);
    ring.release(slot, consumer);
    consumer.synchronize();  // the test's own check, not the ring's
    ASSERT_EQ(std::memcmp(seen.data(), expected.data(), kBytes), 0) << "batch " << b;
  }
  EXPECT_EQ(ring.stats().submitted, 50u);
}

}  // namespace
}  // namespace sluice
