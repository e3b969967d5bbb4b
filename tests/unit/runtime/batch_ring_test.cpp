// BatchRing alone: slots reserved from the budget and given back, the prefetch depth that bounds
// issue, in-order and any-order hand-out, the last sample and the first error of a batch,
// recycling from another thread, abandon() waiting for slots still filling, and slot memory that
// is resident from set-up on.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <vector>
#include <stdexcept>
#include <thread>

#include "resident_pages.hpp"
#include "runtime/batch_ring.hpp"
#include "sluice/core/error.hpp"

namespace sluice::runtime {
namespace {

constexpr int kBatch = 4;
constexpr std::size_t kSampleBytes = 3000;
// What the memory plan would reserve for one slot: samples and labels, in whole pages.
constexpr std::uint64_t kSlotBytes = 16384;

BatchRingOptions options(bool ordered = true) {
  return BatchRingOptions{.batch_size = kBatch, .sample_bytes = kSampleBytes, .slot_reservation = kSlotBytes,
                          .ordered = ordered};
}

// Finishes every sample of `slot` as a worker would and marks it ready.
void fill(BatchRing& ring, int slot) {
  BatchSlot& s = ring.slot(slot);
  for (int i = 0; i < s.size; ++i) {
    if (BatchRing::finish_sample(s)) ring.mark_ready(s);
  }
}

TEST(BatchRing, SlotsAreReservedFromTheBudgetAndGivenBack) {
  MemoryBudget budget(0);
  {
    BatchRing ring(options(), budget);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(ring.add_slot(Reclaim::kNo));
    EXPECT_EQ(ring.live_slots(), 3);
    EXPECT_GE(budget.used(MemoryUse::kBatches), 3 * kSampleBytes * kBatch);
    EXPECT_LE(budget.used(MemoryUse::kBatches), 3 * kSlotBytes);
  }
  EXPECT_EQ(budget.used(), 0u);
}

// The first epoch must not pay for faulting the slots in: add_slot (set-up) leaves every whole
// page of a slot resident. 36 MiB is above glibc's largest mmap threshold, so the slot is a fresh
// mapping whose pages nobody has touched before.
TEST(BatchRing, AddSlotLeavesTheSlotsPagesResident) {
  constexpr std::size_t kBigSample = std::size_t{9} << 20;
  MemoryBudget budget(0);
  BatchRing ring(BatchRingOptions{.batch_size = kBatch, .sample_bytes = kBigSample,
                                  .slot_reservation = kBigSample * kBatch, .ordered = true},
                 budget);
  ASSERT_TRUE(ring.add_slot(Reclaim::kNo));
  const std::size_t bytes = kBigSample * kBatch;
  EXPECT_EQ(test::nonresident_pages(ring.slot(0).data_ptr, bytes), 0)
      << "of " << test::whole_pages(ring.slot(0).data_ptr, bytes) << " pages";
}

TEST(BatchRing, AddSlotStopsAtTheBudgetAndAtTheMostSlots) {
  MemoryBudget tight(2 * kSlotBytes);
  BatchRing ring(options(), tight);
  EXPECT_TRUE(ring.add_slot(Reclaim::kNo));
  EXPECT_TRUE(ring.add_slot(Reclaim::kNo));
  EXPECT_FALSE(ring.add_slot(Reclaim::kNo));
  EXPECT_LE(tight.used(), tight.limit());

  MemoryBudget unlimited(0);
  BatchRing full(options(), unlimited);
  int added = 0;
  while (full.add_slot(Reclaim::kNo)) ++added;
  EXPECT_EQ(added, kMaxSlots);
  EXPECT_FALSE(full.can_grow());
}

TEST(BatchRing, IssueStopsAtThePrefetchDepthAndNamesEachBatchsPositions) {
  MemoryBudget budget(0);
  BatchRing ring(options(), budget);
  for (int i = 0; i < 6; ++i) ring.add_slot(Reclaim::kNo);
  ring.start_epoch(0, 5, 18, 0);  // 18 samples: four batches of 4 and one of 2
  std::vector<IssuedBatch> issued;
  while (auto b = ring.issue_next(2)) issued.push_back(*b);
  ASSERT_EQ(issued.size(), 3u);  // prefetch 2 plus the one the consumer is about to take
  for (int b = 0; b < 3; ++b) {
    EXPECT_EQ(issued[static_cast<std::size_t>(b)].batch, b);
    EXPECT_EQ(issued[static_cast<std::size_t>(b)].first, b * kBatch);
    EXPECT_EQ(issued[static_cast<std::size_t>(b)].size, kBatch);
    fill(ring, issued[static_cast<std::size_t>(b)].slot);
  }
  for (int b = 0; b < 5; ++b) {
    int s = ring.take_ready();
    if (s < 0) {  // batches 3 and 4: issued once the consumer has taken enough
      const auto more = ring.issue_next(2);
      ASSERT_TRUE(more.has_value());
      EXPECT_EQ(more->size, b == 4 ? 2 : kBatch);
      fill(ring, more->slot);
      s = ring.take_ready();
    }
    ASSERT_GE(s, 0);
    EXPECT_EQ(ring.slot(s).batch, b);
    ring.hand_out(s);
    ring.recycle(s);
  }
  EXPECT_TRUE(ring.epoch_complete());
  EXPECT_FALSE(ring.issue_next(2).has_value());
}

TEST(BatchRing, OrderedHandsOutInOrderUnorderedWhateverIsReady) {
  for (bool ordered : {true, false}) {
    MemoryBudget budget(0);
    BatchRing ring(options(ordered), budget);
    for (int i = 0; i < 4; ++i) ring.add_slot(Reclaim::kNo);
    ring.start_epoch(0, 3, 12, 0);
    const auto b0 = ring.issue_next(3);
    const auto b1 = ring.issue_next(3);
    ASSERT_TRUE(b0 && b1);
    fill(ring, b1->slot);  // batch 1 finishes first
    const int s = ring.take_ready();
    if (ordered) {
      EXPECT_EQ(s, -1) << "batch 0 is not ready: nothing may be handed out";
      fill(ring, b0->slot);
      EXPECT_EQ(ring.take_ready(), b0->slot);
    } else {
      EXPECT_EQ(s, b1->slot);
    }
  }
}

TEST(BatchRing, TheLastSampleFinishesTheBatchAndTheLowestPositionsErrorWins) {
  MemoryBudget budget(0);
  BatchRing ring(options(), budget);
  ring.add_slot(Reclaim::kNo);
  ring.start_epoch(0, 1, 4, 0);
  BatchSlot& s = ring.slot(ring.issue_next(1)->slot);
  BatchRing::record_error(s, 3, std::make_exception_ptr(std::runtime_error("third")));
  BatchRing::record_error(s, 1, std::make_exception_ptr(std::runtime_error("first")));
  BatchRing::record_error(s, 2, std::make_exception_ptr(std::runtime_error("second")));
  EXPECT_FALSE(BatchRing::finish_sample(s));
  EXPECT_FALSE(BatchRing::finish_sample(s));
  EXPECT_FALSE(BatchRing::finish_sample(s));
  EXPECT_TRUE(BatchRing::finish_sample(s));
  EXPECT_EQ(s.error_position, 1);
  try {
    std::rethrow_exception(s.error);
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "first");
  }
}

TEST(BatchRing, ARecycleOnAnotherThreadWakesTheConsumer) {
  MemoryBudget budget(0);
  BatchRing ring(options(), budget);
  ring.add_slot(Reclaim::kNo);
  ring.start_epoch(0, 2, 8, 0);
  const auto first = ring.issue_next(1);
  ASSERT_TRUE(first);
  fill(ring, first->slot);
  ASSERT_EQ(ring.take_ready(), first->slot);
  ring.hand_out(first->slot);
  // One slot: batch 1 can only be issued once batch 0's holder lets go.
  const std::uint32_t seen = ring.events();
  EXPECT_FALSE(ring.issue_next(1).has_value());
  std::thread holder([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ring.recycle(first->slot);
  });
  ring.wait_for_change(seen);
  holder.join();
  const auto second = ring.issue_next(1);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->slot, first->slot);
  EXPECT_EQ(second->batch, 1);
}

