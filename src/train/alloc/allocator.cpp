// The best-fit-with-coalescing allocator's core: bins, best fit, split, coalesce, growth and
// stats (sluice/train/allocator.hpp has the design). Reports and invariant checks are in
// allocator_report.cpp.
//
// Failure safety: allocate() first does everything that can fail (spare chunk slots and bin
// nodes, the live-map insertion, the region from the backing) and only then mutates chunks, bins
// and stats, with operations that cannot fail (recycled nodes, reserved vectors). So a failed
// call, out of memory or std::bad_alloc of the bookkeeping, leaves the allocator as it was.
#include "sluice/train/allocator.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <limits>

#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"
#include "sluice/train/out_of_memory.hpp"

namespace sluice {
namespace {

constexpr std::uint64_t kGranule = Allocator::kGranularity;

// Grows `v`'s capacity geometrically to at least `n` (std::vector::reserve takes exactly `n`,
// which would make repeated small reservations quadratic).
template <typename Vector>
void ensure_capacity(Vector& v, std::size_t n) {
  if (v.capacity() < n) v.reserve(std::max(n, v.capacity() * 2));
}

}  // namespace

int Allocator::bin_of(std::uint64_t bytes) {
  const std::uint64_t units = bytes / kGranule;  // >= 1
  const int k = static_cast<int>(std::bit_width(units)) - 1;
  return std::min(k, kBinCount - 1);
}

std::uint64_t Allocator::rounded_size(std::uint64_t bytes) {
  if (bytes == 0) return kGranule;
  if (bytes > std::numeric_limits<std::uint64_t>::max() - (kGranule - 1)) return 0;  // unsatisfiable
  return (bytes + kGranule - 1) / kGranule * kGranule;
}

Allocator::Allocator(DeviceId device, AllocatorOptions options) : Allocator(make_backing(device), std::move(options)) {}

Allocator::Allocator(std::unique_ptr<Backing> backing, AllocatorOptions options)
    : backing_(std::move(backing)), options_(std::move(options)) {
  if (!backing_) throw Error(ErrorCode::kInvalidArgument, "Allocator: no backing");
  options_.limit = options_.limit / kGranule * kGranule;
  next_region_bytes_ = std::max(rounded_size(options_.initial_region_bytes), kGranule);
  if (options_.mode == AllocatorMode::kPreallocate) {
    if (options_.limit == 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  "Allocator '" + options_.name + "': AllocatorMode::kPreallocate needs a limit of at least 256 B "
                  "(the size of its one region); set AllocatorOptions::limit or use kGrow");
    }
    preallocate();
  }
}

Allocator::~Allocator() {
  for (const Region& r : regions_) backing_->deallocate(reinterpret_cast<void*>(r.base), r.size);
}

void Allocator::preallocate() {
  reserve_spares(1);
  regions_.reserve(1);
  void* base = backing_->allocate(options_.limit);
  if (base == nullptr) {
    throw_out_of_memory(options_.limit, options_.limit, std::nullopt,
                        backing_->describe() + " could not provide the preallocated region of " +
                            format_bytes(options_.limit));
  }
  add_region(reinterpret_cast<std::uintptr_t>(base), options_.limit);
}

void* Allocator::allocate(std::size_t bytes, TensorCategory category) {
  std::lock_guard lock(mutex_);
  const std::uint64_t rounded = rounded_size(bytes);
  if (rounded == 0) throw_out_of_memory(bytes, rounded, category, "the request exceeds any address space");
  return allocate_locked(bytes, rounded, category);
}

