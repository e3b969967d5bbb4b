// Allocator: the training core's best-fit-with-coalescing allocator (docs/design.md, the training core),
// after TensorFlow's BFC design. Tensors live in a few large regions obtained from a Backing
// (cudaMalloc on a GPU, aligned host memory on the CPU); the allocator carves them into chunks.
//
//  - Sizes are rounded up to 256 B. Free chunks sit in 21 bins by size: bin k holds chunks of
//    [256 B * 2^k, 256 B * 2^(k+1)), the last (k = 20, from 256 MiB) is unbounded.
//  - Best fit: the smallest free chunk that fits, searching from the request's bin upwards; equal
//    sizes go to the lower address, which packs live blocks towards region starts.
//  - Split: a chunk larger than the request is split whenever the remainder is at least 256 B,
//    i.e. always (every size is a multiple of 256). Keeping a remainder inside the live block
//    would never make memory usable that a split leaves unusable (the remainder coalesces back
//    when its neighbour is freed), and it keeps in-use bytes equal to the rounded requests, so
//    the profiler's per-category bytes and the planner's predictions match the allocator exactly.
//    TensorFlow's rule (split only when the chunk is twice the request or 128 MiB would be
//    wasted) saves a chunk record now and then at the price of hidden waste; we take the record.
//  - Coalesce: the chunks of a region form a doubly linked list by address; a freed chunk merges
//    with free neighbours at once, so no two free chunks are ever adjacent.
//  - Growth (AllocatorMode::kGrow): the first region is 2 MiB, each new one twice the last,
//    doubled further until the request fits, capped by `limit` (0: none). If the backing refuses
//    that size, a region of just the request is tried before giving up. With
//    RegionGrowth::kRequest every region after the first is just the request: a training job's
//    allocator (sluice/train/job_plan.hpp) starts with its planned region, and anything past it
//    is taken back from the job's caches, which should give up no more than the request needs.
//    Preallocation (kPreallocate): one region of `limit` at construction, never more; what a
//    GPU job that owns its device wants (predictable, no cudaMalloc after start-up).
//  - Out of memory throws sluice::OutOfMemory (sluice/train/out_of_memory.hpp) whose message is a
//    report: the request, the stats, a per-bin table and an occupancy map. A failed call leaves
//    the allocator as it found it.
//
// Thread safety: every public method takes one mutex. The critical sections are short (a bin
// lookup, a few list splices, a hash-map update: about 100 ns), training allocates per op rather
// than per element, and best fit and coalescing need a global view of each region that sharding
// by thread would give up; TensorFlow and PyTorch's caching allocator make the same choice. In
// steady state the allocator itself calls no malloc: the nodes of its bins and of its live-block
// map are recycled.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "sluice/core/device_id.hpp"
#include "sluice/train/backing.hpp"
#include "sluice/train/category.hpp"

namespace sluice {

enum class AllocatorMode : std::uint8_t {
  kGrow,         // regions as needed: 2 MiB, then doubling, up to `limit` when set
  kPreallocate,  // one region of `limit` at construction; never grows
};

// kGrow: how the regions after the first are sized.
enum class RegionGrowth : std::uint8_t {
  kDoubling,  // twice the last (at least the request): few regions, up to half of them free
  kRequest,   // the request alone: a region per growth, nothing asked for beyond the need
};

struct AllocatorOptions {
  AllocatorMode mode = AllocatorMode::kGrow;
  // kGrow: the most the regions may add up to (0: no limit). kPreallocate: the size of the one
  // region (required). Rounded down to 256 B.
  std::uint64_t limit = 0;
  // kGrow: the size of the first region; each later one doubles the last. Rounded up to 256 B.
  std::uint64_t initial_region_bytes = std::uint64_t{2} << 20;
  RegionGrowth growth = RegionGrowth::kDoubling;
  // Names the allocator in reports ("activations arena").
  std::string name = "allocator";
};

struct CategoryStats {
  std::uint64_t in_use_bytes = 0;
  std::uint64_t peak_in_use_bytes = 0;  // since construction or reset_peak()
  std::uint64_t live_allocations = 0;
};

struct AllocatorStats {
  std::uint64_t in_use_bytes = 0;        // live blocks: requests rounded up to 256 B
  std::uint64_t requested_bytes = 0;     // live blocks as requested
  std::uint64_t peak_in_use_bytes = 0;   // since construction or reset_peak()
  std::uint64_t reserved_bytes = 0;      // sum of the regions
  std::uint64_t free_bytes = 0;          // reserved - in use
  std::uint64_t largest_free_block = 0;  // the largest request that fits without growing
  // (free - largest free) / free: 0 when all free memory is one block (or nothing is free),
  // towards 1 when it is scattered in small pieces.
  double fragmentation = 0.0;
  std::uint64_t live_allocations = 0;
  std::uint64_t total_allocations = 0;   // successful allocate() calls since construction
  std::uint64_t regions = 0;
  std::array<CategoryStats, kTensorCategoryCount> by_category{};

