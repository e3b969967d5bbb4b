// ResumeStore: striped maps of resume points, bounded in bytes.
#include "stages/program/resume_store.hpp"

#include <algorithm>

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

void ResumeStore::get(std::int64_t item, std::uint64_t fingerprint, std::vector<ResumePoint>& points) const {
  const Stripe& s = stripes_[static_cast<std::uint64_t>(item) % kStripes];
  std::lock_guard lock(s.mutex);
  const auto it = s.items.find(item);
  if (it == s.items.end() || it->second.fingerprint != fingerprint) {
    points.clear();
  } else {
    points.assign(it->second.points.begin(), it->second.points.end());
  }
}

void ResumeStore::put(std::int64_t item, std::uint64_t fingerprint, const std::vector<ResumePoint>& points) {
  const std::size_t keep = std::min(points.size(), kMaxPointsPerItem);
  Stripe& s = stripes_[static_cast<std::uint64_t>(item) % kStripes];
  std::lock_guard lock(s.mutex);
  auto it = s.items.find(item);
  const bool same = it != s.items.end() && it->second.fingerprint == fingerprint;
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
  it->second.fingerprint = fingerprint;
  it->second.points.assign(points.begin(), points.begin() + static_cast<std::ptrdiff_t>(keep));
}

}  // namespace sluice::stages