void* Allocator::allocate_locked(std::uint64_t requested, std::uint64_t rounded, TensorCategory category) {
  // Fallible preparation: a split needs one chunk slot, a new region two (its chunk and the
  // remainder after the split); the live map needs room to keep a node when the block is freed.
  reserve_spares(2);
  ensure_capacity(spare_live_nodes_, live_.size() + 1);

  Handle h = find_best_fit(rounded);
  bool grew = false;
  if (h == kNone) {
    std::string why;
    h = grow(rounded, &why);
    if (h == kNone) throw_out_of_memory(requested, rounded, category, why);
    grew = true;
  }
  const std::uintptr_t addr = chunks_[h].addr;
  try {
    if (spare_live_nodes_.empty()) {
      live_.emplace(addr, h);
    } else {
      LiveMap::node_type node = std::move(spare_live_nodes_.back());
      spare_live_nodes_.pop_back();
      node.key() = addr;
      node.mapped() = h;
      live_.insert(std::move(node));
    }
  } catch (...) {
    if (grew) {  // give the region just obtained back: the call must leave no trace
      const auto it = std::find_if(regions_.begin(), regions_.end(), [&](const Region& r) { return r.base == addr; });
      remove_region(static_cast<std::size_t>(it - regions_.begin()));
    }
    throw;
  }
  use_chunk(h, requested, rounded, category);  // cannot fail from here
  return reinterpret_cast<void*>(addr);
}

Allocator::Handle Allocator::find_best_fit(std::uint64_t rounded) const {
  const int b = bin_of(rounded);
  // In the request's own bin chunks may be smaller than the request: the first at or above it.
  const Bin& own = bins_[b];
  const auto it = own.lower_bound(FreeKey{rounded, 0, 0});
  if (it != own.end()) return it->chunk;
  // Every chunk of a higher bin fits; the smallest is the first of the lowest non-empty bin.
  const std::uint32_t above = nonempty_bins_ & ~((std::uint32_t{2} << b) - 1);
  if (above == 0) return kNone;
  return bins_[std::countr_zero(above)].begin()->chunk;
}

Allocator::Handle Allocator::grow(std::uint64_t rounded, std::string* why) {
  if (options_.mode == AllocatorMode::kPreallocate) {
    *why = "the preallocated region of " + format_bytes(options_.limit) +
           " has no free block that large, and a preallocating allocator never grows";
    return kNone;
  }
  std::uint64_t size = next_region_bytes_;
  if (options_.growth == RegionGrowth::kRequest && !regions_.empty()) size = rounded;
  while (size < rounded) size = size > std::numeric_limits<std::uint64_t>::max() / 2 ? rounded : size * 2;
  if (options_.limit != 0) {
    const std::uint64_t room = options_.limit - reserved_;
    if (room < rounded) {
      *why = "growing needs a region of at least " + format_bytes(rounded) + ", but only " + format_bytes(room) +
             " of the limit of " + format_bytes(options_.limit) + " is not reserved yet";
      return kNone;
    }
    size = std::min(size, room);
  }
  ensure_capacity(regions_, regions_.size() + 1);
  void* base = backing_->allocate(size);
  if (base == nullptr && size > rounded) {  // the backing may still have room for the request itself
    base = backing_->allocate(rounded);
    if (base != nullptr) size = rounded;
  }
  if (base == nullptr) {
    *why = backing_->describe() + " could not provide a region of " + format_bytes(rounded) +
           (size > rounded ? " (nor of " + format_bytes(size) + ")" : std::string());
    return kNone;
  }
  next_region_bytes_ = std::max(next_region_bytes_, size);
  if (next_region_bytes_ <= std::numeric_limits<std::uint64_t>::max() / 2) next_region_bytes_ *= 2;
  return add_region(reinterpret_cast<std::uintptr_t>(base), size);
}

void Allocator::reserve_spares(std::size_t chunks) {
  // Each chunk slot owns one bin node: in its bin while the chunk is free, in spare_bin_nodes_
  // otherwise (or while the slot is unused). bin_insert and bin_erase then never allocate.
  while (free_handles_.size() < chunks) {
    const std::size_t n = chunks_.size() + 1;
    if (n > kNone) throw std::bad_alloc();
    ensure_capacity(chunks_, n);
    ensure_capacity(free_handles_, n);
    ensure_capacity(spare_bin_nodes_, n);
    Bin scratch;
    scratch.insert(FreeKey{0, 0, 0});
    Bin::node_type node = scratch.extract(scratch.begin());
    chunks_.emplace_back();
    free_handles_.push_back(static_cast<Handle>(n - 1));
    spare_bin_nodes_.push_back(std::move(node));
  }
}

Allocator::Handle Allocator::take_handle() {
  const Handle h = free_handles_.back();
  free_handles_.pop_back();
  return h;
}

