// The batch ring's slots, its free queue and the epoch's issue and hand-out order.
#include "runtime/batch_ring.hpp"

#include <boost/lockfree/queue.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>

#include "sluice/core/error.hpp"

namespace sluice::runtime {

struct BatchRing::FreeSlots {
  FreeSlots() : queue(kMaxSlots) {}
  boost::lockfree::queue<int, boost::lockfree::fixed_sized<true>> queue;
};

BatchRing::BatchRing(BatchRingOptions options, MemoryBudget& budget)
    : options_(options), budget_(budget), free_(std::make_unique<FreeSlots>()) {}

BatchRing::~BatchRing() = default;

int BatchRing::free_index() const {
  int index = 0;
  while (index < kMaxSlots && slots_[static_cast<std::size_t>(index)] != nullptr) ++index;
  return index;
}

bool BatchRing::add_slot(Reclaim reclaim) {
  if (live_slots_ >= kMaxSlots) return false;
  const int index = free_index();
  if (index == kMaxSlots) return false;
  auto slot = std::make_unique<BatchSlot>();
  auto reservation = budget_.try_reserve(options_.slot_reservation, MemoryUse::kBatches, reclaim);
  if (!reservation) return false;
  reservation->reset();  // the buffer reserves for itself; this only checked that it fits
  slot->data.attach(budget_, MemoryUse::kBatches, std::chrono::milliseconds(0));
  try {
    slot->data.reserve_exact(batch_area() + options_.mix_bytes);
  } catch (const Error&) {
    return false;  // another reservation took the room in between
  }
  // Faulted in now, in set-up, instead of in the first epoch's workers, on transparent huge pages
  // where the kernel allows them (AlignedBuffer; docs/decisions/batch-ring-memory.md): 38 MB of
  // f32 slot is 9,400 4 KiB page faults, which cost the first epoch a tenth or more of its time;
  // as 2 MiB pages it is 19 faults and the zeroing.
  slot->data.prefault();
  slot->labels.resize(static_cast<std::size_t>(options_.batch_size));
  slot->data_ptr = slot->data.data();
  if (options_.mix_bytes != 0) slot->mix_ptr = reinterpret_cast<std::byte*>(slot->data.data() + batch_area());
  slot->labels_ptr = slot->labels.data();
  slot->index = index;
  slots_[static_cast<std::size_t>(index)] = std::move(slot);
  ++live_slots_;
  free_->queue.push(index);
  return true;
}

void BatchRing::add_external_slot(std::uint8_t* data, std::int32_t* labels, std::byte* mix) {
  const int index = free_index();
  if (index == kMaxSlots) throw Error(ErrorCode::kInternal, "batch ring: more than " + std::to_string(kMaxSlots) + " slots");
  auto slot = std::make_unique<BatchSlot>();
  slot->data_ptr = data;
  slot->labels_ptr = labels;
  slot->mix_ptr = mix;
  slot->index = index;
  slots_[static_cast<std::size_t>(index)] = std::move(slot);
  ++live_slots_;
  free_->queue.push(index);
}

void BatchRing::start_epoch(std::int64_t epoch, std::int64_t batches, std::int64_t samples, std::int64_t first_batch) {
  epoch_ = epoch;
  samples_ = samples;
  batches_ = batches;
  slot_of_batch_.assign(static_cast<std::size_t>(batches_), -1);
  next_issue_ = next_return_ = returned_ = std::min(first_batch, batches_);
}

std::optional<IssuedBatch> BatchRing::issue_next(int prefetch) {
  int s = 0;
  while (next_issue_ < batches_) {
    // Hold back batches beyond the prefetch depth (the consumer's batch and one completing do
    // not count), and give back slots the depth no longer needs.
    if (next_issue_ - returned_ >= prefetch + 1 || !free_->queue.pop(s)) return std::nullopt;
    if (live_slots_ > prefetch + 2) {
      slots_[static_cast<std::size_t>(s)].reset();  // its buffer's reservation goes back to the budget
      --live_slots_;
      continue;
    }
    BatchSlot& slot = *slots_[static_cast<std::size_t>(s)];
    const std::int64_t b = next_issue_++;
    const std::int64_t first = b * options_.batch_size;
    const int size = static_cast<int>(std::min<std::int64_t>(options_.batch_size, samples_ - first));
    slot.epoch = epoch_;
    slot.batch = b;
    slot.size = size;
    slot.generation = generation_.load(std::memory_order_acquire);
    slot.error = nullptr;
    slot.remaining.store(size, std::memory_order_relaxed);
    slot.state.store(kFilling, std::memory_order_release);
    slot_of_batch_[static_cast<std::size_t>(b)] = s;
    return IssuedBatch{s, b, first, size};
  }
  return std::nullopt;
}

int BatchRing::take_ready() {
  const auto ready = [this](std::int64_t b) {
    const int s = slot_of_batch_[static_cast<std::size_t>(b)];
    return s >= 0 && slots_[static_cast<std::size_t>(s)]->state.load(std::memory_order_acquire) == kReady ? s : -1;
  };
  if (options_.ordered) {
    if (next_return_ >= next_issue_) return -1;
    const int s = ready(next_return_);
    if (s >= 0) ++next_return_;
    return s;
  }
  int found = -1;
  for (std::int64_t b = next_return_; b < next_issue_ && found < 0; ++b) {
    found = ready(b);
    if (found >= 0) slot_of_batch_[static_cast<std::size_t>(b)] = -1;
  }
  while (next_return_ < next_issue_ && slot_of_batch_[static_cast<std::size_t>(next_return_)] < 0) ++next_return_;
  return found;
}

void BatchRing::hand_out(int s) {
  BatchSlot& slot = *slots_[static_cast<std::size_t>(s)];
  ++returned_;
  if (options_.ordered) slot_of_batch_[static_cast<std::size_t>(slot.batch)] = -1;
  slot.state.store(kHeld, std::memory_order_release);
}

AbandonedSlots BatchRing::abandon() {
  AbandonedSlots ready;
  for (std::int64_t b = 0; b < next_issue_; ++b) {
    const int s = slot_of_batch_[static_cast<std::size_t>(b)];
    if (s < 0) continue;
    BatchSlot& slot = *slots_[static_cast<std::size_t>(s)];
    // Stale tasks skip their work, so this wait is short.
    for (auto st = slot.state.load(std::memory_order_acquire); st == kFilling; st = slot.state.load(std::memory_order_acquire)) {
      slot.state.wait(st, std::memory_order_acquire);
    }
    if (slot.state.load(std::memory_order_acquire) == kReady) ready.slots[static_cast<std::size_t>(ready.count++)] = s;
    slot_of_batch_[static_cast<std::size_t>(b)] = -1;
  }
  next_issue_ = returned_ = batches_;
  return ready;
}

void BatchRing::mark_ready(BatchSlot& slot) {
  slot.state.store(kReady, std::memory_order_release);
  slot.state.notify_all();
  signal();
}

void BatchRing::record_error(BatchSlot& slot, std::int64_t position, std::exception_ptr error) {
  std::lock_guard lock(slot.error_mutex);
  if (!slot.error || position < slot.error_position) {  // the first in order, whatever the timing
    slot.error = std::move(error);
    slot.error_position = position;
  }
}

void BatchRing::recycle(int slot) noexcept {
  slots_[static_cast<std::size_t>(slot)]->state.store(kFree, std::memory_order_release);
  free_->queue.push(slot);
  signal();
}

void BatchRing::signal() { events_.bump(); }

}  // namespace sluice::runtime
