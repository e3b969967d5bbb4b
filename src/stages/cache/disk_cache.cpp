// DiskCacheStore: an append-only file of checksummed entries with an in-memory index, a
// single writer per file (flock) and any number of readers. Why it is built this way is in
// docs/decisions/disk-cache.md.
//
// Format (byte layouts in disk_cache_format.hpp): a 64-byte file header (magic, version,
// fingerprint, a random generation, checksum), then entries at 8-byte boundaries, each a 48-byte
// header (magic, path length, payload length, source size and mtime, XXH3 of the payload, a
// header checksum), the path, and the payload. The payload is written first and the header last,
// so a header that validates means a complete entry. `<path>.idx` snapshots the index when the
// writer closes; opening loads it and scans only what was appended after it.
//
// Concurrency. The index (DiskCacheIndex, disk_cache_index.hpp) is split into 64 mutex-guarded
// shards. A lookup copies the entry's location out of its shard and then reads without any lock
// (pread on the shared descriptor). An insert hashes the payload, reserves its byte range from the
// tail (DiskCacheTail, a short mutex), writes the payload and then the header with no lock held,
// and only then publishes the entry to the index: an entry is visible only once complete.
// Statistics are relaxed atomics.
#include "stages/cache/disk_cache.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <unordered_map>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"
#include "stages/cache/disk_cache_format.hpp"
#include "stages/cache/disk_cache_index.hpp"
#include "stages/source/file_ops.hpp"

namespace sluice::stages {

namespace dcf = disk_cache_format;

namespace {

// Seeds the entry checksums of one incarnation of the file, so headers of a former file (or of
// a cache file cached inside this one) never validate in it.
std::uint64_t random_generation() {
  std::uint64_t g = 0;
  try {
    std::random_device rd;
    g = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  } catch (...) {
    // No entropy source: time and pid still differ between the files a machine creates.
  }
  g ^= static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) *
       0x9E3779B97F4A7C15ull;
  g ^= static_cast<std::uint64_t>(::getpid()) << 40;
  return g == 0 ? 1 : g;
}

[[noreturn]] void throw_open_error(int err, const std::string& path) {
  switch (err) {
    case ENOENT:
      throw Error(ErrorCode::kNotFound, "cannot create the disk cache: its folder does not exist", path);
    case ENOTDIR:
      throw Error(ErrorCode::kNotFound, "cannot create the disk cache: a parent is not a folder", path);
    case EACCES:
    case EPERM:
      throw Error(ErrorCode::kPermissionDenied, "cannot open or create the disk cache: permission denied", path);
    case EISDIR:
      throw Error(ErrorCode::kInvalidArgument, "the disk cache path is a folder, not a file", path);
    case ELOOP:
      throw Error(ErrorCode::kInvalidArgument,
                  "the disk cache path is a symbolic link: sluice never writes through one (give the link's "
                  "target as the path)", path);
    default:
      throw Error(ErrorCode::kIo, std::string("cannot open the disk cache: ") + std::strerror(err), path);
  }
}

// The cache file opened for Impl: O_RDWR when it can be (else read-only, said in a note), never
// through a symlink, not blocking on a special file; the writer is the one that got the lock.
// fd -1: it could not be created for lack of space (a warning, as a full disk mid-run).
struct OpenedFile {
  int fd = -1;
  bool writer = false;
  bool warned = false;
  std::vector<std::string> notes;
};

OpenedFile open_cache_file(FileOps& ops, const std::string& path) {
  OpenedFile f;
  // O_NONBLOCK | O_NOCTTY: a FIFO or terminal at the path must not block or adopt us (fstat
  // refuses it below); neither changes anything for a regular file. O_NOFOLLOW: a symlink at the
  // path is refused (ELOOP), never written through. 0600: the cache holds the reader's data,
  // which others may not be allowed to read at its source.
  f.fd = ops.open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW, 0600);
  bool read_only = false;
  if (f.fd < 0 && (errno == EACCES || errno == EPERM || errno == EROFS)) {
    const int write_error = errno;
    f.fd = ops.open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW, 0);
    if (f.fd < 0) throw_open_error(errno == ENOENT ? write_error : errno, path);
    read_only = true;
    f.notes.push_back(std::string("read-only: cannot write the cache file (") + std::strerror(write_error) + ")");
  }
  if (f.fd < 0 && (errno == ENOSPC || errno == EDQUOT)) {
    // One policy with a full disk mid-run (write_failed): a cache that cannot be created (no
    // space, no inodes, a quota) is a warning and a run without caching, not a failed build.
    const int err = errno;
    std::fprintf(stderr, "sluice: warning: disk cache %s: cannot create it (%s); caching is off for this run\n",
                 path.c_str(), std::strerror(err));
    f.warned = true;
    f.notes.push_back(std::string("not created: ") + std::strerror(err) + "; caching off for this run");
    return f;
  }
  if (f.fd < 0) throw_open_error(errno, path);
  struct stat st {};
  if (ops.fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno;
    ops.close(f.fd);
    if (S_ISDIR(st.st_mode)) throw_open_error(EISDIR, path);
    if (st.st_mode != 0) throw Error(ErrorCode::kInvalidArgument, "the disk cache path is not a regular file", path);
    throw_open_error(err, path);
  }
  if (read_only) return f;
  // One writer per file. flock belongs to this open file description, so a second DiskCacheStore
  // on the same file, in this process or another, becomes a reader.
  if (ops.flock(f.fd, LOCK_EX | LOCK_NB) == 0) {
    f.writer = true;
  } else if (errno == EWOULDBLOCK) {
    f.notes.push_back("read-only: another process (or DiskCacheStore) is writing this cache");
  } else {
    f.notes.push_back(std::string("read-only: cannot lock the cache file (") + std::strerror(errno) + ")");
  }
  return f;
}

}  // namespace

