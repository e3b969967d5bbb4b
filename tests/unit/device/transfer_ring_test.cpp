// The transfer ring on the host backend: footprint and budget accounting, disjoint aligned slots,
// the fill -> submit -> hand_over -> release cycle carrying every batch's bytes to the "device"
// memory, batches held by the consumer left intact while other slots cycle, the device-side
// normalize step, the bookkeeping of the other streams a batch is read on (record_stream; the
// device-side ordering it buys is tests/gpu/overlap_test.cpp's), and bad uses failing with
// sluice::Error.
#include "sluice/detail/device/transfer_ring.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "device/consumer_streams.hpp"
#include "sluice/core/error.hpp"

namespace sluice {
namespace {

void fill_pattern(std::span<std::uint8_t> bytes, std::size_t n, std::uint32_t batch) {
  for (std::size_t i = 0; i < n; ++i) bytes[i] = static_cast<std::uint8_t>(i * 31 + batch * 7 + 1);
}

bool matches_pattern(const void* data, std::size_t n, std::uint32_t batch) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    if (p[i] != static_cast<std::uint8_t>(i * 31 + batch * 7 + 1)) return false;
  }
  return true;
}

TEST(TransferRing, FootprintCountsWholeSlots) {
  const TransferRingOptions options{.slots = 3, .host_slot_bytes = 5000, .device_slot_bytes = 9000};
  const TransferRingFootprint f = TransferRing::footprint(options);
  EXPECT_EQ(f.host_bytes, 3u * 8192);
  EXPECT_EQ(f.device_bytes, caching_pool_block_size(3u * 12288));
}

