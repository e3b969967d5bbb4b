// MemoryBudget: lock-free accounting for reservations that fit, a condition variable for those
// that wait, reclaimers asked before anyone waits; a part takes from its parent too.
#include "sluice/memory/budget.hpp"

#include <algorithm>
#include <limits>
#include <utility>

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
    case MemoryUse::kRemote: return "remote";
    case MemoryUse::kTraining: return "training";
    case MemoryUse::kOffload: return "offloaded_state";
    case MemoryUse::kDeviceBatches: return "device_batches";
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
    transient_ = other.transient_;
    other.budget_ = nullptr;
    other.bytes_ = 0;
    other.transient_ = false;
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
  if (budget_ != nullptr) {
    budget_->give_back(bytes_, use_);
    // After the bytes are back: a waiter that sees no transient left also sees their memory.
    if (transient_) budget_->end_transient();
  }
  budget_ = nullptr;
  bytes_ = 0;
  transient_ = false;
}

// A reclaimer and the lock that keeps it from being called after remove_reclaimer() returned.
struct MemoryBudget::ReclaimerEntry {
  // A constructor, not an aggregate: clang 14 (the fuzz build) has no parenthesised aggregate
  // initialisation for make_shared.
  ReclaimerEntry(const MemoryBudget* owner_, int id_, Reclaimer reclaim_)
      : owner(owner_), id(id_), reclaim(std::move(reclaim_)) {}
  const MemoryBudget* owner;
  int id;
  Reclaimer reclaim;
  std::mutex calling;
  bool removed = false;
};

MemoryBudget::MemoryBudget(std::uint64_t limit) : limit_(limit) {}

MemoryBudget::MemoryBudget(std::uint64_t limit, std::shared_ptr<MemoryBudget> parent)
    : limit_(limit), parent_(std::move(parent)) {}

std::uint64_t MemoryBudget::available() const {
  std::uint64_t have = std::numeric_limits<std::uint64_t>::max();
  if (limit_ != 0) {
    const std::uint64_t u = used();
    have = u >= limit_ ? 0 : limit_ - u;
  }
  return parent_ ? std::min(have, parent_->available()) : have;
}

bool MemoryBudget::cancelled() const {
  return cancelled_.load(std::memory_order_acquire) || (parent_ && parent_->cancelled());
}

bool MemoryBudget::contains(const MemoryBudget* part) const {
  for (; part != nullptr; part = part->parent_.get()) {
    if (part == this) return true;
  }
  return false;
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
  if (parent_ && !parent_->take(bytes, use)) {
    // The parent is full: undo, and wake whoever failed on this part while the bytes were in it.
    used_.fetch_sub(bytes, std::memory_order_acq_rel);
    root().notify_release();
    return false;
  }
  raise_peak(peak_, u + bytes);
  PerUse& per = by_use_[index(use)];
  raise_peak(per.peak, per.used.fetch_add(bytes, std::memory_order_relaxed) + bytes);
  return true;
}

void MemoryBudget::give_back(std::uint64_t bytes, MemoryUse use) noexcept {
  if (bytes == 0) return;
  used_.fetch_sub(bytes, std::memory_order_acq_rel);
  by_use_[index(use)].used.fetch_sub(bytes, std::memory_order_relaxed);
  if (parent_) {
    parent_->give_back(bytes, use);  // the root notifies
  } else {
    notify_release();
  }
}

void MemoryBudget::notify_release() noexcept {
  releases_.fetch_add(1, std::memory_order_seq_cst);
  if (waiters_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard lock(mutex_);  // pairs with the waiter's check under the lock: no lost wake-up
    released_.notify_all();
  }
}

bool MemoryBudget::take_or_reclaim(std::uint64_t bytes, MemoryUse use, Reclaim reclaim) {
  if (take(bytes, use)) return true;
  if (reclaim == Reclaim::kNo || bytes > limit_or_max()) return false;
  // Ask the elastic holders for the shortfall, without holding the root's lock: their releases
  // go through give_back, which takes it when someone waits.
  MemoryBudget& top = root();
  std::vector<std::shared_ptr<ReclaimerEntry>> entries;
  {
    std::lock_guard lock(top.mutex_);
    entries = top.reclaimers_;
  }
  for (const auto& entry : entries) {
    const std::uint64_t have = available();
    if (have >= bytes) break;
    // When this part's own limit is what binds, only its own holders can help.
    const bool own_limit_binds = limit_ != 0 && (used() > limit_ || limit_ - used() < bytes);
    if (own_limit_binds && !contains(entry->owner)) continue;
    std::lock_guard calling(entry->calling);
    if (!entry->removed) entry->reclaim(bytes - have);
  }
  return take(bytes, use);
}

std::uint64_t MemoryBudget::limit_or_max() const {
  std::uint64_t l = limit_ != 0 ? limit_ : std::numeric_limits<std::uint64_t>::max();
  return parent_ ? std::min(l, parent_->limit_or_max()) : l;
}

std::optional<Reservation> MemoryBudget::try_reserve(std::uint64_t bytes, MemoryUse use, Reclaim reclaim) {
  if (cancelled()) throw Error(ErrorCode::kCancelled, "the memory budget was cancelled");
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
  if (cancelled()) throw Error(ErrorCode::kCancelled, "the memory budget was cancelled");
  if (!take_or_reclaim(more, r.use_, reclaim)) return false;
  r.bytes_ += more;
  return true;
}

