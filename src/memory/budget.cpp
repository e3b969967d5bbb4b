// MemoryBudget: lock-free accounting for reservations that fit, a condition variable for those
// that wait, reclaimers asked before anyone waits.
#include "sluice/memory/budget.hpp"

#include <limits>

#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"

namespace sluice {

std::string_view to_string(MemoryUse use) {
  switch (use) {
    case MemoryUse::kReadBuffers: return "read_buffers";
    case MemoryUse::kDecodeBuffers: return "decode_buffers";
    case MemoryUse::kShuffle: return "shuffle";
    case MemoryUse::kCache: return "cache";
    case MemoryUse::kBatches: return "batches";
    case MemoryUse::kPinned: return "pinned";
    case MemoryUse::kItems: return "items";
    case MemoryUse::kCount: break;
  }
  return "?";
}

Reservation& Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    reset();
    budget_ = other.budget_;
    bytes_ = other.bytes_;
    use_ = other.use_;
    other.budget_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

void Reservation::shrink(std::uint64_t bytes) {
  if (budget_ == nullptr) return;
  if (bytes > bytes_) bytes = bytes_;
  budget_->give_back(bytes, use_);
  bytes_ -= bytes;
}

void Reservation::reset() {
  if (budget_ != nullptr) budget_->give_back(bytes_, use_);
  budget_ = nullptr;
  bytes_ = 0;
}

MemoryBudget::MemoryBudget(std::uint64_t limit) : limit_(limit) {}

std::uint64_t MemoryBudget::available() const {
  if (limit_ == 0) return std::numeric_limits<std::uint64_t>::max();
  const std::uint64_t u = used();
  return u >= limit_ ? 0 : limit_ - u;
}

namespace {
void raise_peak(std::atomic<std::uint64_t>& peak, std::uint64_t value) {
  std::uint64_t p = peak.load(std::memory_order_relaxed);
  while (value > p && !peak.compare_exchange_weak(p, value, std::memory_order_relaxed)) {
  }
}
}  // namespace

bool MemoryBudget::take(std::uint64_t bytes, MemoryUse use) {
  std::uint64_t u = used_.load(std::memory_order_relaxed);
  do {
    if (limit_ != 0 && (bytes > limit_ || u > limit_ - bytes)) return false;
  } while (!used_.compare_exchange_weak(u, u + bytes, std::memory_order_acq_rel));
  raise_peak(peak_, u + bytes);
  PerUse& per = by_use_[index(use)];
  raise_peak(per.peak, per.used.fetch_add(bytes, std::memory_order_relaxed) + bytes);
  return true;
}

void MemoryBudget::give_back(std::uint64_t bytes, MemoryUse use) noexcept {
  if (bytes == 0) return;
  used_.fetch_sub(bytes, std::memory_order_acq_rel);
  by_use_[index(use)].used.fetch_sub(bytes, std::memory_order_relaxed);
  if (waiters_.load(std::memory_order_acquire) > 0) {
    std::lock_guard lock(mutex_);  // pairs with the waiter's check under the lock: no lost wake-up
    released_.notify_all();
  }
}

bool MemoryBudget::take_or_reclaim(std::uint64_t bytes, MemoryUse use, Reclaim reclaim) {
  if (take(bytes, use)) return true;
  if (reclaim == Reclaim::kNo || limit_ == 0 || bytes > limit_) return false;
  // Ask the elastic holders for the shortfall. Their releases go through give_back, which takes
  // mutex_ only when someone waits, so call them without holding it.
  std::vector<Reclaimer> reclaimers;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [id, r] : reclaimers_) reclaimers.push_back(r);
  }
  for (const auto& reclaim : reclaimers) {
    const std::uint64_t have = available();
    if (have >= bytes) break;
    reclaim(bytes - have);
  }
  return take(bytes, use);
}

std::optional<Reservation> MemoryBudget::try_reserve(std::uint64_t bytes, MemoryUse use, Reclaim reclaim) {
  if (cancelled_.load(std::memory_order_acquire)) throw Error(ErrorCode::kCancelled, "the memory budget was cancelled");
  if (!take_or_reclaim(bytes, use, reclaim)) return std::nullopt;
  return Reservation(this, bytes, use);
}

std::optional<Reservation> MemoryBudget::reserve(std::uint64_t bytes, MemoryUse use, Clock::time_point deadline) {
  Reservation r(this, 0, use);
  if (!grow(r, bytes, deadline)) {
    r.budget_ = nullptr;
    return std::nullopt;
  }
  return r;
}

bool MemoryBudget::try_grow(Reservation& r, std::uint64_t more, Reclaim reclaim) {
  if (cancelled_.load(std::memory_order_acquire)) throw Error(ErrorCode::kCancelled, "the memory budget was cancelled");
  if (!take_or_reclaim(more, r.use_, reclaim)) return false;
  r.bytes_ += more;
  return true;
}

bool MemoryBudget::grow(Reservation& r, std::uint64_t more, Clock::time_point deadline) {
  if (try_grow(r, more, Reclaim::kYes)) return true;
  if (limit_ != 0 && more > limit_) return false;
  waiters_.fetch_add(1, std::memory_order_acq_rel);
  std::unique_lock lock(mutex_);
  bool ok = false;
  while (true) {
    if (cancelled_.load(std::memory_order_acquire)) break;
    if (take(more, r.use_)) {
      ok = true;
      break;
    }
    if (released_.wait_until(lock, deadline) == std::cv_status::timeout) {
      ok = take(more, r.use_);
      break;
    }
  }
  lock.unlock();
  waiters_.fetch_sub(1, std::memory_order_acq_rel);
  if (cancelled_.load(std::memory_order_acquire) && !ok) throw Error(ErrorCode::kCancelled, "the memory budget was cancelled");
  if (ok) r.bytes_ += more;
  return ok;
}

void MemoryBudget::cancel() {
  cancelled_.store(true, std::memory_order_release);
  std::lock_guard lock(mutex_);
  released_.notify_all();
}

int MemoryBudget::add_reclaimer(Reclaimer reclaimer) {
  std::lock_guard lock(mutex_);
  reclaimers_.emplace_back(next_reclaimer_, std::move(reclaimer));
  return next_reclaimer_++;
}

void MemoryBudget::remove_reclaimer(int id) {
  std::lock_guard lock(mutex_);
  std::erase_if(reclaimers_, [id](const auto& entry) { return entry.first == id; });
}

}  // namespace sluice
