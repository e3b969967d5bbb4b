// The caching device pool: blocks are reused by rounded size, so a pipeline whose batches all
// have one size reaches a steady state with no cudaMalloc or cudaFree (both of which may
// synchronise the device). One mutex: allocations are per ring, not per sample.
#include "sluice/detail/device/device_pool.hpp"

#include <algorithm>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "device/cuda_backend.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"

namespace sluice {
namespace {

constexpr std::size_t kSmallGranularity = 512;
constexpr std::size_t kLargeGranularity = 2u << 20;
constexpr std::size_t kLargeThreshold = 1u << 20;
constexpr std::size_t kHostAlignment = 256;  // what cudaMalloc guarantees, kept on the host

class CachingPool final : public DevicePool {
 public:
  CachingPool(DeviceId device, CachingPoolOptions options) : device_(device), options_(options) {
    require_device(device);
  }
  CachingPool(const CachingPool&) = delete;
  CachingPool& operator=(const CachingPool&) = delete;
  ~CachingPool() override {
    for (auto& [size, blocks] : free_) {
      for (void* p : blocks) backend_free(p);
    }
    for (auto& [p, size] : live_) backend_free(p);
  }

  DeviceId device() const override { return device_; }

  void* allocate(std::size_t bytes) override {
    const std::size_t size = caching_pool_block_size(bytes);
    std::lock_guard lock(mutex_);
    void* p = nullptr;
    if (auto it = free_.find(size); it != free_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      stats_.cached_bytes -= size;
      ++stats_.cache_hits;
    } else {
      p = backend_alloc(size);
      if (p == nullptr && stats_.cached_bytes > 0) {
        release_cache();
        p = backend_alloc(size);
      }
      if (p == nullptr) {
        throw Error(ErrorCode::kOutOfBudget,
                    "device memory: cannot allocate " + format_bytes(size) + " on " + to_string(device_) +
                        " (this pool: " + format_bytes(stats_.in_use_bytes) + " in use, peak " +
                        format_bytes(stats_.peak_in_use_bytes) + "); lower the batch size or the prefetch depth");
      }
      ++stats_.backend_allocations;
      stats_.reserved_bytes += size;
    }
    live_.emplace(p, size);
    ++stats_.allocations;
    stats_.in_use_bytes += size;
    stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
    return p;
  }

  void deallocate(void* ptr) noexcept override {
    if (ptr == nullptr) return;
    std::lock_guard lock(mutex_);
    const auto it = live_.find(ptr);
    if (it == live_.end()) return;  // not ours: ignoring beats corrupting the cache
    const std::size_t size = it->second;
    live_.erase(it);
    stats_.in_use_bytes -= size;
    if (stats_.cached_bytes + size <= options_.max_cached_bytes) {
      try {
        free_[size].push_back(ptr);
        stats_.cached_bytes += size;
        return;
      } catch (...) {  // no memory for the cache's bookkeeping: give the block back instead
      }
    }
    backend_free(ptr);
    ++stats_.backend_frees;
    stats_.reserved_bytes -= size;
  }

  DevicePoolStats stats() const override {
    std::lock_guard lock(mutex_);
    return stats_;
  }

 private:
  void* backend_alloc(std::size_t size) {
    if (device_.is_cuda()) return device_detail::device_malloc(device_.index, size);
    return ::operator new(size, std::align_val_t{kHostAlignment}, std::nothrow);
  }

  void backend_free(void* p) noexcept {
    if (device_.is_cuda()) {
      device_detail::device_free(device_.index, p);
    } else {
      ::operator delete(p, std::align_val_t{kHostAlignment});
    }
  }

  void release_cache() noexcept {
    for (auto& [size, blocks] : free_) {
      for (void* p : blocks) {
        backend_free(p);
        ++stats_.backend_frees;
        stats_.reserved_bytes -= size;
      }
      blocks.clear();
    }
    stats_.cached_bytes = 0;
  }

  DeviceId device_;
  CachingPoolOptions options_;
  mutable std::mutex mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> free_;  // rounded size -> cached blocks
  std::unordered_map<void*, std::size_t> live_;               // block -> rounded size
  DevicePoolStats stats_;
};

}  // namespace

std::size_t caching_pool_block_size(std::size_t bytes) {
  bytes = std::max<std::size_t>(bytes, 1);
  const std::size_t g = bytes < kLargeThreshold ? kSmallGranularity : kLargeGranularity;
  return (bytes + g - 1) / g * g;
}

std::unique_ptr<DevicePool> make_caching_pool(DeviceId device, CachingPoolOptions options) {
  return std::make_unique<CachingPool>(device, options);
}

}  // namespace sluice
