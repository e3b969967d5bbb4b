// DevicePool: where device memory for batches comes from. The interface is deliberately small
// (allocate, deallocate, stats) so the training core's best-fit-with-coalescing allocator can
// replace the simple caching pool here without the pipeline noticing: a pipeline and a model then
// share one pool and one account of device memory.
//
// Stream order is the caller's business: deallocate() may be called only once no submitted work
// still uses the memory (the transfer ring guarantees it with its events). The caching pool keeps
// freed blocks for reuse by the same rounded size, so a steady pipeline calls cudaMalloc only
// while it warms up; on the host device the "device memory" is ordinary aligned memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <utility>

#include "sluice/device/device.hpp"

namespace sluice {

struct DevicePoolStats {
  std::uint64_t in_use_bytes = 0;         // handed out and not yet returned (rounded sizes)
  std::uint64_t peak_in_use_bytes = 0;
  std::uint64_t cached_bytes = 0;         // returned, kept for reuse
  std::uint64_t reserved_bytes = 0;       // taken from the device: in use + cached
  std::uint64_t allocations = 0;          // allocate() calls that succeeded
  std::uint64_t cache_hits = 0;           // ... of which served from the cache
  std::uint64_t backend_allocations = 0;  // cudaMalloc (or host) calls
  std::uint64_t backend_frees = 0;
};

class DevicePool {
 public:
  virtual ~DevicePool() = default;

  virtual DeviceId device() const = 0;
  // Device memory for `bytes` (> 0), aligned to at least 256 bytes. Throws
  // sluice::Error(kOutOfBudget) when the device has no room, with the pool's numbers.
  virtual void* allocate(std::size_t bytes) = 0;
  // Returns memory from allocate(); nullptr is ignored. No submitted work may still use it.
  virtual void deallocate(void* ptr) noexcept = 0;
  virtual DevicePoolStats stats() const = 0;
};

struct CachingPoolOptions {
  // Freed blocks kept for reuse at most; beyond it they go back to the device.
  std::uint64_t max_cached_bytes = std::numeric_limits<std::uint64_t>::max();
};

// The pool the pipeline uses until the training core provides its own. Thread-safe. Blocks are
// rounded up (512 B below 1 MiB, 2 MiB above) and reused by rounded size; when the device is
// full, the cache is released and the allocation retried once. Destroying the pool frees all its
// memory, blocks still in use included: it must outlive its users.
std::unique_ptr<DevicePool> make_caching_pool(DeviceId device, CachingPoolOptions options = {});

// Rounded size the caching pool takes for a request of `bytes`.
std::size_t caching_pool_block_size(std::size_t bytes);

// One block of a pool, returned on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DevicePool& pool, std::size_t bytes) : pool_(&pool), data_(pool.allocate(bytes)), size_(bytes) {}
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept { swap(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    DeviceBuffer(std::move(other)).swap(*this);
    return *this;
  }
  ~DeviceBuffer() { reset(); }

  void* data() const { return data_; }
  std::size_t size() const { return size_; }
  void reset() noexcept {
    if (pool_ != nullptr) pool_->deallocate(data_);
    pool_ = nullptr;
    data_ = nullptr;
    size_ = 0;
  }
  void swap(DeviceBuffer& other) noexcept {
    std::swap(pool_, other.pool_);
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
  }

 private:
  DevicePool* pool_ = nullptr;
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace sluice
