// PinnedBuffer's allocation. Three ways, chosen by device and NUMA placement:
//   CUDA device, no placement: cudaHostAlloc (portable: usable from every device's context);
//   placement on a node:       mmap, mbind to the node before any page is touched, then (CUDA)
//                              cudaHostRegister, which faults the pages in under that policy;
//   host device:               4 KiB-aligned operator new (seen by the allocation test like any
//                              other sluice allocation).
#include "sluice/detail/device/pinned.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "device/cuda_backend.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"

namespace sluice {

std::size_t PinnedBuffer::footprint(std::size_t bytes) {
  return (bytes + kGranularity - 1) / kGranularity * kGranularity;
}

PinnedBuffer::PinnedBuffer(DeviceId device, std::size_t bytes, PinnedOptions options) : device_(device) {
  require_device(device);
  if (bytes == 0) return;
  const std::size_t size = footprint(bytes);
  const int node = resolve_numa_node(device, options.numa_node);
  if (node >= 0) {
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      throw Error(ErrorCode::kOutOfBudget, "pinned memory: mmap of " + format_bytes(size) + " failed: " +
                                               std::strerror(errno));
    }
    if (bind_memory_to_numa_node(p, size, node)) numa_node_ = node;
    if (device.is_cuda()) {
      try {
        device_detail::host_register(device.index, p, size);
      } catch (...) {
        munmap(p, size);
        throw;
      }
      how_ = How::kMmapRegistered;
    } else {
      how_ = How::kMmap;
    }
    data_ = static_cast<std::uint8_t*>(p);
  } else if (device.is_cuda()) {
    data_ = static_cast<std::uint8_t*>(device_detail::host_alloc(device.index, size, options.write_combined));
    how_ = How::kCudaHostAlloc;
  } else {
    try {
      data_ = static_cast<std::uint8_t*>(::operator new(size, std::align_val_t{kGranularity}));
    } catch (const std::bad_alloc&) {
      throw Error(ErrorCode::kOutOfBudget, "host memory: cannot allocate " + format_bytes(size));
    }
    how_ = How::kNew;
  }
  size_ = size;
}

PinnedBuffer::~PinnedBuffer() { reset(); }

void PinnedBuffer::reset() noexcept {
  switch (how_) {
    case How::kNone: break;
    case How::kNew: ::operator delete(data_, std::align_val_t{kGranularity}); break;
    case How::kMmap: munmap(data_, size_); break;
    case How::kMmapRegistered:
      device_detail::host_unregister(device_.index, data_);
      munmap(data_, size_);
      break;
    case How::kCudaHostAlloc: device_detail::host_free(device_.index, data_); break;
  }
  data_ = nullptr;
  size_ = 0;
  how_ = How::kNone;
  numa_node_ = kNumaNone;
}

}  // namespace sluice
