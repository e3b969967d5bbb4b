// ResumeStore: striped maps of resume points, bounded in bytes.
#include "stages/program/resume_store.hpp"

#include <algorithm>

#include <xxhash.h>

namespace sluice::stages {
namespace {
// A map node and its vector's header, beside the points themselves.
constexpr std::uint64_t kEntryOverhead = 64;
constexpr std::uint64_t kMaxBytes = std::uint64_t{32} << 20;
constexpr std::uint64_t kItemBytes = kEntryOverhead + ResumeStore::kMaxPointsPerItem * sizeof(ResumePoint);
}  // namespace

std::uint64_t ResumeStore::capacity_bytes(std::int64_t items) {
  return std::min(kMaxBytes, static_cast<std::uint64_t>(std::max<std::int64_t>(items, 0)) * kItemBytes);
}

void ResumeStore::get(std::int64_t item, std::span<const std::uint8_t> jpeg, std::vector<ResumePoint>& points) const {
  const Stripe& s = stripes_[static_cast<std::uint64_t>(item) % kStripes];
  std::uint32_t covered = 0;
  std::uint64_t hash = 0;
  {
    std::lock_guard lock(s.mutex);
    const auto it = s.items.find(item);
    if (it == s.items.end()) {
      points.clear();
      return;
    }
    covered = it->second.covered;
    hash = it->second.hash;
    points.assign(it->second.points.begin(), it->second.points.end());
  }
  if (covered > jpeg.size() || XXH3_64bits(jpeg.data(), covered) != hash) points.clear();
}

void ResumeStore::put(std::int64_t item, std::span<const std::uint8_t> jpeg, const std::vector<ResumePoint>& points) {
  const std::size_t keep = std::min(points.size(), kMaxPointsPerItem);
  if (keep == 0) return;
  const std::uint32_t covered = std::min<std::uint32_t>(points[keep - 1].byte + 1, static_cast<std::uint32_t>(jpeg.size()));
  const std::uint64_t hash = XXH3_64bits(jpeg.data(), covered);
  Stripe& s = stripes_[static_cast<std::uint64_t>(item) % kStripes];
  std::lock_guard lock(s.mutex);
  auto it = s.items.find(item);
  const bool same = it != s.items.end() && it->second.covered <= covered &&
                    it->second.hash == XXH3_64bits(jpeg.data(), it->second.covered);
  if (same && keep <= it->second.points.size()) return;
  if (it == s.items.end()) {
    // An item's first points take its whole room at once (kItemBytes), so later ones cost
    // nothing; counted first, so that puts on other stripes cannot pass the bound together.
    std::uint64_t now = bytes_.load(std::memory_order_relaxed);
    do {
      if (now + kItemBytes > kMaxBytes) return;
    } while (!bytes_.compare_exchange_weak(now, now + kItemBytes, std::memory_order_relaxed));
    it = s.items.emplace(item, Stripe::Entry{}).first;
    it->second.points.reserve(kMaxPointsPerItem);
  }
  it->second.covered = covered;
  it->second.hash = hash;
  it->second.points.assign(points.begin(), points.begin() + static_cast<std::ptrdiff_t>(keep));
}

}  // namespace sluice::stages