bool MemoryBudget::grow(Reservation& r, std::uint64_t more, Clock::time_point deadline) {
  if (try_grow(r, more, Reclaim::kYes)) return true;
  if (more > limit_or_max()) return false;
  // Waits on the root, where every release of the tree is announced. take() is tried without
  // the lock (a failed part's undo announces a release itself); `releases_`, read before the try
  // and checked again under the lock, catches a release in between.
  MemoryBudget& top = root();
  top.waiters_.fetch_add(1, std::memory_order_seq_cst);
  bool ok = false;
  while (!cancelled()) {
    const std::uint64_t seen = top.releases_.load(std::memory_order_seq_cst);
    if (take(more, r.use_)) {
      ok = true;
      break;
    }
    std::unique_lock lock(top.mutex_);
    const bool woken = top.released_.wait_until(lock, deadline, [&] {
      return top.releases_.load(std::memory_order_seq_cst) != seen || cancelled();
    });
    if (!woken) {
      lock.unlock();
      ok = take(more, r.use_);
      break;
    }
  }
  top.waiters_.fetch_sub(1, std::memory_order_seq_cst);
  if (!ok && cancelled()) throw Error(ErrorCode::kCancelled, "the memory budget was cancelled");
  if (ok) r.bytes_ += more;
  return ok;
}

bool MemoryBudget::take_while_releases_pending(std::uint64_t bytes, MemoryUse use) {
  if (cancelled()) throw Error(ErrorCode::kCancelled, "the memory budget was cancelled");
  if (take_or_reclaim(bytes, use, Reclaim::kYes)) return true;
  if (bytes > limit_or_max()) return false;
  // As grow(), on the root, where every release of the job is announced and the transient
  // reservations of all its parts are counted; but no deadline: the wait lasts while one of them
  // is held, since its release is still to come. end_transient() changes the count under the
  // root's lock after its bytes are back, so a check under the lock misses neither.
  MemoryBudget& top = root();
  top.waiters_.fetch_add(1, std::memory_order_seq_cst);
  bool ok = false;
  while (!cancelled()) {
    const std::uint64_t seen = top.releases_.load(std::memory_order_seq_cst);
    if (take(bytes, use)) {
      ok = true;
      break;
    }
    std::unique_lock lock(top.mutex_);
    if (top.transients_.load(std::memory_order_acquire) == 0) {
      lock.unlock();
      ok = take(bytes, use);  // the last transient may have gone just before the check
      break;
    }
    top.released_.wait(lock, [&] {
      return top.releases_.load(std::memory_order_seq_cst) != seen || cancelled() ||
             top.transients_.load(std::memory_order_acquire) == 0;
    });
  }
  top.waiters_.fetch_sub(1, std::memory_order_seq_cst);
  if (!ok && cancelled()) throw Error(ErrorCode::kCancelled, "the memory budget was cancelled");
  return ok;
}

std::optional<Reservation> MemoryBudget::reserve_transient(std::uint64_t bytes, MemoryUse use) {
  if (!take_while_releases_pending(bytes, use)) return std::nullopt;
  {
    MemoryBudget& top = root();
    std::lock_guard lock(top.mutex_);
    top.transients_.fetch_add(1, std::memory_order_acq_rel);
  }
  return Reservation(this, bytes, use, Reservation::Lifetime::kTransient);
}

bool MemoryBudget::grow_while_releases_pending(Reservation& r, std::uint64_t more) {
  if (!take_while_releases_pending(more, r.use_)) return false;
  r.bytes_ += more;
  return true;
}

int MemoryBudget::transients_held() const {
  const MemoryBudget* top = this;
  while (top->parent_) top = top->parent_.get();
  return top->transients_.load(std::memory_order_acquire);
}

void MemoryBudget::end_transient() noexcept {
  MemoryBudget& top = root();
  std::lock_guard lock(top.mutex_);
  top.transients_.fetch_sub(1, std::memory_order_acq_rel);
  top.released_.notify_all();
}

void MemoryBudget::cancel() {
  cancelled_.store(true, std::memory_order_release);
  MemoryBudget& top = root();
  std::lock_guard lock(top.mutex_);
  top.released_.notify_all();
}

void MemoryBudget::reset_peak() {
  peak_.store(used(), std::memory_order_relaxed);
  for (PerUse& per : by_use_) per.peak.store(per.used.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

int MemoryBudget::add_reclaimer(Reclaimer reclaimer) {
  MemoryBudget& top = root();
  std::lock_guard lock(top.mutex_);
  const int id = top.next_reclaimer_++;
  top.reclaimers_.push_back(std::make_shared<ReclaimerEntry>(this, id, std::move(reclaimer)));
  return id;
}

void MemoryBudget::remove_reclaimer(int id) {
  MemoryBudget& top = root();
  std::shared_ptr<ReclaimerEntry> entry;
  {
    std::lock_guard lock(top.mutex_);
    const auto it = std::find_if(top.reclaimers_.begin(), top.reclaimers_.end(),
                                 [&](const auto& e) { return e->id == id && e->owner == this; });
    if (it == top.reclaimers_.end()) return;
    entry = *it;
    top.reclaimers_.erase(it);
  }
  // A reservation that copied the list before the erase may be calling it now: wait for it.
  std::lock_guard calling(entry->calling);
  entry->removed = true;
}

}  // namespace sluice
