// EventCounter: a counter one thread waits on for a change, with or without a time limit; any
// thread bumps it. std::atomic::wait has no time limit, and the consumer's wait for a batch needs
// one: a caller that can only poll for its cancellation (Python's signal handlers run only when
// the waiting thread checks for them) wakes every interval to look.
//
// A bump is one atomic add plus, only while someone waits, a notify under the mutex. The waiter
// registers (waiters_) before it reads the value under the mutex, and a bump adds before it reads
// waiters_ (both sequentially consistent), so either the bump sees the waiter and notifies under
// the mutex, or the waiter sees the new value: no wakeup is lost.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace sluice::runtime {

class EventCounter {
 public:
  std::uint32_t value() const { return value_.load(std::memory_order_acquire); }

  void bump() {
    value_.fetch_add(1, std::memory_order_seq_cst);
    if (waiters_.load(std::memory_order_seq_cst) == 0) return;
    std::lock_guard lock(mutex_);
    wake_.notify_all();
  }

  // Waits until value() != seen.
  void wait(std::uint32_t seen) const {
    Registration registration(waiters_);
    std::unique_lock lock(mutex_);
    wake_.wait(lock, [&] { return changed(seen); });
  }

  // Waits until value() != seen or `limit` passed; true when it changed.
  bool wait_for(std::uint32_t seen, std::chrono::milliseconds limit) const {
    Registration registration(waiters_);
    std::unique_lock lock(mutex_);
    return wake_.wait_for(lock, limit, [&] { return changed(seen); });
  }

 private:
  struct Registration {
    explicit Registration(std::atomic<int>& w) : waiters(w) { waiters.fetch_add(1, std::memory_order_seq_cst); }
    ~Registration() { waiters.fetch_sub(1, std::memory_order_seq_cst); }
    std::atomic<int>& waiters;
  };
  bool changed(std::uint32_t seen) const { return value_.load(std::memory_order_seq_cst) != seen; }

  std::atomic<std::uint32_t> value_{0};
  mutable std::atomic<int> waiters_{0};
  mutable std::mutex mutex_;
  mutable std::condition_variable wake_;
};

}  // namespace sluice::runtime
