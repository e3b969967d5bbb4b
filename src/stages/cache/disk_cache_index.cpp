// The disk cache's sharded in-memory index and its append tail (disk_cache_index.hpp).
#include "stages/cache/disk_cache_index.hpp"

namespace sluice::stages {

DiskCacheIndex::Shard& DiskCacheIndex::shard_for(const std::string& path) {
  static_assert(kShards == 64, "shard_for takes the top 6 bits");
  const std::size_t h = std::hash<std::string>{}(path) * 0x9E3779B97F4A7C15ull;
  return shards_[h >> 58];  // the top 6 bits: independent of the map's own bucket choice
}

std::optional<DiskCacheIndex::Entry> DiskCacheIndex::find(const std::string& path) {
  Shard& shard = shard_for(path);
  std::lock_guard lock(shard.mutex);
  const auto it = shard.map.find(path);
  if (it == shard.map.end()) return std::nullopt;
  return it->second;
}

void DiskCacheIndex::put(std::string path, const Entry& entry) {
  Shard& shard = shard_for(path);
  std::uint64_t replaced_bytes = 0;
  bool replaced = false;
  {
    std::lock_guard lock(shard.mutex);
    auto [it, inserted] = shard.map.try_emplace(std::move(path), entry);
    if (!inserted) {
      replaced = true;
      replaced_bytes = it->second.payload_bytes;
      it->second = entry;
    }
  }
  if (!replaced) entries_.fetch_add(1, std::memory_order_relaxed);
  bytes_.fetch_add(entry.payload_bytes - replaced_bytes, std::memory_order_relaxed);
}

bool DiskCacheIndex::erase_at(const std::string& path, std::uint64_t offset) {
  Shard& shard = shard_for(path);
  std::uint64_t payload_bytes = 0;
  {
    std::lock_guard lock(shard.mutex);
    const auto it = shard.map.find(path);
    if (it == shard.map.end() || it->second.offset != offset) return false;
    payload_bytes = it->second.payload_bytes;
    shard.map.erase(it);
  }
  entries_.fetch_sub(1, std::memory_order_relaxed);
  bytes_.fetch_sub(payload_bytes, std::memory_order_relaxed);
  return true;
}

void DiskCacheIndex::clear() {
  for (Shard& shard : shards_) {
    std::lock_guard lock(shard.mutex);
    shard.map.clear();
  }
  entries_ = 0;
  bytes_ = 0;
}

void DiskCacheIndex::for_each(const std::function<void(const std::string&, const Entry&)>& visit) {
  for (Shard& shard : shards_) {
    std::lock_guard lock(shard.mutex);
    for (const auto& [path, entry] : shard.map) visit(path, entry);
  }
}

std::optional<std::uint64_t> DiskCacheTail::reserve(std::uint64_t bytes, std::uint64_t max_bytes) {
  std::lock_guard lock(mutex_);
  if (max_bytes != 0 && end_ + bytes > max_bytes) return std::nullopt;
  const std::uint64_t offset = end_;
  end_ += bytes;
  return offset;
}

void DiskCacheTail::give_back(const Region& region, const std::function<void(std::uint64_t)>& cut) {
  std::lock_guard lock(mutex_);
  failed_.push_back(region);
  bool shrunk = false;
  for (bool again = true; again;) {
    again = false;
    for (auto it = failed_.begin(); it != failed_.end(); ++it) {
      if (it->offset + it->bytes == end_) {
        end_ = it->offset;
        failed_.erase(it);
        again = shrunk = true;
        break;
      }
    }
  }
  if (shrunk) cut(end_);
}

}  // namespace sluice::stages