  const CategoryStats& category(TensorCategory c) const { return by_category[index_of(c)]; }
};

// One allocation or deallocation as an AllocatorObserver sees it, with the totals after it.
enum class AllocatorEvent : std::uint8_t { kAllocate, kDeallocate };
struct AllocatorEventInfo {
  AllocatorEvent event = AllocatorEvent::kAllocate;
  std::uint64_t bytes = 0;                  // the block's size (the request rounded up)
  TensorCategory category = TensorCategory::kWorkspace;
  std::uint64_t in_use_bytes = 0;           // all categories, after the event
  std::uint64_t category_in_use_bytes = 0;  // this category, after the event
  std::uint64_t reserved_bytes = 0;         // the regions, after the event
};

// Told of every allocation and deallocation (the profiler, sluice/train/profiler.hpp). Called
// under the allocator's lock, in order: it must be quick and must not call the allocator.
class AllocatorObserver {
 public:
  virtual ~AllocatorObserver() = default;
  virtual void on_allocator_event(const AllocatorEventInfo& info) noexcept = 0;
};

struct AllocatorRegion {
  const void* base = nullptr;
  std::uint64_t bytes = 0;
};

class Allocator {
 public:
  static constexpr std::size_t kGranularity = 256;  // sizes round up to this; blocks align to it
  static constexpr int kBinCount = 21;

  // The bin a free chunk of `bytes` (a multiple of 256, > 0) belongs to.
  static int bin_of(std::uint64_t bytes);
  // `bytes` rounded up to the granularity; a request of 0 takes one granule (a unique pointer).
  static std::uint64_t rounded_size(std::uint64_t bytes);

  // Throws sluice::Error(kInvalidArgument) for a preallocating allocator without a limit, and
  // sluice::OutOfMemory when the backing cannot provide the preallocated region.
  Allocator(std::unique_ptr<Backing> backing, AllocatorOptions options = {});
  // On make_backing(device): throws as require_device() does when the device is not usable.
  explicit Allocator(DeviceId device, AllocatorOptions options = {});
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;
  // Returns every region to the backing, live blocks included: the allocator must outlive every
  // tensor it holds.
  ~Allocator();

  // A block of at least `bytes`, 256-byte aligned, accounted to `category`. Throws
  // sluice::OutOfMemory (ErrorCode::kOutOfBudget) with a report when it cannot be had.
  void* allocate(std::size_t bytes, TensorCategory category);
  // Frees a block from allocate(); nullptr is ignored. Throws sluice::Error(kInvalidArgument)
  // for a pointer this allocator did not hand out or already took back (a double free).
  void deallocate(void* ptr);

  // The size of the block at `ptr` (its request rounded up), or 0 when `ptr` is not a live block
  // of this allocator.
  std::uint64_t allocated_size(const void* ptr) const;
  bool owns(const void* ptr) const { return allocated_size(ptr) != 0; }

  AllocatorStats stats() const;
  // Starts the peaks (overall and per category) again from the current use.
  void reset_peak();
  // Returns regions that are entirely free to the backing (grow mode; a preallocated region is
  // kept). Returns the bytes released. Later growth continues the doubling where it was.
  std::uint64_t release_free_regions();
  // The next region becomes the one a new allocator would take after growing to the regions still
  // held (none, after release_free_regions() in grow mode: initial_region_bytes again; a CUDA
  // context's cuBLAS workspace, held from setup: the region after it). The batch-size search
  // starts each trial so, which makes trials, the planner's dry runs (which take the same
  // setup-time blocks first) and a new run alike. Returns whether the next region's size changed.
  bool reset_growth();