struct DiskCacheStore::Impl {
  using Region = DiskCacheTail::Region;

  explicit Impl(DiskCacheOptions options)
      : ops_(options.file_ops != nullptr ? *options.file_ops : real_file_ops()),
        path_(std::move(options.path)),
        index_path_(path_ + ".idx"),
        max_bytes_(options.max_bytes),
        fingerprint_(options.fingerprint),
        limits_{options.max_entry_bytes, options.max_source_bytes} {
    if (path_.empty()) {
      throw Error(ErrorCode::kInvalidArgument, "DiskCacheOptions::path is empty: name the cache file");
    }
    open_file();
    if (fd_ < 0) return;  // no space to create it: a cache that serves nothing (open_file says so)
    try {
      refuse_foreign_file();
      if (writer_) {
        open_as_writer();
      } else {
        open_as_reader();
      }
    } catch (...) {
      ops_.close(fd_);
      throw;
    }
  }

  ~Impl() {
    try {
      if (writer_ && file_valid_ && (changed_.load() || !index_current_)) write_index();
    } catch (...) {
      // Without an index the next open scans the file instead; nothing to report.
    }
    if (fd_ >= 0) ops_.close(fd_);  // releases the write lock
  }

  // ---- opening ---------------------------------------------------------------------------

  void open_file() {
    OpenedFile opened = open_cache_file(ops_, path_);
    fd_ = opened.fd;
    writer_ = opened.writer;
    if (opened.warned) warned_ = true;
    for (const std::string& note : opened.notes) add_note(note);
  }

  // A path that holds someone else's file is an error, never truncated. Ours are the
  // empty file (just created, or a creation that was killed) and files with the cache's magic.
  // The file's first bytes are kept for read_file_header (one read for both).
  void refuse_foreign_file() {
    const ssize_t got = pread_full(ops_, fd_, head_.data(), head_.size(), 0);
    if (got < 0) throw_open_error(errno, path_);
    head_bytes_ = static_cast<std::size_t>(got);
    if (dcf::starts_like_ours(head_.data(), head_bytes_, /*index=*/false)) return;
    throw Error(ErrorCode::kInvalidArgument,
                "the disk cache path holds a file that is not a sluice disk cache; it is left as it "
                "is: point DiskCache at a new path (or delete the file)",
                path_);
  }

  // The index may be replaced only when it is ours (or absent), and so may its temporary.
  bool index_replaceable() {
    if (dcf::replaceable(ops_, index_path_, /*index=*/true) &&
        dcf::replaceable(ops_, index_path_ + ".tmp", /*index=*/true)) {
      return true;
    }
    add_note("no index: " + index_path_ + " (or its .tmp) is not a sluice index file and is left as it is");
    return false;
  }

