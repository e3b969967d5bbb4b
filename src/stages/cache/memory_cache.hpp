// MemoryCacheStore: the output of the stage before it (encoded bytes after read, or decoded images
// after decode_jpeg), per item, inside its share of the memory budget.
//
// It keeps what fits and does not churn: when the data set is larger than its share, the first
// items to arrive stay and the rest are read each epoch (with a shuffled order any policy hits the
// same fraction, and this one never evicts to insert). tf.data, by contrast, throws a partial
// cache away. Entries are given back only when working memory needs them (the budget's
// reclaimer), and a reader holds an entry while it uses it, so an eviction never frees memory
// under a decode.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "sluice/detail/memory/aligned_buffer.hpp"
#include "sluice/memory/budget.hpp"

namespace sluice::stages {

struct MemoryCacheStats {
  std::int64_t hits = 0;
  std::int64_t misses = 0;
  std::int64_t inserts = 0;
  std::int64_t rejected = 0;   // did not fit its share
  std::int64_t evicted = 0;    // given back to working memory
  std::int64_t entries = 0;
  std::uint64_t bytes = 0;     // payload bytes held
};

class MemoryCacheStore {
 public:
  // items: the data set's size (entries are indexed by item). max_bytes: its share (0: whatever
  // the budget leaves). The budget may be unlimited.
  MemoryCacheStore(std::int64_t items, std::uint64_t max_bytes, MemoryBudget& budget);
  ~MemoryCacheStore();
  MemoryCacheStore(const MemoryCacheStore&) = delete;
  MemoryCacheStore& operator=(const MemoryCacheStore&) = delete;

  // A held entry: its bytes stay valid until the handle is destroyed.
  class Handle {
   public:
    Handle() = default;
    Handle(Handle&& other) noexcept : slot_(other.slot_) { other.slot_ = nullptr; }
    Handle& operator=(Handle&& other) noexcept;
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    ~Handle();
    explicit operator bool() const { return slot_ != nullptr; }
    std::span<const std::uint8_t> bytes() const;

   private:
    friend class MemoryCacheStore;
    struct Slot;
    explicit Handle(Slot* slot) : slot_(slot) {}
    Slot* slot_ = nullptr;
  };

  // Thread-safe; lock-free for readers. An empty handle is a miss.
  Handle lookup(std::int64_t item);
  // Thread-safe. Copies `bytes` in if it fits the share without waiting; false otherwise.
  bool insert(std::int64_t item, std::span<const std::uint8_t> bytes);

  MemoryCacheStats stats() const;

 private:
  std::uint64_t reclaim(std::uint64_t bytes);

  std::vector<Handle::Slot> slots_;
  std::uint64_t max_bytes_;
  MemoryBudget& budget_;
  int reclaimer_id_ = -1;
  std::atomic<std::uint64_t> bytes_{0};
  std::atomic<std::int64_t> hits_{0};
  std::atomic<std::int64_t> misses_{0};
  std::atomic<std::int64_t> inserts_{0};
  std::atomic<std::int64_t> rejected_{0};
  std::atomic<std::int64_t> evicted_{0};
  std::atomic<std::int64_t> reclaim_cursor_{0};
};

}  // namespace sluice::stages
