// MemoryBudget: reservations that fit never block, those that do not wait for releases or fail
// at their deadline, reclaimers are asked first, peaks are kept per use, and a budget-attached
// AlignedBuffer reserves before it allocates.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/detail/memory/aligned_buffer.hpp"
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

// A transient reservation that does not fit waits, without a deadline, exactly while another
// transient is held (its release may make room), and gets the room when it comes.
TEST(MemoryBudgetTransient, WaitsWhileAnotherTransientIsHeldAndTakesItsRoom) {
  MemoryBudget budget(1000);
  auto held = budget.try_reserve(600, MemoryUse::kBatches);
  auto first = budget.reserve_transient(300, MemoryUse::kDecodeBuffers);
  ASSERT_TRUE(held && first);
  EXPECT_TRUE(first->transient());
  EXPECT_EQ(budget.transients_held(), 1);
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    auto second = budget.reserve_transient(300, MemoryUse::kDecodeBuffers);
    got = second.has_value();
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(got.load()) << "took room that was not free";
  first->reset();
  waiter.join();
  EXPECT_TRUE(got.load());
  EXPECT_EQ(budget.transients_held(), 0);
  EXPECT_EQ(budget.used(), 600u);
}

// With no transient held, nothing will give memory back: the request fails at once instead of
// waiting forever; and one that cannot fit even when every transient is back fails when the last
// is released, not before.
TEST(MemoryBudgetTransient, FailsWhenNoReleaseIsToCome) {
  MemoryBudget budget(1000);
  auto held = budget.try_reserve(900, MemoryUse::kBatches);
  const auto start = MemoryBudget::Clock::now();
  EXPECT_FALSE(budget.reserve_transient(200, MemoryUse::kDecodeBuffers));
  EXPECT_LT(MemoryBudget::Clock::now() - start, 1s);
  EXPECT_FALSE(budget.reserve_transient(2000, MemoryUse::kDecodeBuffers));  // above the limit
  held->shrink(500);
  auto transient = budget.reserve_transient(300, MemoryUse::kDecodeBuffers);
  ASSERT_TRUE(transient);
  std::atomic<int> result{-1};
  std::thread waiter([&] { result = budget.reserve_transient(700, MemoryUse::kDecodeBuffers).has_value() ? 1 : 0; });
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(result.load(), -1) << "gave up while a release was still to come";
  transient.reset();  // 600 free now: still not 700, and no transient left
  waiter.join();
  EXPECT_EQ(result.load(), 0);
  EXPECT_EQ(budget.used(), 400u);
}

// In a training job the pipelines' budgets are parts of the job's: a transient held by one
// loader's part is a release still to come for a transient of another part (or of the job), and
// its release wakes that waiter, since both take from the job's limit.
TEST(MemoryBudgetTransient, PartsOfOneJobWaitOnEachOthersTransients) {
  auto job = std::make_shared<MemoryBudget>(1000);
  MemoryBudget train_part(0, job);
  MemoryBudget eval_part(0, job);
  auto held = job->try_reserve(500, MemoryUse::kTraining);
  auto first = train_part.reserve_transient(400, MemoryUse::kDecodeBuffers);
  ASSERT_TRUE(held && first);
  EXPECT_EQ(eval_part.transients_held(), 1);  // counted for the whole job
  EXPECT_EQ(job->transients_held(), 1);
  std::atomic<int> result{-1};
  std::optional<Reservation> second;
  std::thread waiter([&] {
    second = eval_part.reserve_transient(300, MemoryUse::kDecodeBuffers);
    result = second.has_value() ? 1 : 0;
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(result.load(), -1) << "gave up while another part's transient was still to come back";
  first->reset();
  waiter.join();
  ASSERT_EQ(result.load(), 1);
  EXPECT_EQ(job->used(), 800u);
  EXPECT_EQ(eval_part.used(), 300u);
  EXPECT_EQ(train_part.used(), 0u);
  EXPECT_EQ(job->transients_held(), 1);
}

// A part's own limit binds too: with no transient of the job held, a request over what the part
// has left fails at once, though the job has room.
TEST(MemoryBudgetTransient, APartsOwnLimitFailsAtOnceWithoutTransients) {
  auto job = std::make_shared<MemoryBudget>(1000);
  MemoryBudget part(300, job);
  auto held = part.try_reserve(200, MemoryUse::kBatches);
  const auto start = MemoryBudget::Clock::now();
  EXPECT_FALSE(part.reserve_transient(200, MemoryUse::kDecodeBuffers));
  EXPECT_LT(MemoryBudget::Clock::now() - start, 1s);
  EXPECT_TRUE(part.reserve_transient(100, MemoryUse::kDecodeBuffers));
}

TEST(MemoryBudgetTransient, CancelEndsTheWait) {
  MemoryBudget budget(100);
  auto transient = budget.reserve_transient(100, MemoryUse::kDecodeBuffers);
  std::atomic<bool> cancelled{false};
  std::thread waiter([&] {
    try {
      (void)budget.reserve_transient(50, MemoryUse::kDecodeBuffers);
    } catch (const Error& e) {
      cancelled = e.code() == ErrorCode::kCancelled;
    }
  });
  std::this_thread::sleep_for(50ms);
  budget.cancel();
  waiter.join();
  EXPECT_TRUE(cancelled.load());
}

// A worker's buffer holds its planned share from the start (nothing else can take it), grows past
// it only on free budget, and fails a sample that needs more than can ever come with kTooLarge,
// at once, instead of waiting for a deadline.
TEST(AlignedBufferWithBudget, ShareIsHeldFromTheStartAndGrowthPastItNeverWaitsInVain) {
  MemoryBudget budget(64 * 1024);
  AlignedBuffer buffer;
  buffer.attach_share(budget, MemoryUse::kDecodeBuffers, 16384);
  EXPECT_EQ(buffer.capacity(), 0u);
  EXPECT_EQ(budget.used(MemoryUse::kDecodeBuffers), 16384u);
  EXPECT_FALSE(budget.try_reserve(64 * 1024 - 16384 + 1, MemoryUse::kBatches)) << "the share was up for grabs";
  buffer.reserve(16000);
  EXPECT_EQ(budget.used(), 16384u);
  auto other = budget.try_reserve(40000, MemoryUse::kBatches);
  ASSERT_TRUE(other);
  EXPECT_FALSE(buffer.try_reserve(20000));  // 32768 needed, 9152 free
  EXPECT_EQ(buffer.capacity(), 16384u);
  const auto start = MemoryBudget::Clock::now();
  try {
    buffer.reserve(20000);
    FAIL() << "grew past the budget";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTooLarge);
    EXPECT_NE(std::string(e.what()).find("raise the budget by at least 16.00 KiB"), std::string::npos) << e.what();
  }
  EXPECT_LT(MemoryBudget::Clock::now() - start, 1s);
  other->shrink(40000);
  EXPECT_TRUE(buffer.try_reserve(20000));
  EXPECT_EQ(budget.used(), 32768u);
  MemoryBudget small(1000);
  AlignedBuffer refused;
  EXPECT_THROW(refused.attach_share(small, MemoryUse::kReadBuffers, 4096), Error);
}

}  // namespace
}  // namespace sluice
