// The pinned host backing: sluice::PinnedBuffer regions, kept by address until returned.
#include <map>
#include <mutex>

#include "sluice/core/error.hpp"
#include "sluice/detail/device/pinned.hpp"
#include "sluice/train/backing.hpp"

namespace sluice {
namespace {

class PinnedHostBacking final : public Backing {
 public:
  explicit PinnedHostBacking(DeviceId device) : device_(device) {}
  DeviceId device() const override { return host(); }
  std::string describe() const override {
    return device_.is_cuda() ? "host, pinned for " + to_string(device_) + " (cudaHostAlloc)" : "host (aligned operator new)";
  }
  // PinnedBuffer throws kOutOfBudget when the memory cannot be had or locked: that is the
  // allocator's out of memory (nullptr); anything else propagates.
  void* allocate(std::size_t bytes) override {
    PinnedBuffer buffer;
    try {
      buffer = PinnedBuffer(device_, bytes, PinnedOptions{.numa_node = kNumaNone});
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kOutOfBudget) return nullptr;
      throw;
    }
    void* p = buffer.data();
    std::lock_guard lock(mutex_);
    regions_.emplace(p, std::move(buffer));
    return p;
  }
  void deallocate(void* ptr, std::size_t) noexcept override {
    std::lock_guard lock(mutex_);
    regions_.erase(ptr);
  }

 private:
  DeviceId device_;
  std::mutex mutex_;
  std::map<void*, PinnedBuffer> regions_;
};

}  // namespace

std::unique_ptr<Backing> make_pinned_host_backing(DeviceId device) { return std::make_unique<PinnedHostBacking>(device); }

}  // namespace sluice
