// MemoryBudget: every byte the pipeline holds, accounted against a limit the user sets (DESIGN.md
// principle 3). Producers reserve before they allocate; a reservation that does not fit waits
// until releases make room (backpressure), or fails after a deadline, never over-commits. Caches
// are elastic: they register a reclaimer, and a waiting reservation asks them to give memory
// back before it waits. Transient reservations (memory one sample holds for a while) let a
// reservation wait without a deadline exactly as long as some release is still to come.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

namespace sluice {

// What a reservation is for; the budget keeps usage and peaks per use.
enum class MemoryUse : std::uint8_t {
  kReadBuffers,    // encoded file bytes, per worker
  kDecodeBuffers,  // decoded regions, resampled samples and scratch, per worker
  kShuffle,        // the epoch order and shuffle buffer (indices)
  kCache,          // the memory cache
  kBatches,        // the batch ring (filling, ready and held batches)
  kPinned,         // page-locked batch slots for the device
  kItems,          // the item table: the data set's names, labels and tar member offsets
  kCount,
};

std::string_view to_string(MemoryUse use);

class MemoryBudget;

// Bytes held against a budget; returns them when destroyed (or reset), waking waiters.
class Reservation {
 public:
  Reservation() = default;
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;
  Reservation(Reservation&& other) noexcept { *this = std::move(other); }
  Reservation& operator=(Reservation&& other) noexcept;
  ~Reservation() { reset(); }

  std::uint64_t bytes() const { return bytes_; }
  MemoryUse use() const { return use_; }
  bool transient() const { return transient_; }
  explicit operator bool() const { return budget_ != nullptr; }

  // Gives back `bytes` of this reservation (or all of it).
  void shrink(std::uint64_t bytes);
  void reset();

 private:
  friend class MemoryBudget;
  enum class Lifetime : std::uint8_t { kHeld, kTransient };
  Reservation(MemoryBudget* budget, std::uint64_t bytes, MemoryUse use, Lifetime lifetime = Lifetime::kHeld)
      : budget_(budget), bytes_(bytes), use_(use), transient_(lifetime == Lifetime::kTransient) {}

  MemoryBudget* budget_ = nullptr;
  std::uint64_t bytes_ = 0;
  MemoryUse use_ = MemoryUse::kBatches;
  bool transient_ = false;  // made by reserve_transient: its release is one waiters count on
};

// Whether a reservation that does not fit may ask the elastic holders (caches) to give memory
// back. Working memory that a sample needs does; growth that is itself elastic (more cache, a
// deeper prefetch) does not, or caches and prefetch would just trade places.
enum class Reclaim : std::uint8_t { kNo, kYes };

class MemoryBudget {
 public:
  using Clock = std::chrono::steady_clock;
  // Frees up to `bytes` (reservations it holds) and returns how many it freed.
  using Reclaimer = std::function<std::uint64_t(std::uint64_t bytes)>;

  // limit 0: unlimited (every reservation succeeds; usage is still accounted).
  explicit MemoryBudget(std::uint64_t limit = 0);
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  // Reserves now if it fits (with kYes, after asking the reclaimers), else nullopt. Never blocks.
  std::optional<Reservation> try_reserve(std::uint64_t bytes, MemoryUse use, Reclaim reclaim = Reclaim::kNo);
  // Reclaims, then waits until it fits or the deadline passes (nullopt), or cancel() (throws
  // sluice::Error kCancelled). A request larger than the whole limit fails at once.
  std::optional<Reservation> reserve(std::uint64_t bytes, MemoryUse use, Clock::time_point deadline);
  // An empty reservation for `use`, to grow later.
  Reservation empty(MemoryUse use) { return Reservation(this, 0, use); }
  // Adds bytes to an existing reservation on the same terms as try_reserve / reserve.
  bool try_grow(Reservation& r, std::uint64_t more, Reclaim reclaim = Reclaim::kNo);
  bool grow(Reservation& r, std::uint64_t more, Clock::time_point deadline);

  // Working memory one sample holds and gives back when it is done (a worker's memory beyond its
  // planned share). Reclaims, then waits without a deadline while another transient reservation
  // is held, since its release may make room; nullopt when none is held and the bytes still do
  // not fit (nothing else gives memory back while a pipeline runs: waiting could last forever).
  // Throws kCancelled after cancel().
  std::optional<Reservation> reserve_transient(std::uint64_t bytes, MemoryUse use);
  // Grows `r` on the same terms (the growth stays with r until r is released).
  bool grow_while_releases_pending(Reservation& r, std::uint64_t more);
  // Transient reservations held now.
  int transients_held() const { return transients_.load(std::memory_order_acquire); }

  // Wakes every waiter with kCancelled; later reservations fail the same way.
  void cancel();

  // Registers an elastic holder (a cache); returns an id for remove_reclaimer.
  int add_reclaimer(Reclaimer reclaimer);
  void remove_reclaimer(int id);

  std::uint64_t limit() const { return limit_; }
  std::uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  std::uint64_t peak() const { return peak_.load(std::memory_order_relaxed); }
  std::uint64_t used(MemoryUse use) const { return by_use_[index(use)].used.load(std::memory_order_relaxed); }
  std::uint64_t peak(MemoryUse use) const { return by_use_[index(use)].peak.load(std::memory_order_relaxed); }
  // limit - used, or UINT64_MAX when unlimited.
  std::uint64_t available() const;

 private:
  friend class Reservation;
  static std::size_t index(MemoryUse use) { return static_cast<std::size_t>(use); }
  bool take(std::uint64_t bytes, MemoryUse use);  // lock-free: true if it fitted
  void give_back(std::uint64_t bytes, MemoryUse use) noexcept;
  bool take_or_reclaim(std::uint64_t bytes, MemoryUse use, Reclaim reclaim);
  bool take_while_releases_pending(std::uint64_t bytes, MemoryUse use);
  void end_transient() noexcept;

  struct PerUse {
    std::atomic<std::uint64_t> used{0};
    std::atomic<std::uint64_t> peak{0};
  };

  const std::uint64_t limit_;
  std::atomic<std::uint64_t> used_{0};
  std::atomic<std::uint64_t> peak_{0};
  std::array<PerUse, static_cast<std::size_t>(MemoryUse::kCount)> by_use_;

  std::mutex mutex_;  // waiters and reclaimers only; reservations that fit never take it
  std::condition_variable released_;
  std::atomic<bool> cancelled_{false};
  std::atomic<int> waiters_{0};
  std::atomic<int> transients_{0};  // transient reservations held (changed under mutex_)
  std::vector<std::pair<int, Reclaimer>> reclaimers_;
  int next_reclaimer_ = 0;
};

}  // namespace sluice