  // The stats, the per-bin table and the occupancy map: the OOM report without a request. At
  // most 60 lines.
  std::string report() const;
  // Checks every structural invariant (chunks tile their regions, links agree, no two free
  // chunks adjacent, each free chunk in its bin, the live map and the stats match the chunks);
  // throws sluice::Error(kInternal) naming the first broken one. O(chunks): for tests.
  void check_invariants() const;

  std::vector<AllocatorRegion> regions() const;
  // Every later allocate() and deallocate() reports to `observer` (nullptr: none, the default;
  // an unset observer costs one pointer test). The observer must outlive its registration.
  void set_observer(AllocatorObserver* observer);
  DeviceId device() const { return backing_->device(); }
  const AllocatorOptions& options() const { return options_; }

 private:
  using Handle = std::uint32_t;
  static constexpr Handle kNone = 0xffffffffu;

  struct Chunk {
    std::uintptr_t addr = 0;
    std::uint64_t size = 0;       // a multiple of 256
    std::uint64_t requested = 0;  // in use: the size asked for
    Handle prev = kNone;          // neighbours in the region, by address
    Handle next = kNone;
    bool in_use = false;
    TensorCategory category = TensorCategory::kWorkspace;
  };
  struct Region {
    std::uintptr_t base = 0;
    std::uint64_t size = 0;
    Handle first = kNone;
  };
  // A free chunk's place in its bin: ordered by size, then address (best fit, ties low).
  struct FreeKey {
    std::uint64_t size;
    std::uintptr_t addr;
    Handle chunk;
    bool operator<(const FreeKey& o) const { return size != o.size ? size < o.size : addr < o.addr; }
  };
  using Bin = std::set<FreeKey>;
  using LiveMap = std::unordered_map<std::uintptr_t, Handle>;

  // allocator.cpp
  void preallocate();
  void* allocate_locked(std::uint64_t requested, std::uint64_t rounded, TensorCategory category);
  Handle find_best_fit(std::uint64_t rounded) const;
  Handle grow(std::uint64_t rounded, std::string* why);
  void reserve_spares(std::size_t chunks);
  Handle take_handle();
  void release_handle(Handle h);
  void bin_insert(Handle h);
  void bin_erase(Handle h);
  void use_chunk(Handle h, std::uint64_t requested, std::uint64_t rounded, TensorCategory category);
  Handle add_region(std::uintptr_t base, std::uint64_t size);
  void remove_region(std::size_t index);
  std::uint64_t largest_free_locked() const;
  AllocatorStats stats_locked() const;

  // allocator_report.cpp
  [[noreturn]] void throw_out_of_memory(std::uint64_t requested, std::uint64_t rounded,
                                        std::optional<TensorCategory> category, const std::string& why) const;
  std::string report_locked(const std::string& request_lines) const;

  std::unique_ptr<Backing> backing_;
  AllocatorOptions options_;
  mutable std::mutex mutex_;

  std::vector<Chunk> chunks_;        // by handle; free slots in free_handles_
  std::vector<Handle> free_handles_;
  std::vector<Region> regions_;      // by base address
  std::array<Bin, kBinCount> bins_;
  std::uint32_t nonempty_bins_ = 0;  // bit k: bins_[k] has a chunk
  LiveMap live_;                     // block address -> chunk
  // Recycled nodes: one bin node per chunk slot (a used chunk's waits here), and live-map nodes
  // of freed blocks. They make the mutations after an allocation's preparation allocation-free,
  // hence unable to fail halfway.
  std::vector<Bin::node_type> spare_bin_nodes_;
  std::vector<LiveMap::node_type> spare_live_nodes_;

  std::uint64_t next_region_bytes_ = 0;  // kGrow: the size of the next region before doubling
  std::uint64_t reserved_ = 0;
  std::uint64_t in_use_ = 0;
  std::uint64_t requested_ = 0;
  std::uint64_t peak_ = 0;
  std::uint64_t total_allocations_ = 0;
  std::array<CategoryStats, kTensorCategoryCount> by_category_{};
  AllocatorObserver* observer_ = nullptr;
};

}  // namespace sluice
