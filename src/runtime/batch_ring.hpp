// BatchRing: the loader's batch slots and the path a batch takes through them. A slot is claimed
// for the epoch's next batch (issue), filled by the workers (finish_sample marks the last sample),
// handed to the consumer when ready (take_ready, hand_out) and comes back through recycle() when
// the consumer's Batch lets go; abandon() forgets an epoch part-way. Slots with their own memory
// (host batches, reserved from the budget) or slots over memory someone else owns (the transfer
// ring's page-locked slots) are the same to it.
//
// Threads: issuing, taking, handing out and abandoning happen on the consumer's thread; workers
// touch only the slot of their sample (finish_sample, record_error, mark_ready); recycle() may
// run on any thread (a Batch is released wherever its owner drops it): free slots travel through
// a lock-free queue, and every completion and recycle bumps a counter the consumer waits on.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "runtime/event_counter.hpp"
#include "sluice/detail/memory/aligned_buffer.hpp"
#include "sluice/memory/budget.hpp"

namespace sluice::runtime {

// The deepest prefetch the autotuner may choose; a ring holds at most that many batches ahead of
// the consumer's, plus the consumer's own and one completing.
inline constexpr int kMaxPrefetch = 8;
inline constexpr int kMaxSlots = kMaxPrefetch + 2;

enum SlotState : std::uint32_t { kFree, kFilling, kReady, kHeld };

struct BatchSlot {
  AlignedBuffer data;                 // (batch, sample...) in the program's dtype and layout
  std::vector<std::int32_t> labels;   // (batch)
  // Where workers write: data and labels above, or memory the slot does not own (transfer ring).
  std::uint8_t* data_ptr = nullptr;
  std::int32_t* labels_ptr = nullptr;
  // mixup() / cutmix(): the soft labels, then one sample of scratch (in `data`, after the batch).
  std::byte* mix_ptr = nullptr;
  int index = -1;                     // in the ring
  std::atomic<std::int32_t> remaining{0};
  std::atomic<std::uint32_t> state{kFree};
  std::int64_t epoch = -1;
  std::int64_t batch = -1;
  std::uint32_t generation = 0;       // the ring's generation when issued
  int size = 0;
  std::mutex error_mutex;             // taken only when a sample fails
  std::exception_ptr error;
  std::int64_t error_position = 0;
};

struct BatchRingOptions {
  int batch_size = 1;
  std::size_t sample_bytes = 0;
  std::size_t mix_bytes = 0;           // mixup() / cutmix(): stages::batch_mix_slot_bytes, else 0
  std::uint64_t slot_reservation = 0;  // what a host slot costs the budget (the memory plan's batch_bytes)
  bool ordered = true;                 // false: any ready batch may be handed out first
};

// A batch claimed for a slot: its samples are positions [first, first + size) of the epoch.
struct IssuedBatch {
  int slot = -1;
  std::int64_t batch = 0;
  std::int64_t first = 0;
  int size = 0;
};

// Slots abandon() took back while they held a finished batch nobody was handed: the caller
// recycles them (through device delivery first, when there is one).
struct AbandonedSlots {
  std::array<int, kMaxSlots> slots{};
  int count = 0;
};

class BatchRing {
 public:
  // `budget` must outlive the ring (host slots reserve from it).
  BatchRing(BatchRingOptions options, MemoryBudget& budget);
  ~BatchRing();
  BatchRing(const BatchRing&) = delete;
  BatchRing& operator=(const BatchRing&) = delete;

  // A slot with its own buffers, reserved from the budget (kBatches). False when the ring is
  // full or the budget has no room.
  bool add_slot(Reclaim reclaim);
  // A slot over memory the caller owns and keeps alive as long as the ring.
  void add_external_slot(std::uint8_t* data, std::int32_t* labels, std::byte* mix = nullptr);
  int live_slots() const { return live_slots_; }
  bool can_grow() const { return live_slots_ < kMaxSlots; }

