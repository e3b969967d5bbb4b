// MemoryCacheStore: round trip, keeps what fits (no churn), reclaim frees only unread entries,
// and concurrent readers, inserts and reclaims never serve freed memory.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "stages/cache/memory_cache.hpp"

namespace sluice::stages {
namespace {

std::vector<std::uint8_t> payload(int item, std::size_t n) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(item * 31 + i);
  return v;
}

TEST(MemoryCacheStore, RoundTripAndStats) {
  MemoryBudget budget(0);
  MemoryCacheStore cache(10, 0, budget);
  EXPECT_FALSE(cache.lookup(3));
  const auto p = payload(3, 1000);
  EXPECT_TRUE(cache.insert(3, p));
  EXPECT_FALSE(cache.insert(3, p));  // already there
  {
    auto h = cache.lookup(3);
    ASSERT_TRUE(h);
    ASSERT_EQ(h.bytes().size(), 1000u);
    EXPECT_EQ(std::memcmp(h.bytes().data(), p.data(), 1000), 0);
  }
  const auto s = cache.stats();
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.entries, 1);
  EXPECT_EQ(s.bytes, 1000u);
  EXPECT_EQ(budget.used(MemoryUse::kCache), 1000u);
}

TEST(MemoryCacheStore, KeepsWhatFitsWithoutEvicting) {
  MemoryBudget budget(3500);
  MemoryCacheStore cache(10, 0, budget);
  for (int i = 0; i < 10; ++i) cache.insert(i, payload(i, 1000));
  const auto s = cache.stats();
  EXPECT_EQ(s.entries, 3);
  EXPECT_EQ(s.rejected, 7);
  EXPECT_EQ(s.evicted, 0);
  EXPECT_TRUE(cache.lookup(0));  // the first ones stay
  EXPECT_FALSE(cache.lookup(9));

  MemoryBudget unlimited(0);
  MemoryCacheStore capped(10, 2000, unlimited);
  for (int i = 0; i < 10; ++i) capped.insert(i, payload(i, 1000));
  EXPECT_EQ(capped.stats().entries, 2);
}

TEST(MemoryCacheStore, ReclaimFreesUnreadEntriesForWorkingMemory) {
  MemoryBudget budget(5000);
  MemoryCacheStore cache(10, 0, budget);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(cache.insert(i, payload(i, 1000)));
  auto held = cache.lookup(0);
  // Working memory that needs 2500 bytes takes them from the cache, never from a held entry.
  auto r = budget.try_reserve(2500, MemoryUse::kDecodeBuffers, Reclaim::kYes);
  ASSERT_TRUE(r);
  EXPECT_TRUE(held);
  EXPECT_EQ(held.bytes()[1], payload(0, 1000)[1]);
  EXPECT_GE(cache.stats().evicted, 3);
  EXPECT_LE(budget.used(), 5000u);
}

TEST(MemoryCacheStore, ConcurrentReadersInsertsAndReclaimsServeOnlyValidBytes) {
  MemoryBudget budget(40 * 4096);
  MemoryCacheStore cache(200, 0, budget);
  std::atomic<bool> stop{false};
  std::atomic<long> checked{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; !stop; ++round) {
        // Every other look-up from a hot set of four, which stays cached between reclaims; the
        // rest sweep all 200, more than the budget holds, so inserts and evictions never stop.
        const int item = round % 2 == 0 ? round % 8 : (round * 7 + t * 13) % 200;
        if (auto h = cache.lookup(item)) {
          const auto expect = payload(item, 4096);
          ASSERT_EQ(std::memcmp(h.bytes().data(), expect.data(), 4096), 0);
          ++checked;
        } else {
          cache.insert(item, payload(item, 4096));
        }
      }
    });
  }
  threads.emplace_back([&] {  // working memory coming and going, evicting as it comes
    // At least 2000 reclaims and 100 checked hits (a loaded machine, or a sanitizer, can hold
    // the readers back while the reclaims run), with a deadline so a cache that never serves a
    // hit fails below instead of hanging.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (int i = 0; i < 2000 || (checked.load() < 100 && std::chrono::steady_clock::now() < deadline); ++i) {
      auto r = budget.try_reserve(8 * 4096, MemoryUse::kDecodeBuffers, Reclaim::kYes);
      std::this_thread::yield();
    }
    stop = true;
  });
  for (auto& t : threads) t.join();
  EXPECT_GT(checked.load(), 0);
  EXPECT_LE(budget.peak(), 40u * 4096);
}

}  // namespace
}  // namespace sluice::stages
