// MemoryBudget: every byte the pipeline holds, accounted against a limit the user sets (docs/design.md
// principle 3). Producers reserve before they allocate; a reservation that does not fit waits
// until releases make room (backpressure), or fails after a deadline, never over-commits. Caches
// are elastic: they register a reclaimer, and a waiting reservation asks them to give memory
// back before it waits. Transient reservations (memory one sample holds for a while) let a
// reservation wait without a deadline exactly as long as some release is still to come.
//
// A budget can be a part of a larger one (a training job's: sluice/train/job_plan.hpp): each
// pipeline of the job reserves in its own part, whose reservations are taken from the job's
// budget too. A part keeps its own usage, peaks and cancellation (a loader that stops wakes its
// own waiters, not the trainer's); reclaimers and waits are the whole job's, so the training
// allocator's growth can ask a pipeline's cache to give memory back, and a release anywhere in
// the job wakes a waiter anywhere in it.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
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
  kRemote,         // in-flight download buffers of remote shards and lists (docs/remote.md)
  // The uses above are a pipeline's; those below belong to the rest of a training job that shares
  // one budget with its pipelines (sluice/train/job_plan.hpp).
  kTraining,       // the training allocator's regions (tensors of the training step)
  kOffload,        // optimizer state offloaded to host memory
  kDeviceBatches,  // device copies of the batches (a pipeline's transfer ring, on the device)
  kCount,
};

// The uses a pipeline reserves (its Stats list these).
inline constexpr int kPipelineUseCount = static_cast<int>(MemoryUse::kRemote) + 1;

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
  // A part of `parent` (null: a budget of its own, as above): every reservation is taken from
  // both, so it fits this part's limit (0: none of its own) and what the parent has left. The
  // parent is kept alive by its parts.
  MemoryBudget(std::uint64_t limit, std::shared_ptr<MemoryBudget> parent);
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
  // Transient reservations held now, in the whole job (this budget's root and all its parts).
  int transients_held() const;

  // Wakes every waiter of this budget and its parts with kCancelled; later reservations fail
  // the same way. A parent's other parts go on.
  void cancel();

  // Registers an elastic holder (a cache); returns an id for remove_reclaimer. A part's
  // reclaimers may be asked by any reservation of the whole tree: by its own for its limit, by
  // any for the parent's. remove_reclaimer waits for a call in progress, so the holder may go
  // once it returns.
  int add_reclaimer(Reclaimer reclaimer);
  void remove_reclaimer(int id);

  std::uint64_t limit() const { return limit_; }
  std::uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  std::uint64_t peak() const { return peak_.load(std::memory_order_relaxed); }
  std::uint64_t used(MemoryUse use) const { return by_use_[index(use)].used.load(std::memory_order_relaxed); }
  std::uint64_t peak(MemoryUse use) const { return by_use_[index(use)].peak.load(std::memory_order_relaxed); }
  // limit - used, or UINT64_MAX when unlimited; for a part, the least of its own and its
  // parent's.
  std::uint64_t available() const;
  // Starts the peaks (overall and per use) again from the current use: a training job reports
  // each epoch's.
  void reset_peak();
  const std::shared_ptr<MemoryBudget>& parent() const { return parent_; }

 private:
  friend class Reservation;
  struct ReclaimerEntry;
  static std::size_t index(MemoryUse use) { return static_cast<std::size_t>(use); }
  MemoryBudget& root() { return parent_ ? parent_->root() : *this; }
  bool cancelled() const;
  bool take(std::uint64_t bytes, MemoryUse use);  // lock-free: true if it fitted
  void give_back(std::uint64_t bytes, MemoryUse use) noexcept;
  void notify_release() noexcept;  // on the root: a release anywhere may let a waiter through
  bool take_or_reclaim(std::uint64_t bytes, MemoryUse use, Reclaim reclaim);
  bool take_while_releases_pending(std::uint64_t bytes, MemoryUse use);
  void end_transient() noexcept;
  bool contains(const MemoryBudget* part) const;  // this budget or one of its parts
  std::uint64_t limit_or_max() const;              // the tightest limit on the way to the root

  struct PerUse {
    std::atomic<std::uint64_t> used{0};
    std::atomic<std::uint64_t> peak{0};
  };

  const std::uint64_t limit_;
  const std::shared_ptr<MemoryBudget> parent_;
  std::atomic<std::uint64_t> used_{0};
  std::atomic<std::uint64_t> peak_{0};
  std::array<PerUse, static_cast<std::size_t>(MemoryUse::kCount)> by_use_;

  // The root's: waiters and reclaimers of the whole tree; reservations that fit never take it.
  std::mutex mutex_;
  std::condition_variable released_;
  std::atomic<std::uint64_t> releases_{0};  // bumped by every release: a waiter's wake-up check
  std::atomic<int> waiters_{0};
  std::atomic<int> transients_{0};  // the root's: transient reservations of the tree (changed under mutex_)
  std::vector<std::shared_ptr<ReclaimerEntry>> reclaimers_;
  int next_reclaimer_ = 0;
  std::atomic<bool> cancelled_{false};  // this budget's own
};

}  // namespace sluice