void Allocator::release_handle(Handle h) {
  chunks_[h] = Chunk{};
  free_handles_.push_back(h);  // capacity >= chunks_.size() (reserve_spares)
}

void Allocator::bin_insert(Handle h) {
  const Chunk& c = chunks_[h];
  const int b = bin_of(c.size);
  Bin::node_type node = std::move(spare_bin_nodes_.back());
  spare_bin_nodes_.pop_back();
  node.value() = FreeKey{c.size, c.addr, h};
  bins_[b].insert(std::move(node));
  nonempty_bins_ |= std::uint32_t{1} << b;
}

void Allocator::bin_erase(Handle h) {
  const Chunk& c = chunks_[h];
  const int b = bin_of(c.size);
  Bin& bin = bins_[b];
  spare_bin_nodes_.push_back(bin.extract(FreeKey{c.size, c.addr, h}));
  if (bin.empty()) nonempty_bins_ &= ~(std::uint32_t{1} << b);
}

void Allocator::use_chunk(Handle h, std::uint64_t requested, std::uint64_t rounded, TensorCategory category) {
  bin_erase(h);
  if (chunks_[h].size - rounded >= kGranule) {  // split: the remainder becomes a free chunk
    const Handle r = take_handle();
    Chunk& c = chunks_[h];
    Chunk& rest = chunks_[r];
    rest.addr = c.addr + rounded;
    rest.size = c.size - rounded;
    rest.prev = h;
    rest.next = c.next;
    if (c.next != kNone) chunks_[c.next].prev = r;
    c.next = r;
    c.size = rounded;
    bin_insert(r);  // its right neighbour is in use: free chunks are never adjacent
  }
  Chunk& c = chunks_[h];
  c.in_use = true;
  c.requested = requested;
  c.category = category;
  in_use_ += c.size;
  requested_ += requested;
  peak_ = std::max(peak_, in_use_);
  ++total_allocations_;
  CategoryStats& cat = by_category_[index_of(category)];
  cat.in_use_bytes += c.size;
  cat.peak_in_use_bytes = std::max(cat.peak_in_use_bytes, cat.in_use_bytes);
  ++cat.live_allocations;
  if (observer_ != nullptr) {
    observer_->on_allocator_event({AllocatorEvent::kAllocate, c.size, category, in_use_, cat.in_use_bytes, reserved_});
  }
}

void Allocator::deallocate(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard lock(mutex_);
  const auto it = live_.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == live_.end()) {
    char text[32];
    std::snprintf(text, sizeof text, "%p", ptr);
    throw Error(ErrorCode::kInvalidArgument, "Allocator '" + options_.name + "': deallocate(" + text +
                                                 "): not a live block of this allocator (freed twice, or "
                                                 "memory from elsewhere)");
  }
  Handle h = it->second;
  spare_live_nodes_.push_back(live_.extract(it));  // capacity reserved when the block was made

  Chunk& c = chunks_[h];
  in_use_ -= c.size;
  requested_ -= c.requested;
  CategoryStats& cat = by_category_[index_of(c.category)];
  cat.in_use_bytes -= c.size;
  --cat.live_allocations;
  c.in_use = false;
  c.requested = 0;
  if (observer_ != nullptr) {
    observer_->on_allocator_event({AllocatorEvent::kDeallocate, c.size, c.category, in_use_, cat.in_use_bytes, reserved_});
  }

  if (c.next != kNone && !chunks_[c.next].in_use) {  // merge the right neighbour into this one
    const Handle n = c.next;
    bin_erase(n);
    c.size += chunks_[n].size;
    c.next = chunks_[n].next;
    if (c.next != kNone) chunks_[c.next].prev = h;
    release_handle(n);
  }
  if (chunks_[h].prev != kNone && !chunks_[chunks_[h].prev].in_use) {  // merge into the left one
    const Handle p = chunks_[h].prev;
    bin_erase(p);
    chunks_[p].size += chunks_[h].size;
    chunks_[p].next = chunks_[h].next;
    if (chunks_[p].next != kNone) chunks_[chunks_[p].next].prev = p;
    release_handle(h);
    h = p;
  }
  bin_insert(h);
}

