// PinnedBuffer: page-locked host memory for batches on their way to a device. The DMA engine
// reads page-locked memory directly, so a copy from it is asynchronous and runs at the bus's
// speed; a copy from ordinary (pageable) memory is staged through a driver buffer and blocks.
// For a CUDA device it is cudaHostAlloc'd (or, when placed on a NUMA node, mmap'd, mbind'd and
// cudaHostRegister'd); for the host device, or a build without CUDA, it is ordinary aligned
// memory, so the same pipeline code runs everywhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "sluice/device/device.hpp"
#include "sluice/detail/device/numa.hpp"

namespace sluice {

struct PinnedOptions {
  // kNumaAuto: the device's node on a multi-node machine; kNumaNone: wherever the kernel puts it;
  // a node number: that node.
  int numa_node = kNumaAuto;
  // Write-combined pages: faster for the device to read on some platforms, very slow for the CPU
  // to read. Only for buffers the CPU writes and never reads back. cudaHostAlloc only: ignored
  // when the buffer is placed on a NUMA node (registered pages cannot be write-combined).
  bool write_combined = false;
};

class PinnedBuffer {
 public:
  // Allocations are whole pages.
  static constexpr std::size_t kGranularity = 4096;

  PinnedBuffer() = default;
  // Throws sluice::Error: kInvalidArgument for an unusable device, kOutOfBudget when the memory
  // cannot be allocated or locked.
  PinnedBuffer(DeviceId device, std::size_t bytes, PinnedOptions options = {});
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  PinnedBuffer(PinnedBuffer&& other) noexcept { swap(other); }
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept {
    PinnedBuffer(std::move(other)).swap(*this);
    return *this;
  }
  ~PinnedBuffer();

  // Bytes actually taken for a request: rounded up to whole pages (what a budget should count).
  static std::size_t footprint(std::size_t bytes);

  std::uint8_t* data() { return data_; }
  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::span<std::uint8_t> span() { return {data_, size_}; }
  DeviceId device() const { return device_; }
  // True when the pages are locked for DMA (a CUDA device); false for ordinary memory.
  bool pinned() const { return how_ == How::kCudaHostAlloc || how_ == How::kMmapRegistered; }
  // The node the pages were bound to, or kNumaNone.
  int numa_node() const { return numa_node_; }

  void reset() noexcept;
  void swap(PinnedBuffer& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(device_, other.device_);
    std::swap(how_, other.how_);
    std::swap(numa_node_, other.numa_node_);
  }

 private:
  enum class How : std::uint8_t { kNone, kNew, kMmap, kMmapRegistered, kCudaHostAlloc };

  std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  DeviceId device_ = host();
  How how_ = How::kNone;
  int numa_node_ = kNumaNone;
};

}  // namespace sluice
