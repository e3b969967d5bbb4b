// The allocator's backings: aligned host memory, and cudaMalloc through the device module's CUDA
// backend (device/cuda_backend.hpp), which is the one place that includes CUDA headers. A build
// without CUDA links the backend's stub, and make_cuda_backing() fails in require_device() first.
#include "sluice/train/backing.hpp"

#include <new>

#include "device/cuda_backend.hpp"
#include "sluice/device/device.hpp"

namespace sluice {
namespace {

class HostBacking final : public Backing {
 public:
  DeviceId device() const override { return host(); }
  std::string describe() const override { return "host (aligned operator new)"; }
  void* allocate(std::size_t bytes) override {
    return ::operator new(bytes, std::align_val_t{kAlignment}, std::nothrow);
  }
  void deallocate(void* ptr, std::size_t) noexcept override {
    ::operator delete(ptr, std::align_val_t{kAlignment});
  }
};

class CudaBacking final : public Backing {
 public:
  explicit CudaBacking(int index) : index_(index) {}
  DeviceId device() const override { return cuda(index_); }
  std::string describe() const override { return to_string(cuda(index_)) + " (cudaMalloc)"; }
  // cudaMalloc aligns to at least 256 bytes; the backend returns nullptr when the device is full
  // and throws for every other CUDA error.
  void* allocate(std::size_t bytes) override { return device_detail::device_malloc(index_, bytes); }
  void deallocate(void* ptr, std::size_t) noexcept override { device_detail::device_free(index_, ptr); }

 private:
  int index_;
};

}  // namespace

std::unique_ptr<Backing> make_host_backing() { return std::make_unique<HostBacking>(); }

std::unique_ptr<Backing> make_cuda_backing(int index) {
  require_device(cuda(index));
  return std::make_unique<CudaBacking>(index);
}

std::unique_ptr<Backing> make_backing(DeviceId device) {
  if (device.is_cuda()) return make_cuda_backing(device.index);
  return make_host_backing();
}

}  // namespace sluice
