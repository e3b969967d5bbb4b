// ItemTable: the data set's items as the pipeline holds them for its whole life, compactly and
// inside the memory budget (a std::string path per file cost ~120 bytes a file outside
// the budget; this holds ImageNet-style names in ~24). Every source produces one: folders and
// list files as files (a folder prefix shared by a run of items, plus each item's own name),
// tar shards as members (the shard, the member's name, its data offset and size). The sample task
// reads an item through its Location, the disk cache keys on it, and its bytes() are reserved
// from the pipeline's MemoryBudget and counted in build()'s minimum.
//
// Storage (why no std::vector for what grows with the item count): fixed-size chunks, so the
// table never copies itself while growing. A growing vector's last doubling holds the old and the
// new copy at once, which made the listing's resident peak half again the table's size.
//   names      one arena of names (a file's name after its folder; a member's name), 64 KiB
//              chunks; a name never straddles two chunks
//   name_start per item, u32 offset of its name in the arena (the arena stays under 4 GiB)
//   runs       per run of consecutive items with one container and one label: first item,
//              container (folder or shard) and label, found by binary search
//   members    tar tables only: per item, data offset (u64) and size (u32)
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace sluice::stages {

// push_back-only storage in chunks of 2^kShift elements: growth allocates one chunk, never copies.
template <class T, int kShift = 14>
class ChunkedVector {
 public:
  static constexpr std::int64_t kChunk = std::int64_t{1} << kShift;

  void push_back(const T& value) {
    if (size_ == static_cast<std::int64_t>(chunks_.size()) * kChunk) {
      chunks_.push_back(std::make_unique_for_overwrite<T[]>(static_cast<std::size_t>(kChunk)));
    }
    (*this)[size_++] = value;
  }
  T& operator[](std::int64_t i) { return chunks_[static_cast<std::size_t>(i >> kShift)][i & (kChunk - 1)]; }
  const T& operator[](std::int64_t i) const {
    return chunks_[static_cast<std::size_t>(i >> kShift)][i & (kChunk - 1)];
  }
  std::int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const T& back() const { return (*this)[size_ - 1]; }
  std::uint64_t bytes() const {
    return static_cast<std::uint64_t>(chunks_.size()) * sizeof(T) * kChunk +
           chunks_.capacity() * sizeof(std::unique_ptr<T[]>);
  }

 private:
  std::vector<std::unique_ptr<T[]>> chunks_;
  std::int64_t size_ = 0;
};

// A shard fetched on demand (stages/tar/shard_fetcher.hpp): why it could not be fetched, and
// where its bytes are while they stream in. `cause` is written once, before `failed` is set
// (release); a worker reads it only after seeing `failed` set (acquire), so an epoch's fetch may
// record it while an abandoned epoch's samples still run.
// Streaming: while `arriving`, the shard's body is being written to `partial` (a path fixed for
// the loader's life) and `arrived` says how many of its bytes are there (kCopyCurrent: the copy
// in the cache is current, read it); a read waits until its member's end has arrived, at most
// `wait_limit_s`, then reads `partial` (or the copy, once the whole shard was moved into place).
struct FetchFailure {
  static constexpr std::uint64_t kCopyCurrent = ~std::uint64_t{0};
  std::atomic<bool> failed{false};
  std::string cause;
  std::atomic<bool> arriving{false};
  std::atomic<std::uint64_t> arrived{0};
  std::string partial;       // set before the table is shared, never changed
  double wait_limit_s = 0;   // likewise
  // Bumped (by the fetcher) when the epoch a read may belong to is abandoned or the loader
  // goes: a read that waits sees it change and ends (kCancelled) rather than hold its worker.
  const std::atomic<std::uint64_t>* interrupts = nullptr;  // likewise
  // cache_limit 0 (set before the table is shared; null: the shard goes through the cache
  // folder): the body streams into `bytes` instead of `partial`, and a read copies its member
  // from there. `unread` counts the reads the epoch has yet to make of this shard; the read that
  // brings it to 0 lets go of the bytes (freed once the stream is done writing them too; the
  // fetcher counts them in use until then).
  struct Memory {
    std::mutex mutex;
    std::shared_ptr<std::uint8_t[]> bytes;  // under `mutex`; null until the stream starts, and once let go
    std::uint64_t size = 0;                 // the shard's, from its index file
    std::atomic<std::int64_t> unread{0};
    // Set by a read waiting for bytes not here yet: a shard a read waits for is started even
    // when the window is full (reads in flight straddling more shards than it was sized for must
    // not wait on each other for ever).
    std::atomic<bool> wanted{false};
    void release() {
      std::shared_ptr<std::uint8_t[]> gone;
      const std::lock_guard<std::mutex> lock(mutex);
      gone.swap(bytes);
    }
  };
  std::unique_ptr<Memory> memory;
};

class ItemTable {
 public:
  enum class Kind : std::uint8_t { kFile, kMember };

  // A tar shard the table's members live in, as it was when indexed.
  struct Shard {
    std::string path;        // the file read (a remote shard's local copy)
    std::uint64_t size = 0;
    std::int64_t mtime_ns = 0;
    std::string origin;      // a remote shard's URL: what messages and the data set's identity name
    // A remote shard fetched when an epoch first reads it: indexed from the index file beside it
    // on the server, so its copy's mtime is not known (kAnyMtime: only the size is checked, and
    // each read checks the member's own header); `fetch_failure` says why the fetch failed.
    std::shared_ptr<const FetchFailure> fetch_failure;
    static constexpr std::int64_t kAnyMtime = std::numeric_limits<std::int64_t>::min();
    const std::string& name() const { return origin.empty() ? path : origin; }
  };

  // Where item i's bytes are. The views point into the table and live as long as it does.
  struct Location {
    Kind kind = Kind::kFile;
    std::string_view folder;   // kFile: the path up to and including its last '/' (may be empty)
    std::string_view name;     // kFile: the rest of the path; kMember: the member's name
    std::int32_t shard = -1;   // kMember: index into shards()
    std::uint64_t offset = 0;  // kMember: where the member's data starts in the shard
    std::uint64_t size = 0;    // kMember: its data bytes
    // kMember: whether its header's size field holds `size` (a pax record may override the
    // field), so a read can check it.
    bool size_in_header = true;
    const std::string* damage = nullptr;  // kMember: why it cannot be read; null when it can
  };

  // What a member's own header says of its size: the size itself, or something a pax record
  // overrides (tar_format.hpp).
  enum class SizeField : std::uint8_t { kHoldsSize, kOverridden };

  // Items are addressed with 32-bit offsets and indices: more than this many is a data set the
  // table refuses (kTooLarge) rather than mis-indexes.
  static constexpr std::int64_t kMaxItems = std::int64_t{1} << 32;
  static constexpr std::uint64_t kMaxNameBytes = 4096;  // per name (PATH_MAX)

  ItemTable() = default;
  ItemTable(ItemTable&&) noexcept = default;
  ItemTable& operator=(ItemTable&&) noexcept = default;

  // ---- building (sources); a table holds files or members, not both -------------------------
  // A folder prefix for add_file (ending in '/', or empty for paths without one); returns its id.
  std::int32_t add_folder(std::string prefix);
  void add_file(std::int32_t folder, std::string_view name, std::int32_t label);
  // Splits `path` after its last '/', reusing the folder of an earlier path with the same prefix.
  void add_path(std::string_view path, std::int32_t label);
  std::int32_t add_shard(Shard shard);
  // `offset` is where the data starts, a multiple of 512 as in every tar.
  void add_member(std::int32_t shard, std::string_view name, std::uint64_t offset, std::uint64_t size,
                  std::int32_t label, SizeField size_field = SizeField::kHoldsSize);
  // A member that cannot be read (cut, bad header...): an item like any other, whose read fails
  // with `cause`, so OnError decides what happens to it, as for a corrupt file in a folder.
  void add_damaged_member(std::int32_t shard, std::string_view name, std::uint64_t offset, std::string cause);
  // Marks an added member damaged (labels resolved after all shards are read can condemn one).
  void mark_damaged(std::int64_t item, std::string cause);
  // Relabels every item with label >= 0: label = relabel[old label] (class names mapped once all
  // are known); items labelled -1 get `unlabelled`.
  void relabel(const std::vector<std::int32_t>& relabel, std::int32_t unlabelled);
  // Ends building: sorts the damage list, drops the building-only maps.
  void finish();

  // ---- reading (the sample task, the disk cache, probes, messages) ---------------------------
  std::int64_t size() const { return name_start_.size(); }
  bool empty() const { return size() == 0; }
  Kind kind() const { return kind_; }
  std::int32_t label(std::int64_t item) const { return runs_[run_of(item)].label; }
  Location locate(std::int64_t item) const;
  // "folder/name" for a file, "shard.tar:member" for a member: what messages and skips name.
  std::string path(std::int64_t item) const;
  void append_path(std::int64_t item, std::string& out) const;
  const std::vector<Shard>& shards() const { return shards_; }
  // The first item of each shard, then size(): members of one shard are consecutive.
  std::vector<std::int64_t> shard_starts() const;
  std::int64_t damaged() const { return static_cast<std::int64_t>(damage_.size()); }

  // Heap bytes the table holds: what the pipeline reserves for it.
  std::uint64_t bytes() const;
  // Of every item's path and label in order (the loader state's fingerprint; the same value the
  // list of Items gave before this table, so saved states stay valid). Computed on the first
  // call (0.1 s on 1.28M files, which build() need not pay), thread-safe.
  std::uint64_t fingerprint() const;

 private:
  static constexpr int kNameChunkShift = 16;  // 64 KiB
  struct Run {
    std::int64_t first;
    std::int32_t container;
    std::int32_t label;
  };

  void start_kind(Kind kind);
  void add_name(std::string_view name);
  void add_run(std::int32_t container, std::int32_t label);
  std::int64_t run_of(std::int64_t item) const;
  std::string_view name_of(std::int64_t item) const;
  std::uint64_t compute_fingerprint() const;

  Kind kind_ = Kind::kFile;
  std::vector<std::string> folders_;  // prefixes, with their trailing '/'
  std::vector<Shard> shards_;
  std::vector<std::unique_ptr<char[]>> name_chunks_;
  std::vector<std::uint32_t> chunk_used_;     // bytes used in each name chunk
  ChunkedVector<std::uint32_t> name_start_;   // (items)
  ChunkedVector<Run, 10> runs_;  // 16 KiB chunks: most tables have a few runs
  ChunkedVector<std::uint64_t> member_offset_;  // (items) members only; bit 0: SizeField::kOverridden
  ChunkedVector<std::uint32_t> member_size_;    // (items) members only; kDamagedSize: see damage_
  std::vector<std::pair<std::int64_t, std::string>> damage_;  // (item, cause), sorted by item
  std::unordered_map<std::string, std::int32_t> folder_ids_;  // building only
  struct Fingerprint {
    std::once_flag once;
    std::uint64_t value = 0;
  };
  std::unique_ptr<Fingerprint> fingerprint_ = std::make_unique<Fingerprint>();
};

}  // namespace sluice::stages