  std::uint64_t file_bytes() {
    struct stat st {};
    return ops_.fstat(fd_, &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
  }

  std::optional<dcf::FileHeader> read_file_header(std::uint64_t size) {
    if (size < dcf::kFileHeaderBytes || head_bytes_ < dcf::kFileHeaderBytes) return std::nullopt;
    return dcf::decode_file_header(head_.data());
  }

  void open_as_writer();

  void open_as_reader();

  // A new, empty file: header only, under a new generation so nothing of the old file validates.
  void create_fresh();

  void check_max_bytes_at_open() {
    if (max_bytes_ != 0 && tail_.end() >= max_bytes_) disable(max_bytes_note());
  }

  std::string max_bytes_note() const {
    return "inserts stopped: max_bytes (" + format_bytes(max_bytes_) +
           ") reached; the cache does not evict";
  }

  // Fills the index from the index file (when it matches) and a scan of what follows it; returns
  // the end of the last valid entry.
  std::uint64_t load(const dcf::FileHeader& header, std::uint64_t size);

  // ---- lookup and insert -----------------------------------------------------------------

  std::optional<std::size_t> lookup(const CacheKey& key, AlignedBuffer& out);

  void drop(const std::string& path, const dcf::EntryInfo& entry);

  bool insert(const CacheKey& key, std::span<const std::uint8_t> payload);

  std::optional<std::uint64_t> reserve(std::uint64_t bytes) {
    if (!inserts_enabled_.load(std::memory_order_relaxed)) return std::nullopt;
    const std::optional<std::uint64_t> offset = tail_.reserve(bytes, max_bytes_);
    if (!offset) disable(max_bytes_note());
    return offset;
  }

  // A failed write (ENOSPC, EDQUOT, EFBIG, EIO...): one warning per cache, inserts off for the
  // rest of the run, the entry's bytes given back when it is at the end of the file.
  void write_failed(int err, std::optional<Region> region);

  void roll_back(const Region& region) {
    tail_.give_back(region, [this](std::uint64_t end) { ops_.ftruncate(fd_, static_cast<off_t>(end)); });
  }

  void disable(const std::string& why) {
    if (inserts_enabled_.exchange(false)) add_note(why);
  }

  void add_note(const std::string& text) {
    std::lock_guard lock(note_mutex_);
    if (!note_.empty()) note_ += "; ";
    note_ += text;
  }

  // ---- closing ---------------------------------------------------------------------------

  void write_index();

  DiskCacheStats stats() const;

  FileOps& ops_;
  const std::string path_;
  const std::string index_path_;
  const std::uint64_t max_bytes_;
  const std::uint64_t fingerprint_;
  const dcf::Limits limits_;
  int fd_ = -1;
  std::array<std::uint8_t, dcf::kFileHeaderBytes> head_{};  // the file's first bytes at open
  std::size_t head_bytes_ = 0;
  bool index_foreign_ = false;  // <path>.idx is someone else's file: never unlinked or replaced
  std::int64_t rejected_ = 0;   // set while opening only
  bool writer_ = false;         // holds the lock: may append, mark dead, cut, write the index
  bool file_valid_ = false;     // the data file has a valid header of ours
  bool index_current_ = false;  // the index file already describes the file as opened
  std::uint64_t generation_ = 0;

  DiskCacheIndex index_;
  DiskCacheTail tail_;

  std::atomic<bool> inserts_enabled_{false};
  std::atomic<bool> changed_{false};
  std::atomic<bool> warned_{false};
  mutable std::mutex note_mutex_;
  std::string note_;

  std::atomic<std::int64_t> hits_{0};
  std::atomic<std::int64_t> misses_{0};
  std::atomic<std::int64_t> inserts_{0};
  std::atomic<std::int64_t> stale_{0};
  std::atomic<std::int64_t> dropped_{0};
};

void DiskCacheStore::Impl::open_as_writer() {
  inserts_enabled_ = true;
  const std::uint64_t size = file_bytes();
  const std::optional<dcf::FileHeader> header = read_file_header(size);
  if (!header || header->fingerprint != fingerprint_) {
    if (size > 0) {
      add_note(header ? "rebuilt: the file held another pipeline's cache (fingerprint differs)"
                      : "rebuilt: the file was not a sluice disk cache of this format version");
    }
    create_fresh();
    return;
  }
  generation_ = header->generation;
  file_valid_ = true;
  const std::uint64_t valid_end = load(*header, size);
  if (valid_end < size) {
    // The torn tail of a writer that was killed: cut it so appends continue from valid data.
    // If the truncate fails, appends still start at valid_end and the rest stays unindexed.
    ops_.ftruncate(fd_, static_cast<off_t>(valid_end));
    add_note("recovered: cut " + format_bytes(size - valid_end) + " of unfinished entries at the end");
  }
  tail_.reset(dcf::pad8(valid_end));
  check_max_bytes_at_open();
}

void DiskCacheStore::Impl::open_as_reader() {
  const std::uint64_t size = file_bytes();
  const std::optional<dcf::FileHeader> header = read_file_header(size);
  if (!header) {
    if (size > 0) add_note("the file is not a sluice disk cache of this format version: nothing served");
    return;
  }
  if (header->fingerprint != fingerprint_) {
    add_note("the file holds another pipeline's cache (fingerprint differs): nothing served");
    return;
  }
  generation_ = header->generation;
  load(*header, size);
}

void DiskCacheStore::Impl::create_fresh() {
  if (index_replaceable()) {
    ops_.unlink(index_path_.c_str());  // tidiness only: the generation already disowns it
  } else {
    index_foreign_ = true;
  }
  generation_ = random_generation();
  std::uint8_t header[dcf::kFileHeaderBytes];
  dcf::encode_file_header({fingerprint_, generation_}, header);
  int err = ops_.ftruncate(fd_, 0) == 0 ? 0 : errno;
  if (err == 0) err = pwrite_full(ops_, fd_, header, sizeof header, 0);
  tail_.reset(dcf::kFileHeaderBytes);
  if (err != 0) {
    write_failed(err, std::nullopt);
    return;
  }
  file_valid_ = true;
  changed_ = true;
  check_max_bytes_at_open();
}

std::uint64_t DiskCacheStore::Impl::load(const dcf::FileHeader& header, std::uint64_t size) {
  std::uint64_t data_end = 0;
  const bool indexed = dcf::read_index_file(
      ops_, index_path_, header, size, limits_,
      [this](std::string&& path, const dcf::EntryInfo& e) { index_.put(std::move(path), e); }, &data_end);
  if (!indexed) index_.clear();
  const std::uint64_t from = indexed ? data_end : dcf::kFileHeaderBytes;
  const dcf::ScanResult scan = dcf::scan_entries(
      ops_, fd_, from, size, generation_, limits_,
      [this](std::string&& path, const dcf::EntryInfo& e) { index_.put(std::move(path), e); });
  index_current_ = indexed && scan.entries == 0 && scan.skipped_bytes == 0;
  rejected_ += scan.rejected;
  if (scan.rejected > 0) {
    add_note("rejected " + std::to_string(scan.rejected) +
             " entries that claim more than the pipeline's limits (max_file_size, max_image_pixels)");
  }
  if (scan.skipped_bytes > 0) {
    add_note("recovered: skipped " + format_bytes(scan.skipped_bytes) +
             " of unfinished or damaged entries");
  }
  return scan.valid_end;
}

std::optional<std::size_t> DiskCacheStore::Impl::lookup(const CacheKey& key, AlignedBuffer& out) {
  const std::optional<dcf::EntryInfo> found = index_.find(key.path);
  if (!found) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  const dcf::EntryInfo& entry = *found;
  if (entry.file_size != key.file_size || entry.mtime_ns != key.mtime_ns) {
    stale_.fetch_add(1, std::memory_order_relaxed);
    misses_.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  const auto bytes = static_cast<std::size_t>(entry.payload_bytes);
  if (out.capacity() < bytes) out.reserve(bytes);
  const ssize_t got = pread_full(ops_, fd_, out.data(), bytes, dcf::payload_offset(entry));
  if (got == static_cast<ssize_t>(bytes) &&
      dcf::payload_checksum(out.data(), bytes) == entry.payload_hash) {
    hits_.fetch_add(1, std::memory_order_relaxed);
    return bytes;
  }
  // A checksum mismatch, a read error, or a file cut short (rebuilt by another process):
  // never served; forgotten so the caller's recomputed payload replaces it.
  drop(key.path, entry);
  return std::nullopt;
}

void DiskCacheStore::Impl::drop(const std::string& path, const dcf::EntryInfo& entry) {
  dropped_.fetch_add(1, std::memory_order_relaxed);
  misses_.fetch_add(1, std::memory_order_relaxed);
  // Only this very entry: a concurrent insert may already have replaced it.
  if (!index_.erase_at(path, entry.offset)) return;
  changed_ = true;
  if (writer_ && file_valid_) {
    // Mark it dead in the file too, so a later scan does not index it again. Best effort: a
    // failure only means the next run drops it again.
    std::array<std::uint8_t, dcf::kEntryHeaderBytes + dcf::kMaxPathBytes> meta;
    dcf::encode_entry_header(entry, dcf::kDeadEntry, path, generation_, meta.data());
    pwrite_full(ops_, fd_, meta.data(), dcf::metadata_bytes(path.size()), entry.offset);
  }
}

bool DiskCacheStore::Impl::insert(const CacheKey& key, std::span<const std::uint8_t> payload) {
  if (!inserts_enabled_.load(std::memory_order_relaxed)) return false;
  if (key.path.empty() || key.path.size() > dcf::kMaxPathBytes) return false;
  // Two workers that missed the same sample both insert it; the second need not write.
  if (const std::optional<dcf::EntryInfo> held = index_.find(key.path);
      held && held->file_size == key.file_size && held->mtime_ns == key.mtime_ns &&
      held->payload_bytes == payload.size()) {
    return true;
  }
  dcf::EntryInfo entry;
  entry.payload_bytes = payload.size();
  entry.file_size = key.file_size;
  entry.mtime_ns = key.mtime_ns;
  entry.payload_hash = dcf::payload_checksum(payload.data(), payload.size());
  entry.path_bytes = static_cast<std::uint32_t>(key.path.size());
  const std::uint64_t meta_bytes = dcf::metadata_bytes(key.path.size());
  const Region region{0, meta_bytes + dcf::pad8(payload.size())};
  const std::optional<std::uint64_t> offset = reserve(region.bytes);
  if (!offset) return false;
  entry.offset = *offset;
  std::array<std::uint8_t, dcf::kEntryHeaderBytes + dcf::kMaxPathBytes> meta;
  dcf::encode_entry_header(entry, dcf::kLiveEntry, key.path, generation_, meta.data());
  // Payload first, header last: the header is the commit record (see the format).
  int err = pwrite_full(ops_, fd_, payload.data(), payload.size(), dcf::payload_offset(entry));
  if (err == 0) err = pwrite_full(ops_, fd_, meta.data(), meta_bytes, entry.offset);
  if (err != 0) {
    write_failed(err, Region{*offset, region.bytes});
    return false;
  }
  index_.put(key.path, entry);
  inserts_.fetch_add(1, std::memory_order_relaxed);
  changed_.store(true, std::memory_order_relaxed);
  return true;
}

void DiskCacheStore::Impl::write_failed(int err, std::optional<Region> region) {
  if (!warned_.exchange(true)) {
    std::fprintf(stderr,
                 "sluice: warning: disk cache %s: %s while writing; caching stops for this run, "
                 "cached entries are still served\n",
                 path_.c_str(), std::strerror(err));
  }
  disable(std::string("inserts disabled: ") + std::strerror(err) + " while writing");
  if (region) roll_back(*region);
}

void DiskCacheStore::Impl::write_index() {
  if (index_foreign_ || !index_replaceable()) return;
  // No fsync of the data file first: every payload is checked when read, so an index that
  // outlives unflushed data after a power cut only turns those entries into misses.
  dcf::IndexFileWriter writer(ops_, index_path_, {fingerprint_, generation_}, file_bytes());
  index_.for_each([&writer](const std::string& path, const dcf::EntryInfo& entry) { writer.add(path, entry); });
  writer.commit();
}

DiskCacheStats DiskCacheStore::Impl::stats() const {
  DiskCacheStats s;
  s.hits = hits_.load(std::memory_order_relaxed);
  s.misses = misses_.load(std::memory_order_relaxed);
  s.inserts = inserts_.load(std::memory_order_relaxed);
  s.stale = stale_.load(std::memory_order_relaxed);
  s.dropped_corrupt = dropped_.load(std::memory_order_relaxed);
  s.rejected = rejected_;
  s.entries = index_.entries();
  s.bytes = index_.bytes();
  s.writable = inserts_enabled_.load(std::memory_order_relaxed);
  std::lock_guard lock(note_mutex_);
  s.note = note_;
  return s;
}

DiskCacheStore::DiskCacheStore(DiskCacheOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

DiskCacheStore::~DiskCacheStore() = default;

std::optional<std::size_t> DiskCacheStore::lookup(const CacheKey& key, AlignedBuffer& out) {
  return impl_->lookup(key, out);
}

bool DiskCacheStore::insert(const CacheKey& key, std::span<const std::uint8_t> payload) {
  return impl_->insert(key, payload);
}

DiskCacheStats DiskCacheStore::stats() const { return impl_->stats(); }

}  // namespace sluice::stages
