// Backing: where the training allocator's regions come from. The allocator asks for few, large
// regions (2 MiB and up) and carves them itself, so a backing is a thin wrapper over the system's
// allocator of last resort: aligned host memory on the CPU, cudaMalloc on a GPU (through the device
// module, so no CUDA type or header appears here). Tests supply their own to simulate a device
// that runs out.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "sluice/core/device_id.hpp"
#include "sluice/memory/budget.hpp"

namespace sluice {

class Backing {
 public:
  // Every region a backing returns is aligned to at least this: the allocator's 256-byte
  // granularity then keeps every block it hands out 256-byte aligned (what cuBLAS, cuDNN and
  // vectorised CPU kernels want).
  static constexpr std::size_t kAlignment = 256;

  virtual ~Backing() = default;

  // The device the memory lives on.
  virtual DeviceId device() const = 0;
  // "host (aligned operator new)", "cuda:0 (cudaMalloc)": for reports.
  virtual std::string describe() const = 0;
  // A region of `bytes` (> 0, a multiple of kAlignment), or nullptr when the memory is not
  // available: the allocator then reports out of memory. Throws sluice::Error only for failures
  // that are not a lack of memory (a broken driver).
  virtual void* allocate(std::size_t bytes) = 0;
  // Returns a region from allocate(), with the size it was allocated with.
  virtual void deallocate(void* ptr, std::size_t bytes) noexcept = 0;
};

// Host memory from ::operator new(std::align_val_t{256}, std::nothrow). Large regions are mmap'd
// by glibc, so pages not yet touched cost no RAM.
std::unique_ptr<Backing> make_host_backing();

// Device memory of CUDA device `index` from cudaMalloc / cudaFree. Throws sluice::Error
// (kInvalidArgument) when the device cannot be used here (no GPU, a build without CUDA), with the
// reason from require_device().
std::unique_ptr<Backing> make_cuda_backing(int index);

// Host memory for state a `device` context streams in and out (optimizer offload): page-locked
// (cudaHostAlloc, through sluice::PinnedBuffer) when `device` is a CUDA device, so copies from it
// are asynchronous; ordinary aligned memory for the host device. Its device() is host().
std::unique_ptr<Backing> make_pinned_host_backing(DeviceId device);

// Address space without memory, for planning (sluice/train/planner.hpp): host regions mmap'd with
// MAP_NORESERVE, committed only where written (src/train/alloc/meta_backing.cpp).
std::unique_ptr<Backing> make_address_space_backing();

// The host backing for sluice::host(), the CUDA backing for sluice::cuda(i).
std::unique_ptr<Backing> make_backing(DeviceId device);

// Regions of `inner` counted in a memory budget (a training job's: sluice/train/job_plan.hpp), as
// `use`. `floor` bytes are reserved at construction and held for the backing's life, used or not:
// the job's plan gives the training allocator its share before the pipelines start, so a cache
// cannot fill it. A region beyond the floor reserves the rest with Reclaim::kYes: a larger
// evaluation batch or a growing allocator takes memory back from the job's caches instead of
// failing, and gets nullptr (the allocator's out of memory) only when even they cannot give
// enough. Throws sluice::Error(kOutOfBudget) when the floor does not fit the budget now.
// One allocator's backing: calls are serialised by the allocator's lock. Pair it with
// RegionGrowth::kRequest past the floor: a doubling allocator first asks for twice its last region,
// and the caches would give up for that what the request itself does not need.
struct BudgetedBackingOptions {
  MemoryUse use = MemoryUse::kTraining;
  std::uint64_t floor = 0;
};
std::unique_ptr<Backing> make_budgeted_backing(std::unique_ptr<Backing> inner, std::shared_ptr<MemoryBudget> budget,
                                               BudgetedBackingOptions options = {});

}  // namespace sluice
