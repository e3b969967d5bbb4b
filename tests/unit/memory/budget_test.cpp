// MemoryBudget: reservations that fit never block, those that do not wait for releases or fail
// at their deadline, reclaimers are asked first, peaks are kept per use, and a budget-attached
// AlignedBuffer reserves before it allocates.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/memory/aligned_buffer.hpp"
#include "sluice/memory/budget.hpp"

namespace sluice {
namespace {

using namespace std::chrono_literals;

MemoryBudget::Clock::time_point in(std::chrono::milliseconds ms) { return MemoryBudget::Clock::now() + ms; }

TEST(MemoryBudget, AccountsUsePeakAndPerUse) {
  MemoryBudget budget(1000);
  {
    auto a = budget.try_reserve(300, MemoryUse::kBatches);
    auto b = budget.try_reserve(500, MemoryUse::kCache);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(budget.used(), 800u);
    EXPECT_EQ(budget.available(), 200u);
    EXPECT_FALSE(budget.try_reserve(201, MemoryUse::kBatches));
    EXPECT_EQ(budget.used(MemoryUse::kCache), 500u);
    b->shrink(100);
    EXPECT_EQ(budget.used(), 700u);
  }
  EXPECT_EQ(budget.used(), 0u);
  EXPECT_EQ(budget.peak(), 800u);
  EXPECT_EQ(budget.peak(MemoryUse::kCache), 500u);
  EXPECT_EQ(budget.peak(MemoryUse::kBatches), 300u);
}

TEST(MemoryBudget, UnlimitedAlwaysFitsAndStillAccounts) {
  MemoryBudget budget(0);
  auto r = budget.try_reserve(std::uint64_t{1} << 40, MemoryUse::kBatches);
  ASSERT_TRUE(r);
  EXPECT_EQ(budget.used(), std::uint64_t{1} << 40);
}

TEST(MemoryBudget, WaiterIsWokenByARelease) {
  MemoryBudget budget(100);
  auto held = budget.try_reserve(80, MemoryUse::kBatches);
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    auto r = budget.reserve(50, MemoryUse::kDecodeBuffers, in(10s));
    got = r.has_value();
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(got);
  held.reset();
  waiter.join();
  EXPECT_TRUE(got);
}

TEST(MemoryBudget, WaitFailsAtTheDeadlineAndTooLargeFailsAtOnce) {
  MemoryBudget budget(100);
  auto held = budget.try_reserve(80, MemoryUse::kBatches);
  const auto start = MemoryBudget::Clock::now();
  EXPECT_FALSE(budget.reserve(50, MemoryUse::kBatches, in(100ms)));
  EXPECT_GE(MemoryBudget::Clock::now() - start, 90ms);
  const auto start2 = MemoryBudget::Clock::now();
  EXPECT_FALSE(budget.reserve(101, MemoryUse::kBatches, in(10s)));
  EXPECT_LT(MemoryBudget::Clock::now() - start2, 1s);
}

TEST(MemoryBudget, CancelWakesWaitersWithAnError) {
  MemoryBudget budget(10);
  auto held = budget.try_reserve(10, MemoryUse::kBatches);
  std::atomic<int> code{-1};
  std::thread waiter([&] {
    try {
      budget.reserve(5, MemoryUse::kBatches, in(10s));
      code = 0;
    } catch (const Error& e) {
      code = static_cast<int>(e.code());
    }
  });
  std::this_thread::sleep_for(30ms);
  budget.cancel();
  waiter.join();
  EXPECT_EQ(code, static_cast<int>(ErrorCode::kCancelled));
}

TEST(MemoryBudget, ReclaimersAreAskedOnlyWhenAllowed) {
  MemoryBudget budget(100);
  std::vector<Reservation> cache;
  for (int i = 0; i < 10; ++i) cache.push_back(*budget.try_reserve(10, MemoryUse::kCache));
  int calls = 0;
  const int id = budget.add_reclaimer([&](std::uint64_t bytes) {
    ++calls;
    std::uint64_t freed = 0;
    while (freed < bytes && !cache.empty()) {
      freed += cache.back().bytes();
      cache.pop_back();
    }
    return freed;
  });
  EXPECT_FALSE(budget.try_reserve(25, MemoryUse::kBatches, Reclaim::kNo));
  EXPECT_EQ(calls, 0);
  auto r = budget.try_reserve(25, MemoryUse::kDecodeBuffers, Reclaim::kYes);
  EXPECT_TRUE(r);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(cache.size(), 7u);
  budget.remove_reclaimer(id);
}

TEST(MemoryBudget, ManyThreadsNeverExceedTheLimit) {
  MemoryBudget budget(1000);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        auto r = budget.reserve(static_cast<std::uint64_t>(50 + (i * 37 + t) % 300), MemoryUse::kBatches, in(5s));
        ASSERT_TRUE(r);
        ASSERT_LE(budget.used(), 1000u);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(budget.peak(), 1000u);
  EXPECT_EQ(budget.used(), 0u);
}

TEST(AlignedBufferWithBudget, ReservesBeforeAllocatingAndReleasesOnReset) {
  MemoryBudget budget(64 * 1024);
  AlignedBuffer buffer;
  buffer.attach(budget, MemoryUse::kReadBuffers, 10ms);
  buffer.reserve(10000);
  EXPECT_EQ(buffer.capacity(), 16384u);
  EXPECT_EQ(budget.used(MemoryUse::kReadBuffers), 16384u);
  buffer.reserve(40000);
  EXPECT_EQ(budget.used(), 65536u);
  try {
    buffer.reserve(70000);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfBudget);
    EXPECT_NE(std::string(e.what()).find("read_buffers"), std::string::npos) << e.what();
  }
  EXPECT_EQ(buffer.capacity(), 65536u);  // the failed growth left it as it was
  buffer.reset();
  EXPECT_EQ(budget.used(), 0u);
}

}  // namespace
}  // namespace sluice