TEST(TransferRing, HostRingReservesItsPinnedBytesFromTheBudget) {
  MemoryBudget budget(1 << 20);
  const TransferRingOptions options{.slots = 4, .host_slot_bytes = 10'000, .budget = &budget};
  {
    TransferRing ring(options);
    EXPECT_EQ(budget.used(MemoryUse::kPinned), TransferRing::footprint(options).host_bytes);
  }
  EXPECT_EQ(budget.used(MemoryUse::kPinned), 0u);
  MemoryBudget small(40'000);
  try {
    TransferRing ring(options);  // fits: 4 x 12 KiB = 48 KiB against 1 MiB
    TransferRing too_big({.slots = 4, .host_slot_bytes = 10'000, .budget = &small});
    FAIL() << "expected kOutOfBudget";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfBudget);
    EXPECT_NE(std::string(e.what()).find("pinned memory"), std::string::npos) << e.what();
  }
  EXPECT_EQ(small.used(), 0u);
}

TEST(TransferRing, SlotsAreDisjointAlignedAndSized) {
  TransferRing ring({.slots = 3, .host_slot_bytes = 5000});
  EXPECT_EQ(ring.slots(), 3);
  EXPECT_EQ(ring.device(), host());
  EXPECT_FALSE(ring.pinned());
  EXPECT_EQ(ring.device_slot_bytes(), 5000u);  // 0 means: as the host slot
  std::set<const void*> seen;
  for (int s = 0; s < 3; ++s) {
    const auto slot = ring.host_slot(s);
    EXPECT_EQ(slot.size(), 5000u);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(slot.data()) % TransferRing::kSlotAlignment, 0u);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(ring.device_slot(s)) % 256, 0u);
    EXPECT_TRUE(seen.insert(slot.data()).second);
    EXPECT_TRUE(seen.insert(ring.device_slot(s)).second);
    std::memset(slot.data(), s, slot.size());  // whole slots are writable
  }
}

TEST(TransferRing, TwoHundredBatchesThroughThreeSlotsArriveIntactWithoutHostWaits) {
  TransferRing ring({.slots = 3, .host_slot_bytes = 64 * 1024});
  Stream consumer;
  constexpr std::uint32_t kBatches = 200;
  for (std::uint32_t b = 0; b < kBatches; ++b) {
    const int slot = static_cast<int>(b % 3);
    const std::size_t bytes = 1000 + (b * 977) % (64 * 1024 - 1000);
    ring.begin_fill(slot);
    fill_pattern(ring.host_slot(slot), bytes, b);
    ring.submit(slot, bytes);
    ring.hand_over(slot, consumer);
    EXPECT_TRUE(ring.ready_event(slot).query());
    ASSERT_TRUE(matches_pattern(ring.device_slot(slot), bytes, b)) << "batch " << b;
    ring.release(slot, consumer);
  }
  const TransferRingStats s = ring.stats();
  EXPECT_EQ(s.submitted, kBatches);
  EXPECT_EQ(s.released, kBatches);
  EXPECT_EQ(s.fill_polls, kBatches);
  EXPECT_EQ(s.fill_waits, 0u);  // the host backend is never behind
  EXPECT_GT(s.bytes_copied, 0u);
}

TEST(TransferRing, HeldBatchIsNotOverwrittenWhileOtherSlotsCycle) {
  TransferRing ring({.slots = 3, .host_slot_bytes = 4096});
  Stream consumer;
  ring.begin_fill(0);
  fill_pattern(ring.host_slot(0), 4096, 1000);
  ring.submit(0, 4096);
  ring.hand_over(0, consumer);  // the consumer keeps slot 0
  for (std::uint32_t b = 0; b < 50; ++b) {
    const int slot = 1 + static_cast<int>(b % 2);
    ring.begin_fill(slot);
    fill_pattern(ring.host_slot(slot), 4096, b);
    ring.submit(slot, 4096);
    ring.hand_over(slot, consumer);
    ring.release(slot, consumer);
  }
  EXPECT_TRUE(matches_pattern(ring.device_slot(0), 4096, 1000));
  ring.release(0, consumer);
}

TEST(TransferRing, NormalizeStepEqualsTheCpuTwinOfTheCopiedBytes) {
  constexpr int kBatch = 3, kH = 5, kW = 7, kC = 3;
  GpuNormalizer normalizer;
  normalizer.setup({.mean = {0.485f, 0.456f, 0.406f}, .std = {0.229f, 0.224f, 0.225f}, .dtype = DType::kF16}, kC);
  const std::size_t in = normalizer.input_bytes(kBatch, kH, kW);
  const std::size_t out = normalizer.output_bytes(kBatch, kH, kW);
  const std::size_t out_offset = (in + 255) / 256 * 256;
  TransferRing ring({.slots = 2, .host_slot_bytes = in, .device_slot_bytes = out_offset + out});
  Stream consumer;
  const DeviceNormalizeStep step{.normalizer = &normalizer, .src_offset = 0, .dst_offset = out_offset,
                                 .batch = kBatch, .height = kH, .width = kW};
  for (std::uint32_t b = 0; b < 4; ++b) {
    const int slot = static_cast<int>(b % 2);
    ring.begin_fill(slot);
    fill_pattern(ring.host_slot(slot), in, b);
    ring.submit(slot, in, &step);
    ring.hand_over(slot, consumer);
    std::vector<std::uint8_t> expected(out);
    normalizer.run_reference(ring.host_slot(slot).data(), expected.data(), kBatch, kH, kW);
    ASSERT_EQ(std::memcmp(static_cast<std::uint8_t*>(ring.device_slot(slot)) + out_offset, expected.data(), out), 0);
    ring.release(slot, consumer);
  }
}

TEST(TransferRing, BadOptionsAndUsesFail) {
  EXPECT_THROW(TransferRing({.slots = 0, .host_slot_bytes = 10}), Error);
  EXPECT_THROW(TransferRing({.slots = 2, .host_slot_bytes = 0}), Error);
  TransferRing ring({.slots = 2, .host_slot_bytes = 1000});
  EXPECT_THROW(ring.submit(0, 1001), Error);
  EXPECT_THROW(ring.begin_fill(2), Error);
  EXPECT_THROW((void)ring.host_slot(-1), Error);
  GpuNormalizer normalizer;
  normalizer.setup({}, 3);
  const DeviceNormalizeStep overlapping{.normalizer = &normalizer, .src_offset = 0, .dst_offset = 8,
                                        .batch = 1, .height = 2, .width = 2};
  EXPECT_THROW(ring.submit(0, 12, &overlapping), Error);
  const DeviceNormalizeStep outside{.normalizer = &normalizer, .src_offset = 0, .dst_offset = 960,
                                    .batch = 1, .height = 2, .width = 2};
  EXPECT_THROW(ring.submit(0, 12, &outside), Error);
  const DeviceNormalizeStep missing{.normalizer = nullptr};
  EXPECT_THROW(ring.submit(0, 12, &missing), Error);
  EXPECT_EQ(ring.stats().submitted, 0u);
}

// The streams release() must also record on: each once, in order, at most the capacity.
TEST(TransferRing, ConsumerStreamsAreKeptOnceEachUpToTheCapacity) {
  device_detail::ConsumerStreams streams;
  int handles[8];
  EXPECT_EQ(streams.add(&handles[0]), 0u);
  EXPECT_EQ(streams.add(nullptr), 1u);  // the legacy default stream is a stream too
  EXPECT_EQ(streams.add(&handles[0]), 0u);
  EXPECT_EQ(streams.add(nullptr), 1u);
  EXPECT_EQ(streams.size(), 2u);
  EXPECT_EQ(streams.add(&handles[1]), 2u);
  EXPECT_EQ(streams.add(&handles[2]), 3u);
  ASSERT_EQ(streams.size(), device_detail::ConsumerStreams::kCapacity);
  try {
    streams.add(&handles[3]);
    FAIL() << "a fifth stream was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("more than 4 streams"), std::string::npos) << e.what();
  }
  EXPECT_EQ(streams.add(&handles[2]), 3u);  // one already there still is
  EXPECT_EQ(streams[0], &handles[0]);
  EXPECT_EQ(streams[1], nullptr);
  streams.clear();  // the next batch in the slot starts with none
  EXPECT_EQ(streams.size(), 0u);
  EXPECT_EQ(streams.add(&handles[3]), 0u);
}

// On the host ring there is nothing to order (work is done when submitted): record_stream is
// counted and changes nothing else; a bad slot is still an error.
TEST(TransferRing, RecordStreamOnAHostRingIsCountedAndHarmless) {
  TransferRing ring({.slots = 2, .host_slot_bytes = 4096});
  Stream consumer;
  int others[6];
  for (std::uint32_t b = 0; b < 6; ++b) {
    const int slot = static_cast<int>(b % 2);
    ring.begin_fill(slot);
    fill_pattern(ring.host_slot(slot), 4096, b);
    ring.submit(slot, 4096);
    ring.hand_over(slot, consumer);
    for (int& other : others) ring.record_stream(slot, &other);  // no capacity on the host
    EXPECT_TRUE(matches_pattern(ring.device_slot(slot), 4096, b));
    ring.release(slot, consumer);
  }
  EXPECT_THROW(ring.record_stream(2, nullptr), Error);
  const TransferRingStats s = ring.stats();
  EXPECT_EQ(s.streams_recorded, 36u);
  EXPECT_EQ(s.stream_waits, 0u);
  EXPECT_EQ(s.submitted, 6u);
  EXPECT_EQ(s.released, 6u);
}

TEST(TransferRing, UsesTheGivenPool) {
  auto pool = make_caching_pool(host());
  {
    TransferRing ring({.slots = 2, .host_slot_bytes = 3000, .pool = pool.get()});
    EXPECT_EQ(pool->stats().in_use_bytes, caching_pool_block_size(2 * 4096));
  }
  EXPECT_EQ(pool->stats().in_use_bytes, 0u);
}

}  // namespace
}  // namespace sluice
