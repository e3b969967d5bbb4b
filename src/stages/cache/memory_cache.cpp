// MemoryCacheStore: one slot per item with a small state machine (empty -> filling -> ready ->
// evicting -> empty) and a reader count, so lookups take no lock and eviction waits only for the
// readers of the one entry it frees.
#include "stages/cache/memory_cache.hpp"

#include <cstring>
#include <optional>

namespace sluice::stages {

namespace {
enum State : std::uint32_t { kEmpty, kFilling, kReady, kEvicting };
}  // namespace

struct MemoryCacheStore::Handle::Slot {
  std::atomic<std::uint32_t> state{kEmpty};
  std::atomic<std::int32_t> readers{0};
  std::size_t size = 0;
  std::unique_ptr<std::uint8_t[]> data;
  Reservation reservation;
};

MemoryCacheStore::Handle& MemoryCacheStore::Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    if (slot_ != nullptr) slot_->readers.fetch_sub(1, std::memory_order_release);
    slot_ = other.slot_;
    other.slot_ = nullptr;
  }
  return *this;
}

MemoryCacheStore::Handle::~Handle() {
  if (slot_ != nullptr) slot_->readers.fetch_sub(1, std::memory_order_release);
}

std::span<const std::uint8_t> MemoryCacheStore::Handle::bytes() const { return {slot_->data.get(), slot_->size}; }

MemoryCacheStore::MemoryCacheStore(std::int64_t items, std::uint64_t max_bytes, MemoryBudget& budget)
    : slots_(static_cast<std::size_t>(items)), max_bytes_(max_bytes), budget_(budget) {
  reclaimer_id_ = budget_.add_reclaimer([this](std::uint64_t bytes) { return reclaim(bytes); });
}

MemoryCacheStore::~MemoryCacheStore() { budget_.remove_reclaimer(reclaimer_id_); }

MemoryCacheStore::Handle MemoryCacheStore::lookup(std::int64_t item) {
  Handle::Slot& slot = slots_[static_cast<std::size_t>(item)];
  if (slot.state.load(std::memory_order_acquire) == kReady) {
    // Announce the read, then re-check; an evictor marks kEvicting, then looks at readers. Both
    // sides store then load, so both use seq_cst: one of them must see the other.
    slot.readers.fetch_add(1, std::memory_order_seq_cst);
    if (slot.state.load(std::memory_order_seq_cst) == kReady) {
      hits_.fetch_add(1, std::memory_order_relaxed);
      return Handle(&slot);
    }
    slot.readers.fetch_sub(1, std::memory_order_release);
  }
  misses_.fetch_add(1, std::memory_order_relaxed);
  return Handle();
}

bool MemoryCacheStore::insert(std::int64_t item, std::span<const std::uint8_t> bytes) {
  Handle::Slot& slot = slots_[static_cast<std::size_t>(item)];
  std::uint32_t expected = kEmpty;
  if (!slot.state.compare_exchange_strong(expected, kFilling, std::memory_order_acq_rel)) return false;
  const std::uint64_t size = bytes.size();
  const bool within_share = max_bytes_ == 0 || bytes_.load(std::memory_order_relaxed) + size <= max_bytes_;
  std::optional<Reservation> reservation;
  if (within_share) reservation = budget_.try_reserve(size, MemoryUse::kCache, Reclaim::kNo);
  if (!reservation) {
    rejected_.fetch_add(1, std::memory_order_relaxed);
    slot.state.store(kEmpty, std::memory_order_release);
    return false;
  }
  slot.data.reset(new std::uint8_t[size]);
  std::memcpy(slot.data.get(), bytes.data(), size);
  slot.size = size;
  slot.reservation = std::move(*reservation);
  bytes_.fetch_add(size, std::memory_order_relaxed);
  inserts_.fetch_add(1, std::memory_order_relaxed);
  slot.state.store(kReady, std::memory_order_release);
  return true;
}

std::uint64_t MemoryCacheStore::reclaim(std::uint64_t bytes) {
  // Walk the slots from where the last reclaim stopped, freeing entries no one is reading.
  std::uint64_t freed = 0;
  const auto n = static_cast<std::int64_t>(slots_.size());
  for (std::int64_t step = 0; step < n && freed < bytes; ++step) {
    const std::int64_t i = reclaim_cursor_.fetch_add(1, std::memory_order_relaxed) % n;
    Handle::Slot& slot = slots_[static_cast<std::size_t>(i)];
    std::uint32_t expected = kReady;
    if (!slot.state.compare_exchange_strong(expected, kEvicting, std::memory_order_seq_cst)) continue;
    if (slot.readers.load(std::memory_order_seq_cst) != 0) {
      slot.state.store(kReady, std::memory_order_release);  // in use: leave it
      continue;
    }
    freed += slot.size;
    bytes_.fetch_sub(slot.size, std::memory_order_relaxed);
    slot.data.reset();
    slot.size = 0;
    slot.reservation.reset();
    evicted_.fetch_add(1, std::memory_order_relaxed);
    slot.state.store(kEmpty, std::memory_order_release);
  }
  return freed;
}

MemoryCacheStats MemoryCacheStore::stats() const {
  MemoryCacheStats s;
  s.hits = hits_.load(std::memory_order_relaxed);
  s.misses = misses_.load(std::memory_order_relaxed);
  s.inserts = inserts_.load(std::memory_order_relaxed);
  s.rejected = rejected_.load(std::memory_order_relaxed);
  s.evicted = evicted_.load(std::memory_order_relaxed);
  s.entries = s.inserts - s.evicted;
  s.bytes = bytes_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace sluice::stages
