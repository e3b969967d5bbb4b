// Helpers of the allocator tests: a backing of fake addresses (never dereferenced, so layouts of
// hundreds of MiB cost nothing) with an optional capacity and a record of the regions it gave,
// a field-by-field comparison of stats, and the occupancy map read back out of a report.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "sluice/train/allocator.hpp"
#include "sluice/train/backing.hpp"

namespace sluice::test {

class FakeBacking final : public Backing {
 public:
  // `gap`: bytes left unused between consecutive regions; 0 makes them adjacent in the address
  // space, which must not make the allocator merge chunks across regions.
  static std::unique_ptr<FakeBacking> make(std::uint64_t capacity = std::numeric_limits<std::uint64_t>::max(),
                                           std::uint64_t gap = std::uint64_t{1} << 20) {
    return std::make_unique<FakeBacking>(capacity, gap);
  }
  FakeBacking(std::uint64_t capacity, std::uint64_t gap) : capacity_(capacity), gap_(gap) {}
  ~FakeBacking() override {
    // The allocator returns every region when it is destroyed.
    if (!live_.empty()) std::abort();
  }

  DeviceId device() const override { return host(); }
  std::string describe() const override { return "fake backing"; }
  void* allocate(std::size_t bytes) override {
    if (bytes % kAlignment != 0 || bytes == 0) std::abort();
    if (bytes > capacity_ - used_) return nullptr;
    used_ += bytes;
    const std::uintptr_t base = next_;
    next_ += bytes + gap_;
    sizes_.push_back(bytes);
    live_[base] = bytes;
    return reinterpret_cast<void*>(base);
  }
  void deallocate(void* ptr, std::size_t bytes) noexcept override {
    const auto it = live_.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it == live_.end() || it->second != bytes) std::abort();  // a region it never gave, or resized
    used_ -= bytes;
    live_.erase(it);
  }

  // Every region handed out, in order, released or not.
  const std::vector<std::uint64_t>& region_sizes() const { return sizes_; }
  std::size_t live_regions() const { return live_.size(); }

 private:
  std::uint64_t capacity_;
  std::uint64_t gap_;
  std::uint64_t used_ = 0;
  std::uintptr_t next_ = std::uintptr_t{1} << 44;
  std::vector<std::uint64_t> sizes_;
  std::map<std::uintptr_t, std::uint64_t> live_;
};

inline bool same_stats(const AllocatorStats& a, const AllocatorStats& b) {
  if (a.in_use_bytes != b.in_use_bytes || a.requested_bytes != b.requested_bytes ||
      a.peak_in_use_bytes != b.peak_in_use_bytes || a.reserved_bytes != b.reserved_bytes ||
      a.free_bytes != b.free_bytes || a.largest_free_block != b.largest_free_block ||
      a.fragmentation != b.fragmentation || a.live_allocations != b.live_allocations ||
      a.total_allocations != b.total_allocations || a.regions != b.regions) {
    return false;
  }
  for (std::size_t i = 0; i < kTensorCategoryCount; ++i) {
    const CategoryStats& x = a.by_category[i];
    const CategoryStats& y = b.by_category[i];
    if (x.in_use_bytes != y.in_use_bytes || x.peak_in_use_bytes != y.peak_in_use_bytes ||
        x.live_allocations != y.live_allocations) {
      return false;
    }
  }
  return true;
}

// The cells of region `index` in a report's occupancy map (its rows joined, labels cut).
inline std::string map_cells(const std::string& report, std::size_t index) {
  std::istringstream in(report);
  std::string line, cells;
  const std::string label = "  r" + std::to_string(index);
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.rfind(label + " ", 0) == 0) {
      inside = true;
    } else if (inside && line.rfind("      ", 0) != 0) {
      break;
    }
    if (inside) cells += line.substr(6);
  }
  return cells;
}

inline std::size_t line_count(const std::string& text) {
  std::size_t n = 0;
  for (const char c : text) n += c == '\n';
  return n;
}

inline std::size_t widest_line(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  std::size_t widest = 0;
  while (std::getline(in, line)) widest = std::max(widest, line.size());
  return widest;
}

}  // namespace sluice::test
