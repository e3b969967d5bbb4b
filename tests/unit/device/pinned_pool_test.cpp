// Pinned buffers and the caching device pool on the host backend: page rounding and alignment,
// the pool's reuse by rounded size and its statistics, the cache limit, RAII buffers, and
// concurrent use.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/detail/device/device_pool.hpp"
#include "sluice/detail/device/pinned.hpp"

namespace sluice {
namespace {

TEST(PinnedBuffer, HostBufferIsWholePagesAlignedAndWritable) {
  PinnedBuffer b(host(), 10'000);
  EXPECT_EQ(b.size(), 12'288u);
  EXPECT_EQ(PinnedBuffer::footprint(10'000), 12'288u);
  EXPECT_EQ(PinnedBuffer::footprint(4096), 4096u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % PinnedBuffer::kGranularity, 0u);
  EXPECT_FALSE(b.pinned());  // host device: ordinary memory
  EXPECT_EQ(b.device(), host());
  std::memset(b.data(), 0xab, b.size());
  EXPECT_EQ(b.span().back(), 0xab);
}

TEST(PinnedBuffer, EmptyMoveAndReset) {
  PinnedBuffer empty(host(), 0);
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_EQ(empty.size(), 0u);
  PinnedBuffer a(host(), 100);
  std::uint8_t* p = a.data();
  PinnedBuffer b(std::move(a));
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move)
  a = std::move(b);
  EXPECT_EQ(a.data(), p);
  a.reset();
  EXPECT_EQ(a.data(), nullptr);
}

TEST(PinnedBuffer, NumaRequestsAreHarmlessOnThisMachine) {
  for (int node : {kNumaAuto, kNumaNone, 0, 7}) {
    PinnedBuffer b(host(), 8192, {.numa_node = node});
    ASSERT_NE(b.data(), nullptr);
    std::memset(b.data(), 1, b.size());
    if (numa_node_count() == 1) {
      EXPECT_EQ(b.numa_node(), kNumaNone);
    }
  }
}

TEST(CachingPool, BlockSizesRoundTo512BelowOneMiBAnd2MiBAbove) {
  EXPECT_EQ(caching_pool_block_size(0), 512u);
  EXPECT_EQ(caching_pool_block_size(1), 512u);
  EXPECT_EQ(caching_pool_block_size(513), 1024u);
  EXPECT_EQ(caching_pool_block_size((1u << 20) - 1), 1u << 20);
  EXPECT_EQ(caching_pool_block_size(1u << 20), 2u << 20);
  EXPECT_EQ(caching_pool_block_size((2u << 20) + 1), 4u << 20);
}

TEST(CachingPool, ReusesFreedBlocksOfTheSameRoundedSize) {
  auto pool = make_caching_pool(host());
  EXPECT_EQ(pool->device(), host());
  void* a = pool->allocate(1000);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % 256, 0u);
  std::memset(a, 3, 1000);
  DevicePoolStats s = pool->stats();
  EXPECT_EQ(s.in_use_bytes, 1024u);
  EXPECT_EQ(s.reserved_bytes, 1024u);
  EXPECT_EQ(s.backend_allocations, 1u);
  pool->deallocate(a);
  s = pool->stats();
  EXPECT_EQ(s.in_use_bytes, 0u);
  EXPECT_EQ(s.cached_bytes, 1024u);
  EXPECT_EQ(s.reserved_bytes, 1024u);
  void* b = pool->allocate(600);  // rounds to 1024 too: the cached block comes back
  EXPECT_EQ(b, a);
  s = pool->stats();
  EXPECT_EQ(s.cache_hits, 1u);
  EXPECT_EQ(s.backend_allocations, 1u);
  EXPECT_EQ(s.allocations, 2u);
  void* c = pool->allocate(5000);  // another size: a new block
  EXPECT_NE(c, b);
  s = pool->stats();
  EXPECT_EQ(s.in_use_bytes, 1024u + 5120u);
  EXPECT_EQ(s.peak_in_use_bytes, 1024u + 5120u);
  pool->deallocate(b);
  pool->deallocate(c);
  EXPECT_EQ(pool->stats().peak_in_use_bytes, 1024u + 5120u);
  EXPECT_EQ(pool->stats().in_use_bytes, 0u);
}

TEST(CachingPool, CacheLimitReturnsBlocksToTheDevice) {
  auto pool = make_caching_pool(host(), {.max_cached_bytes = 0});
  void* a = pool->allocate(100);
  pool->deallocate(a);
  const DevicePoolStats s = pool->stats();
  EXPECT_EQ(s.cached_bytes, 0u);
  EXPECT_EQ(s.reserved_bytes, 0u);
  EXPECT_EQ(s.backend_frees, 1u);
}

TEST(CachingPool, NullAndForeignPointersAreIgnored) {
  auto pool = make_caching_pool(host());
  pool->deallocate(nullptr);
  int foreign = 0;
  pool->deallocate(&foreign);
  EXPECT_EQ(pool->stats().cached_bytes, 0u);
}

TEST(CachingPool, DeviceBufferReturnsItsBlock) {
  auto pool = make_caching_pool(host());
  {
    DeviceBuffer buffer(*pool, 3000);
    EXPECT_NE(buffer.data(), nullptr);
    EXPECT_EQ(buffer.size(), 3000u);
    DeviceBuffer moved(std::move(buffer));
    EXPECT_EQ(buffer.data(), nullptr);  // NOLINT(bugprone-use-after-move)
    EXPECT_EQ(pool->stats().in_use_bytes, 3072u);
  }
  EXPECT_EQ(pool->stats().in_use_bytes, 0u);
  EXPECT_EQ(pool->stats().cached_bytes, 3072u);
}

TEST(CachingPool, TwoThreadsAllocatingAndFreeingKeepConsistentStats) {
  auto pool = make_caching_pool(host());
  auto work = [&pool](int seed) {
    std::vector<void*> held;
    for (int i = 0; i < 2000; ++i) {
      held.push_back(pool->allocate(static_cast<std::size_t>(512 * (1 + (i * seed) % 7))));
      if (held.size() > 5) {
        pool->deallocate(held.front());
        held.erase(held.begin());
      }
    }
    for (void* p : held) pool->deallocate(p);
  };
  std::thread t1(work, 3);
  std::thread t2(work, 5);
  t1.join();
  t2.join();
  const DevicePoolStats s = pool->stats();
  EXPECT_EQ(s.in_use_bytes, 0u);
  EXPECT_EQ(s.allocations, 4000u);
  EXPECT_EQ(s.reserved_bytes, s.cached_bytes);
  EXPECT_LE(s.backend_allocations, 2u * 7 * 6);  // at most the blocks ever live at once
}

}  // namespace
}  // namespace sluice