  // ---- the consumer's thread ----
  // Starts an epoch of `batches` batches over `samples` positions, the first `first_batch` of
  // which are already delivered (a restored state). The previous epoch must be abandoned.
  void start_epoch(std::int64_t epoch, std::int64_t batches, std::int64_t samples, std::int64_t first_batch);
  // Claims a free slot for the epoch's next batch unless `prefetch` batches are already ahead of
  // the consumer's; gives back to the budget slots beyond prefetch + 2 as they come free.
  std::optional<IssuedBatch> issue_next(int prefetch);
  // The slot of the batch to hand out next, ready (ordered: the next in order; unordered: any
  // issued one), or -1.
  int take_ready();
  // The consumer gets the batch in `slot` (returned by take_ready).
  void hand_out(int slot);
  // Forgets the epoch's issued batches: waits for those still filling (their tasks skip work once
  // bump_generation() ran) and returns the ready ones nobody was handed, for the caller to recycle.
  AbandonedSlots abandon();
  bool has_outstanding() const { return next_issue_ != returned_; }
  bool epoch_started() const { return epoch_ >= 0; }
  bool epoch_complete() const { return returned_ >= batches_; }
  std::int64_t epoch() const { return epoch_; }
  std::int64_t batches() const { return batches_; }
  std::int64_t returned() const { return returned_; }

  // The completion counter: read it, look for work, then wait_for_change(seen) if there was none
  // (wait_for_change_for: at most `limit`, true when it changed). wake() bumps it from any thread,
  // so that a waiting consumer looks again (a cancellation).
  std::uint32_t events() const { return events_.value(); }
  void wait_for_change(std::uint32_t seen) const { events_.wait(seen); }
  bool wait_for_change_for(std::uint32_t seen, std::chrono::milliseconds limit) const {
    return events_.wait_for(seen, limit);
  }
  void wake() { signal(); }

  // Bumped when an epoch is abandoned or the loader stops: tasks of older slots skip their work.
  void bump_generation() { generation_.fetch_add(1, std::memory_order_acq_rel); }
  bool current(const BatchSlot& slot) const {
    return slot.generation == generation_.load(std::memory_order_acquire);
  }

  // ---- workers ----
  BatchSlot& slot(int index) { return *slots_[static_cast<std::size_t>(index)]; }
  const BatchSlot& slot(int index) const { return *slots_[static_cast<std::size_t>(index)]; }
  // Counts one sample of the slot done; true for the batch's last one, whose caller then ships
  // it if needed and calls mark_ready().
  static bool finish_sample(BatchSlot& slot) {
    return slot.remaining.fetch_sub(1, std::memory_order_acq_rel) == 1;
  }
  void mark_ready(BatchSlot& slot);
  // Keeps the error of the lowest failing position, whatever order the workers fail in.
  static void record_error(BatchSlot& slot, std::int64_t position, std::exception_ptr error);

  // ---- any thread ----
  void recycle(int slot) noexcept;

 private:
  void signal();
  int free_index() const;
  // A slot's batch, rounded up to 64 bytes so the mixing area after it is aligned.
  std::size_t batch_area() const {
    return (options_.sample_bytes * static_cast<std::size_t>(options_.batch_size) + 63) / 64 * 64;
  }

  BatchRingOptions options_;
  MemoryBudget& budget_;
  std::array<std::unique_ptr<BatchSlot>, kMaxSlots> slots_;
  int live_slots_ = 0;
  struct FreeSlots;  // a Boost.Lockfree queue, kept out of this header
  std::unique_ptr<FreeSlots> free_;
  EventCounter events_;
  std::atomic<std::uint32_t> generation_{0};

  std::int64_t epoch_ = -1;
  std::int64_t samples_ = 0;                // positions in this epoch
  std::int64_t batches_ = 0;                // in this epoch
  std::int64_t next_issue_ = 0;             // next batch to claim a slot for
  std::int64_t next_return_ = 0;            // next batch to hand out (ordered)
  std::int64_t returned_ = 0;               // batches handed out this epoch
  std::vector<int> slot_of_batch_;          // (batches_) slot index or -1
};

}  // namespace sluice::runtime
