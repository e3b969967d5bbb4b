// BufferPool: a fixed number of growable buffers shared by worker threads. acquire() takes one
// from a lock-free free list (Boost.Lockfree, no mutex on the hot path) and the Lease returns it.
// The pool never holds more than `count` buffers, so its memory is bounded by count x the largest
// request, and bytes() says how much that is right now.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

#include "sluice/memory/aligned_buffer.hpp"

namespace sluice {

class BufferPool {
 public:
  class Lease;

  explicit BufferPool(int count);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // Takes a free buffer with capacity >= bytes (growing it if needed). Blocks (yielding) while all
  // buffers are leased; with one buffer per worker thread that never happens.
  Lease acquire(std::size_t bytes);

  int count() const { return static_cast<int>(buffers_.size()); }
  // Capacity currently held by all buffers, leased or not.
  std::size_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

 private:
  void give_back(int index) noexcept;

  struct FreeList;
  std::vector<AlignedBuffer> buffers_;
  std::unique_ptr<FreeList> free_;
  std::atomic<std::size_t> bytes_{0};
};

class BufferPool::Lease {
 public:
  Lease() = default;
  Lease(BufferPool* pool, int index) : pool_(pool), index_(index) {}
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  Lease(Lease&& other) noexcept : pool_(other.pool_), index_(other.index_) { other.pool_ = nullptr; }
  Lease& operator=(Lease&& other) noexcept {
    if (this != &other) {
      reset();
      pool_ = other.pool_;
      index_ = other.index_;
      other.pool_ = nullptr;
    }
    return *this;
  }
  ~Lease() { reset(); }

  AlignedBuffer& buffer() const { return pool_->buffers_[static_cast<std::size_t>(index_)]; }
  std::uint8_t* data() const { return buffer().data(); }
  explicit operator bool() const { return pool_ != nullptr; }

  void reset() noexcept {
    if (pool_ != nullptr) pool_->give_back(index_);
    pool_ = nullptr;
  }

 private:
  BufferPool* pool_ = nullptr;
  int index_ = 0;
};

}  // namespace sluice
