// DiskCacheStore: the encoded bytes (after read) or decoded images (after decode_jpeg) of samples,
// kept in a file on local disk so later epochs and later runs skip the slow part.
//
// Contract: entries are keyed by the source file's path, size and mtime plus a
// fingerprint of the stages upstream, so a changed file or a changed pipeline never serves stale
// data; every entry is checksummed (XXH3) and a bad one is dropped and recomputed, never served;
// a cache left by a killed process is detected and completed or rebuilt, never served torn; two
// processes may read one cache at once (one of them writes); a full disk (ENOSPC) gives one
// warning and the run continues uncached; max_bytes bounds the file.
//
// Payloads are opaque bytes: the caller serialises what it caches (a decoded image carries its
// own small header).
//
// Files: the cache file and `<path>.idx`, an index the writer writes when it closes (opening then
// reads it instead of the entries' headers). The first DiskCacheStore to open a file writes it; any
// other (process, or instance in this process) is a reader that serves the entries complete when
// it opened and sees none added later. A cache file of another fingerprint or format version (or
// a damaged one) is rebuilt by a writer; a file that sluice did not write (non-empty, without the
// cache's magic; or a FIFO, device, folder) is refused with an Error and left as it is, and so is
// a `<path>.idx` that is not an index of ours (the cache then runs without one). Entries whose
// sizes exceed the limits below are never indexed or served, however valid their checksums.
// Memory: the in-memory index takes about 190 bytes per entry with 55-byte paths (measured by
// bench/micro/disk_cache_bench, BM_Open100k heap_per_entry).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "sluice/memory/aligned_buffer.hpp"

namespace sluice::stages {

class FileOps;  // the file-system seam (stages/source/file_ops.hpp); tests inject faults through it

// The source file as it is now: a changed size or mtime makes an entry stale.
struct CacheKey {
  std::string path;
  std::uint64_t file_size = 0;
  std::int64_t mtime_ns = 0;
};

struct DiskCacheOptions {
  std::string path;               // the cache file (created if absent)
  std::uint64_t max_bytes = 0;    // bounds the cache file; inserts stop there (no eviction);
                                  // 0: bounded by the disk only. The .idx adds ~56 B + path/entry
  std::uint64_t fingerprint = 0;  // of the stages upstream; another fingerprint = another cache
  FileOps* file_ops = nullptr;    // nullptr: the real file system
  // What an entry read from the file may claim (the pipeline's max_file_size, or its largest
  // decoded image): larger ones are counted as rejected and ignored. 0: bounded by the file only.
  std::uint64_t max_entry_bytes = 0;
  std::uint64_t max_source_bytes = 0;  // the source file size an entry records
};

struct DiskCacheStats {
  std::int64_t hits = 0;
  std::int64_t misses = 0;           // absent, stale or dropped
  std::int64_t inserts = 0;
  std::int64_t stale = 0;            // found, but the file changed since
  std::int64_t dropped_corrupt = 0;  // checksum mismatch: dropped, recomputed by the caller
  std::int64_t rejected = 0;         // entries in the file over max_entry_bytes/max_source_bytes
  std::int64_t entries = 0;
  std::uint64_t bytes = 0;           // payload bytes held
  bool writable = true;              // false: read-only (another process writes) or disabled
  std::string note;                  // why not writable (ENOSPC, max_bytes, another writer...) and
                                     // what opening recovered or rebuilt; "; "-separated
};

class DiskCacheStore {
 public:
  // Opens or creates the cache, recovering from a torn tail. Throws sluice::Error (with the path)
  // when the cache can be neither read nor created (e.g. its folder does not exist), and
  // kInvalidArgument when the path holds a file that is not a sluice cache.
  explicit DiskCacheStore(DiskCacheOptions options);
  // Writes the index file (writer only, when anything changed) and releases the write lock. No
  // lookup or insert may be running.
  ~DiskCacheStore();
  DiskCacheStore(const DiskCacheStore&) = delete;
  DiskCacheStore& operator=(const DiskCacheStore&) = delete;

  // Thread-safe. Copies the entry into `out` (grown if needed) and returns its size; nullopt when
  // absent, stale or corrupt (a corrupt entry is dropped so the next insert replaces it).
  // Cost of a hit: a shard lock held for one hash-map find, one pread of the payload into `out`
  // and an XXH3 of it; no allocation once `out` is large enough.
  std::optional<std::size_t> lookup(const CacheKey& key, AlignedBuffer& out);

  // Thread-safe. Stores an entry; false when not stored (read-only, full, disabled, or a path
  // over 4096 bytes). Never throws for I/O conditions: a full disk disables inserts after one
  // warning on stderr. Returns true without writing when the same key is already stored. Cost:
  // an XXH3 of the payload, two pwrites (payload, then header) and one allocation for the index
  // entry; no lock is held while writing.
  bool insert(const CacheKey& key, std::span<const std::uint8_t> payload);

  // Thread-safe; counters since this instance opened (entries and bytes: what it holds now).
  DiskCacheStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::stages
