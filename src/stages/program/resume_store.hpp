// Each item's JPEG resume points (stages/decode/jpeg_resume.hpp), kept from one read of the file
// to the next so that later epochs splice a file at the row above their crop instead of
// Huffman-decoding the rows above it. Shared by the workers: 64 stripes, each a mutex and a map
// by item. Bounded: at most kMaxPointsPerItem points an item and capacity_bytes() in all, which
// the loader's memory plan counts and reserves as "resume points" (runtime/loader_memory_plan.cpp,
// under the decode buffers' use); past the bound, items keep whatever they had and the rest
// decode as before.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "stages/decode/jpeg_resume.hpp"

namespace sluice::stages {

class ResumeStore {
 public:
  // 64 points: 512 rows of a 4:4:4 file, 1,024 of a 4:2:0 one.
  static constexpr std::size_t kMaxPointsPerItem = 64;
  // What the store may hold for a data set of `items` items: 832 bytes an item it has points
  // for (room for 64 points, and the map's overhead), at most 32 MiB in all.
  static std::uint64_t capacity_bytes(std::int64_t items);

  // Copies the item's points into `points`: none when it has none, or when `jpeg` (the file as
  // read now) differs from the file they were found in, in the bytes they depend on (the
  // markers and the scan up to the last point, checked by their XXH3): a file replaced between
  // epochs is never spliced at another file's points.
  void get(std::int64_t item, std::span<const std::uint8_t> jpeg, std::vector<ResumePoint>& points) const;
  // Keeps the first kMaxPointsPerItem of `points`, found in `jpeg`, for the item, if they are
  // more than it has for these bytes (or it had another file's) and the store has room.
  void put(std::int64_t item, std::span<const std::uint8_t> jpeg, const std::vector<ResumePoint>& points);
  std::uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

 private:
  static constexpr int kStripes = 64;
  struct Stripe {
    mutable std::mutex mutex;
    struct Entry {
      std::uint32_t covered = 0;  // the points depend on the file's bytes [0, covered)
      std::uint64_t hash = 0;     // XXH3 of those bytes
      std::vector<ResumePoint> points;
    };
    std::unordered_map<std::int64_t, Entry> items;
  };
  Stripe stripes_[kStripes];
  std::atomic<std::uint64_t> bytes_{0};
};

}  // namespace sluice::stages