Allocator::Handle Allocator::add_region(std::uintptr_t base, std::uint64_t size) {
  const Handle h = take_handle();
  Chunk& c = chunks_[h];
  c = Chunk{};
  c.addr = base;
  c.size = size;
  const auto pos = std::lower_bound(regions_.begin(), regions_.end(), base,
                                    [](const Region& r, std::uintptr_t b) { return r.base < b; });
  regions_.insert(pos, Region{base, size, h});  // capacity reserved: no allocation
  bin_insert(h);
  reserved_ += size;
  return h;
}

void Allocator::remove_region(std::size_t index) {
  const Region r = regions_[index];
  bin_erase(r.first);
  release_handle(r.first);
  regions_.erase(regions_.begin() + static_cast<std::ptrdiff_t>(index));
  reserved_ -= r.size;
  backing_->deallocate(reinterpret_cast<void*>(r.base), r.size);
}

std::uint64_t Allocator::release_free_regions() {
  std::lock_guard lock(mutex_);
  if (options_.mode == AllocatorMode::kPreallocate) return 0;
  std::uint64_t released = 0;
  for (std::size_t i = regions_.size(); i-- > 0;) {
    const Chunk& c = chunks_[regions_[i].first];
    if (!c.in_use && c.next == kNone) {
      released += regions_[i].size;
      remove_region(i);
    }
  }
  return released;
}

bool Allocator::reset_growth() {
  std::lock_guard lock(mutex_);
  // A new allocator's growth after taking the regions still held (a CUDA backend's cuBLAS
  // workspace, taken at setup and held for the context's life), smallest first: grow()'s rule.
  std::vector<std::uint64_t> held;
  held.reserve(regions_.size());
  for (const Region& r : regions_) held.push_back(r.size);
  std::sort(held.begin(), held.end());
  std::uint64_t next = std::max(rounded_size(options_.initial_region_bytes), kGranule);
  for (const std::uint64_t bytes : held) {
    std::uint64_t size = next;
    while (size < bytes && size <= std::numeric_limits<std::uint64_t>::max() / 2) size *= 2;
    next = std::max(next, size);
    if (next <= std::numeric_limits<std::uint64_t>::max() / 2) next *= 2;
  }
  const bool changed = next != next_region_bytes_;
  next_region_bytes_ = next;
  return changed;
}

std::uint64_t Allocator::allocated_size(const void* ptr) const {
  std::lock_guard lock(mutex_);
  const auto it = live_.find(reinterpret_cast<std::uintptr_t>(ptr));
  return it == live_.end() ? 0 : chunks_[it->second].size;
}

std::uint64_t Allocator::largest_free_locked() const {
  if (nonempty_bins_ == 0) return 0;
  const int top = 31 - std::countl_zero(nonempty_bins_);
  return bins_[top].rbegin()->size;
}

AllocatorStats Allocator::stats_locked() const {
  AllocatorStats s;
  s.in_use_bytes = in_use_;
  s.requested_bytes = requested_;
  s.peak_in_use_bytes = peak_;
  s.reserved_bytes = reserved_;
  s.free_bytes = reserved_ - in_use_;
  s.largest_free_block = largest_free_locked();
  s.fragmentation = s.free_bytes == 0 ? 0.0
                                      : static_cast<double>(s.free_bytes - s.largest_free_block) /
                                            static_cast<double>(s.free_bytes);
  s.live_allocations = live_.size();
  s.total_allocations = total_allocations_;
  s.regions = regions_.size();
  s.by_category = by_category_;
  return s;
}

AllocatorStats Allocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_locked();
}

void Allocator::reset_peak() {
  std::lock_guard lock(mutex_);
  peak_ = in_use_;
  for (CategoryStats& c : by_category_) c.peak_in_use_bytes = c.in_use_bytes;
}

void Allocator::set_observer(AllocatorObserver* observer) {
  std::lock_guard lock(mutex_);
  observer_ = observer;
}

std::vector<AllocatorRegion> Allocator::regions() const {
  std::lock_guard lock(mutex_);
  std::vector<AllocatorRegion> out;
  out.reserve(regions_.size());
  for (const Region& r : regions_) out.push_back({reinterpret_cast<const void*>(r.base), r.size});
  return out;
}

}  // namespace sluice
