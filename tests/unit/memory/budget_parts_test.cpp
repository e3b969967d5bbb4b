// MemoryBudget parts (one job's budget shared by its pipelines and its trainer): a part's
// reservations count in the parent too, either limit binds, each part keeps its own peaks and
// cancellation, a release in one part wakes a waiter in another, reclaimers reach across the job
// but a part's own limit only asks its own, and a reclaimer is never called after its removal.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/memory/budget.hpp"

namespace sluice {
namespace {

using namespace std::chrono_literals;

MemoryBudget::Clock::time_point in(std::chrono::milliseconds ms) { return MemoryBudget::Clock::now() + ms; }

// A cache stand-in: reservations given back on request, counting the calls.
struct FakeCache {
  MemoryBudget& budget;
  std::vector<Reservation> entries;
  int calls = 0;

  void fill(int n, std::uint64_t bytes) {
    for (int i = 0; i < n; ++i) entries.push_back(*budget.try_reserve(bytes, MemoryUse::kCache));
  }
  std::uint64_t reclaim(std::uint64_t bytes) {
    ++calls;
    std::uint64_t freed = 0;
    while (freed < bytes && !entries.empty()) {
      freed += entries.back().bytes();
      entries.pop_back();
    }
    return freed;
  }
};

TEST(MemoryBudgetParts, AReservationCountsInThePartAndTheParentByUse) {
  auto job = std::make_shared<MemoryBudget>(1000);
  MemoryBudget pipeline(0, job);
  auto training = job->try_reserve(400, MemoryUse::kTraining);
  ASSERT_TRUE(training);
  {
    auto batches = pipeline.try_reserve(300, MemoryUse::kBatches);
    ASSERT_TRUE(batches);
    EXPECT_EQ(pipeline.used(), 300u);
    EXPECT_EQ(job->used(), 700u);
    EXPECT_EQ(job->used(MemoryUse::kBatches), 300u);
    EXPECT_EQ(job->used(MemoryUse::kTraining), 400u);
    EXPECT_EQ(pipeline.used(MemoryUse::kTraining), 0u);
    EXPECT_EQ(pipeline.available(), 300u);  // the parent's room, the part having no limit of its own
    EXPECT_FALSE(pipeline.try_reserve(301, MemoryUse::kBatches));
    EXPECT_EQ(pipeline.used(), 300u);  // the failed reservation left nothing behind
    EXPECT_EQ(job->used(), 700u);
  }
  EXPECT_EQ(pipeline.used(), 0u);
  EXPECT_EQ(job->used(), 400u);
  EXPECT_EQ(pipeline.peak(), 300u);
  EXPECT_EQ(job->peak(), 700u);
  EXPECT_EQ(job->peak(MemoryUse::kBatches), 300u);
}

TEST(MemoryBudgetParts, APartsOwnLimitBindsBeforeTheParents) {
  auto job = std::make_shared<MemoryBudget>(1000);
  MemoryBudget part(200, job);
  EXPECT_EQ(part.available(), 200u);
  EXPECT_FALSE(part.try_reserve(201, MemoryUse::kCache));
  auto r = part.try_reserve(200, MemoryUse::kCache);
  ASSERT_TRUE(r);
  EXPECT_EQ(job->used(), 200u);
  EXPECT_EQ(job->available(), 800u);
  // A request above the part's limit fails at once, as one above a whole budget's does.
  const auto start = MemoryBudget::Clock::now();
  EXPECT_FALSE(part.reserve(300, MemoryUse::kBatches, in(10s)));
  EXPECT_LT(MemoryBudget::Clock::now() - start, 1s);
}

TEST(MemoryBudgetParts, PeaksResetPerPartAndPerUse) {
  auto job = std::make_shared<MemoryBudget>(0);
  MemoryBudget part(0, job);
  auto a = part.try_reserve(500, MemoryUse::kCache);
  auto b = job->try_reserve(100, MemoryUse::kTraining);
  a->shrink(300);
  EXPECT_EQ(job->peak(), 600u);
  job->reset_peak();
  part.reset_peak();
  EXPECT_EQ(job->peak(), 300u);
  EXPECT_EQ(job->peak(MemoryUse::kCache), 200u);
  EXPECT_EQ(part.peak(), 200u);
  auto c = part.try_reserve(50, MemoryUse::kBatches);
  EXPECT_EQ(job->peak(), 350u);
  EXPECT_EQ(part.peak(MemoryUse::kBatches), 50u);
}

TEST(MemoryBudgetParts, CancellingAPartLeavesTheJobAndItsOtherPartsRunning) {
  auto job = std::make_shared<MemoryBudget>(100);
  MemoryBudget stopping(0, job);
  MemoryBudget other(0, job);
  auto held = job->try_reserve(100, MemoryUse::kTraining);
  std::atomic<int> code{-1};
  std::thread waiter([&] {
    try {
      stopping.reserve(10, MemoryUse::kDecodeBuffers, in(10s));
      code = 0;
    } catch (const Error& e) {
      code = static_cast<int>(e.code());
    }
  });
  std::this_thread::sleep_for(30ms);
  stopping.cancel();
  waiter.join();
  EXPECT_EQ(code, static_cast<int>(ErrorCode::kCancelled));
  EXPECT_THROW(stopping.try_reserve(1, MemoryUse::kBatches), Error);
  held.reset();
  EXPECT_TRUE(other.try_reserve(10, MemoryUse::kBatches));
  EXPECT_TRUE(job->try_reserve(10, MemoryUse::kTraining));
  // Cancelling the job cancels its parts.
  job->cancel();
  EXPECT_THROW(other.try_reserve(1, MemoryUse::kBatches), Error);
}

TEST(MemoryBudgetParts, AReleaseInOnePartWakesAWaiterInAnother) {
  auto job = std::make_shared<MemoryBudget>(100);
  MemoryBudget train(0, job);
  MemoryBudget test(0, job);
  auto held = train.try_reserve(90, MemoryUse::kBatches);
  std::atomic<bool> got{false};
  std::thread waiter([&] { got = test.reserve(50, MemoryUse::kBatches, in(10s)).has_value(); });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(got);
  held.reset();
  waiter.join();
  EXPECT_TRUE(got);
}

TEST(MemoryBudgetParts, TheJobsReservationsReclaimFromAPartsCache) {
  // The training allocator (the job's kTraining) grows into what a pipeline's cache holds.
  auto job = std::make_shared<MemoryBudget>(1000);
  MemoryBudget pipeline(0, job);
  FakeCache cache{pipeline};
  cache.fill(8, 100);
  const int id = pipeline.add_reclaimer([&](std::uint64_t bytes) { return cache.reclaim(bytes); });
  auto region = job->try_reserve(150, MemoryUse::kTraining);
  ASSERT_TRUE(region);
  EXPECT_FALSE(job->try_reserve(500, MemoryUse::kTraining, Reclaim::kNo));
  EXPECT_EQ(cache.calls, 0);
  auto more = job->try_reserve(500, MemoryUse::kTraining, Reclaim::kYes);
  ASSERT_TRUE(more);
  EXPECT_EQ(cache.calls, 1);
  EXPECT_EQ(cache.entries.size(), 3u);  // 650 bytes short of 1000 with 850 held: 5 entries went
  EXPECT_EQ(job->used(), 950u);
  EXPECT_EQ(pipeline.used(MemoryUse::kCache), 300u);
  pipeline.remove_reclaimer(id);
}

TEST(MemoryBudgetParts, APartsOwnLimitAsksOnlyItsOwnReclaimers) {
  auto job = std::make_shared<MemoryBudget>(10000);
  MemoryBudget a(500, job);
  MemoryBudget b(0, job);
  FakeCache cache_a{a};
  FakeCache cache_b{b};
  cache_a.fill(5, 100);
  cache_b.fill(5, 100);
  const int ib = b.add_reclaimer([&](std::uint64_t bytes) { return cache_b.reclaim(bytes); });
  const int ia = a.add_reclaimer([&](std::uint64_t bytes) { return cache_a.reclaim(bytes); });
  // a is at its own limit: b's cache cannot help it, a's can.
  auto r = a.try_reserve(200, MemoryUse::kDecodeBuffers, Reclaim::kYes);
  ASSERT_TRUE(r);
  EXPECT_EQ(cache_b.calls, 0);
  EXPECT_EQ(cache_a.calls, 1);
  EXPECT_EQ(cache_b.entries.size(), 5u);
  EXPECT_EQ(cache_a.entries.size(), 3u);
  a.remove_reclaimer(ia);
  b.remove_reclaimer(ib);
}

TEST(MemoryBudgetParts, ARemovedReclaimerIsNeverCalledAgainAndRemovalWaitsForACall) {
  auto job = std::make_shared<MemoryBudget>(100);
  MemoryBudget part(0, job);
  auto held = part.try_reserve(100, MemoryUse::kCache);
  std::atomic<bool> inside{false};
  std::atomic<bool> finished{false};
  std::atomic<int> calls_after_removal{0};
  std::atomic<bool> removed{false};
  const int id = part.add_reclaimer([&](std::uint64_t) -> std::uint64_t {
    if (removed) ++calls_after_removal;
    inside = true;
    std::this_thread::sleep_for(100ms);
    finished = true;
    return 0;
  });
  std::thread reserving([&] { (void)job->try_reserve(10, MemoryUse::kTraining, Reclaim::kYes); });
  while (!inside) std::this_thread::yield();
  part.remove_reclaimer(id);  // the call in progress holds it back
  removed = true;
  EXPECT_TRUE(finished);
  reserving.join();
  EXPECT_FALSE(job->try_reserve(10, MemoryUse::kTraining, Reclaim::kYes));
  EXPECT_EQ(calls_after_removal, 0);
}

TEST(MemoryBudgetParts, ManyThreadsInTwoPartsNeverExceedTheJobsLimit) {
  auto job = std::make_shared<MemoryBudget>(1000);
  MemoryBudget a(700, job);
  MemoryBudget b(0, job);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    MemoryBudget& part = t % 2 == 0 ? a : b;
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        auto r = part.reserve(static_cast<std::uint64_t>(50 + (i * 37 + t) % 300), MemoryUse::kBatches, in(5s));
        ASSERT_TRUE(r);
        ASSERT_LE(job->used(), 1000u);
        ASSERT_LE(a.used(), 700u);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(job->peak(), 1000u);
  EXPECT_LE(a.peak(), 700u);
  EXPECT_EQ(job->used(), 0u);
}

}  // namespace
}  // namespace sluice
