// The local shard cache: a folder of sluice's own files holding copies of remote shards, each
// under the hash of its URL ("<16 hex>.tar", with "<16 hex>.meta" holding the URL, its ETag and
// size, and the tar source's "<16 hex>.tar.sluice-idx" beside it). A folder that holds any other
// name (or a link, or a folder) is refused, as the disk cache refuses one: sluice deletes files
// in here, so it must be sure they are its own. Nothing is written outside the folder. The index
// file fetched from beside a remote shard ("<url>.sluice-idx") is kept as a copy of its own URL.
//
// Eviction: copies of shards the current data set does not name go first, least recently used
// (their access time, set on every use) first, until the folder fits its limit.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace sluice::stages::remote {

class ShardCache {
 public:
  // Creates the folder (0700) when missing; adopts an empty one; opens one of ours. Throws
  // kInvalidArgument for a folder holding files that are not sluice's, kIo when it cannot make it.
  ShardCache(std::string dir, std::uint64_t limit);
  ~ShardCache();
  ShardCache(const ShardCache&) = delete;
  ShardCache& operator=(const ShardCache&) = delete;

  // Holds the folder for this process (flock on its marker) until destruction: ranks on one node
  // sharing the folder take turns, so the second finds the first's copies current (304s) instead
  // of fetching them again and replacing copies the first has indexed. The wait is bounded by the
  // holder's transfers, each bounded by its timeouts and retries.
  void lock();

  const std::string& dir() const { return dir_; }
  std::uint64_t limit() const { return limit_; }
  // Where the copy of `url` lives (whether or not it is there).
  std::string path_of(const std::string& url) const;
  // A temporary name in the folder for a download of `url` (unique in this process).
  std::string temp_path_of(const std::string& url) const;
  // The ETag of the copy, when it is complete (its size matches its .meta) and has one.
  std::string cached_etag(const std::string& url) const;
  // A download of `url` finished at `temp`: it becomes the copy (replacing an older one).
  void commit(const std::string& url, const std::string& temp, const std::string& etag, std::uint64_t size);
  // The copy is used now (its access time; LRU order).
  void touch(const std::string& url) const;
  // Bytes of every file in the folder.
  std::uint64_t used() const;
  // Removes copies not in `keep` (file paths) until the folder fits the limit.
  void evict(const std::set<std::string>& keep) const;

  static constexpr const char* kMarker = ".sluice-remote-cache";

 private:
  // Removes the temporaries of processes no longer running (a download cut by Ctrl-C or a kill).
  void remove_orphans(const std::vector<std::string>& names) const;

  std::string dir_;
  std::uint64_t limit_;
  int lock_fd_ = -1;
};

// $XDG_CACHE_HOME/sluice/remote, else $HOME/.cache/sluice/remote.
std::string default_cache_dir();

// Whether `name` (a file name in the folder) is one sluice writes there.
bool is_cache_file_name(const std::string& name);

}  // namespace sluice::stages::remote
