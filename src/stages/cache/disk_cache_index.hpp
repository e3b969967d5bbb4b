// DiskCacheIndex: the disk cache's in-memory index, path -> where the entry lies in the file, and
// the append tail that hands out the byte ranges new entries are written to. Both are the
// concurrent half of DiskCacheStore (stages/cache/disk_cache.cpp), which owns the file.
//
// The index is split into 64 shards, each a mutex-guarded hash map held only to find, copy,
// replace or erase one entry, so workers that look up or insert different samples rarely meet.
// Entries and bytes are counted in relaxed atomics for stats().
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "stages/cache/disk_cache_format.hpp"

namespace sluice::stages {

class DiskCacheIndex {
 public:
  using Entry = disk_cache_format::EntryInfo;

  // The entry of `path`, copied out of its shard.
  std::optional<Entry> find(const std::string& path);
  // Adds or replaces the entry of `path`.
  void put(std::string path, const Entry& entry);
  // Removes the entry of `path` only if it is still the one at `offset` (a concurrent insert may
  // have replaced it); true when it did.
  bool erase_at(const std::string& path, std::uint64_t offset);
  void clear();
  // Every entry, shard by shard, each shard locked while it is visited.
  void for_each(const std::function<void(const std::string&, const Entry&)>& visit);

  std::int64_t entries() const { return entries_.load(std::memory_order_relaxed); }
  std::uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

 private:
  static constexpr std::size_t kShards = 64;
  struct alignas(64) Shard {
    std::mutex mutex;
    std::unordered_map<std::string, Entry> map;
  };
  Shard& shard_for(const std::string& path);

  std::array<Shard, kShards> shards_;
  std::atomic<std::int64_t> entries_{0};
  std::atomic<std::uint64_t> bytes_{0};
};

// Where the next entry goes: ranges reserved under a short mutex, so writers then write without
// one; a range whose write failed is given back when it is at the end of the file.
class DiskCacheTail {
 public:
  struct Region {
    std::uint64_t offset;
    std::uint64_t bytes;
  };

  void reset(std::uint64_t end) {
    std::lock_guard lock(mutex_);
    end_ = end;
  }
  std::uint64_t end() {
    std::lock_guard lock(mutex_);
    return end_;
  }
  // The offset of `bytes` reserved at the end, or nothing when the file would pass `max_bytes`
  // (0: no limit).
  std::optional<std::uint64_t> reserve(std::uint64_t bytes, std::uint64_t max_bytes);
  // Gives a failed region back: when failed regions now reach the end, the end moves back past
  // them and `cut(new_end)` runs under the tail's lock (so no range reserved after it is cut). A
  // failed region followed by an entry that completed stays as a hole: no header, so it is never
  // indexed, and scans skip it.
  void give_back(const Region& region, const std::function<void(std::uint64_t)>& cut);

 private:
  std::mutex mutex_;
  std::uint64_t end_ = 0;        // where the next entry goes
  std::vector<Region> failed_;   // reserved regions whose write failed
};

}  // namespace sluice::stages