TEST(BatchRing, AbandonWaitsForFillingSlotsAndReturnsTheReadyOnes) {
  MemoryBudget budget(0);
  BatchRing ring(options(), budget);
  for (int i = 0; i < 4; ++i) ring.add_slot(Reclaim::kNo);
  ring.start_epoch(3, 4, 16, 0);
  const auto b0 = ring.issue_next(3);
  const auto b1 = ring.issue_next(3);
  ASSERT_TRUE(b0 && b1);
  fill(ring, b0->slot);
  ring.bump_generation();
  EXPECT_FALSE(ring.current(ring.slot(b1->slot)));
  std::thread late_worker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    fill(ring, b1->slot);
  });
  const AbandonedSlots ready = ring.abandon();
  late_worker.join();
  ASSERT_EQ(ready.count, 2);  // both finished before abandon() returned; nobody was handed either
  EXPECT_EQ(ring.slot(b1->slot).state.load(), kReady);
  EXPECT_FALSE(ring.has_outstanding());
}

TEST(BatchRing, SlotsBeyondTheDepthGoBackToTheBudgetAsTheyComeFree) {
  MemoryBudget budget(0);
  BatchRing ring(options(), budget);
  for (int i = 0; i < 6; ++i) ring.add_slot(Reclaim::kNo);
  const std::uint64_t six = budget.used(MemoryUse::kBatches);
  ring.start_epoch(0, 10, 40, 0);
  ASSERT_TRUE(ring.issue_next(1).has_value());  // depth 1: at most 3 slots are kept
  EXPECT_EQ(ring.live_slots(), 3);
  EXPECT_EQ(budget.used(MemoryUse::kBatches), six / 2);
}

TEST(BatchRing, ExternalSlotsPointAtTheCallersMemory) {
  MemoryBudget budget(0);
  BatchRing ring(options(), budget);
  std::vector<std::uint8_t> data(kSampleBytes * kBatch);
  std::vector<std::int32_t> labels(kBatch);
  ring.add_external_slot(data.data(), labels.data());
  EXPECT_EQ(budget.used(), 0u);
  ring.start_epoch(0, 1, 4, 0);
  const auto b = ring.issue_next(1);
  ASSERT_TRUE(b);
  EXPECT_EQ(ring.slot(b->slot).data_ptr, data.data());
  EXPECT_EQ(ring.slot(b->slot).labels_ptr, labels.data());
}

TEST(BatchRing, ARestoredEpochStartsAtItsFirstBatch) {
  MemoryBudget budget(0);
  BatchRing ring(options(), budget);
  for (int i = 0; i < 3; ++i) ring.add_slot(Reclaim::kNo);
  ring.start_epoch(2, 5, 20, 3);
  const auto b = ring.issue_next(1);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->batch, 3);
  EXPECT_EQ(b->first, 12);
  EXPECT_EQ(ring.returned(), 3);
}

}  // namespace
}  // namespace sluice::runtime
