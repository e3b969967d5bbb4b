// Encoding and checking of DiskCacheStore's data-file headers and entry headers, the recovery scan of
// the data file, and the streaming reader and writer of its index file. The layouts are written
// down in disk_cache_format.hpp.
#include "stages/cache/disk_cache_format.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "sluice/detail/core/binary_io.hpp"
#include "sluice/core/error.hpp"
#include "stages/source/file_ops.hpp"

namespace sluice::stages::disk_cache_format {

namespace {

constexpr char kFileMagic[8] = {'S', 'L', 'U', 'I', 'C', 'E', 'D', 'C'};
constexpr char kIndexMagic[8] = {'S', 'L', 'U', 'I', 'C', 'E', 'I', 'X'};
constexpr std::size_t kIndexHeaderBytes = 48;
constexpr std::size_t kIndexRecordBytes = 48;
constexpr std::size_t kIndexTrailerBytes = 16;
constexpr std::size_t kIndexChunkBytes = std::size_t{1} << 20;
// The open-time scan reads a header (and its path) with one small read; when entries are small
// it reads a larger window instead, so neighbouring headers come with it. Either way it reads
// about the headers, not the payloads.
constexpr std::size_t kScanReadBytes = std::size_t{4} << 10;
constexpr std::size_t kScanWindowBytes = std::size_t{64} << 10;
constexpr std::uint64_t kSmallEntryBytes = std::uint64_t{8} << 10;
// Past a damaged or unfinished region the scan looks for the next valid header in chunks.
constexpr std::size_t kResyncChunkBytes = std::size_t{256} << 10;

void put32(std::uint8_t* p, std::uint32_t v) { core::put_le(p, v); }
void put64(std::uint8_t* p, std::uint64_t v) { core::put_le(p, v); }
std::uint32_t get32(const std::uint8_t* p) { return core::get_le<std::uint32_t>(p); }
std::uint64_t get64(const std::uint8_t* p) { return core::get_le<std::uint64_t>(p); }

XXH3_state_t* state_of(void* p) { return static_cast<XXH3_state_t*>(p); }

// a + b, or nullopt when it wraps.
std::optional<std::uint64_t> checked_add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return std::nullopt;
  return sum;
}

// Reads the data file for the open-time scan through core::WindowReader: the bytes asked for come
// from the current window or from a new read of at least read_bytes() at that offset. A failed
// read ends the scan where it is (nullptr, as the end of the file): for a cache, what cannot be
// read is a miss, never an error; the entries found before it are served.
class ScanReader {
 public:
  ScanReader(FileOps& ops, int fd, std::uint64_t file_bytes)
      : reader_([&ops, fd](void* buffer, std::size_t bytes, std::uint64_t offset) {
                  return static_cast<long>(pread_full(ops, fd, buffer, bytes, offset));
                },
                file_bytes, "the disk cache", kScanReadBytes) {}

  void set_read_bytes(std::size_t bytes) { reader_.set_read_bytes(bytes); }

  // `bytes` bytes at `offset`, or nullptr when they are not all in the file (or cannot be read).
  const std::uint8_t* at(std::uint64_t offset, std::size_t bytes) {
    try {
      return reader_.at(offset, bytes);
    } catch (const Error&) {
      return nullptr;
    }
  }

 private:
  core::WindowReader reader_;
};

// Sequential reads of the index file through a 1 MiB window; every byte handed out is added to
// the running checksum, which is only compared at the end (records are emitted before that, and
// the caller discards them when the checksum fails).
class IndexReader {
 public:
  IndexReader(FileOps& ops, int fd, std::uint64_t file_bytes)
      : ops_(ops), fd_(fd), file_bytes_(file_bytes), state_(XXH3_createState()) {
    XXH3_64bits_reset(state_);
  }
  ~IndexReader() { XXH3_freeState(state_); }
  IndexReader(const IndexReader&) = delete;
  IndexReader& operator=(const IndexReader&) = delete;

  std::uint64_t position() const { return consumed_; }
  std::uint64_t digest() const { return XXH3_64bits_digest(state_); }

  // `bytes` contiguous bytes, or nullptr at end of file or on a read error.
  const std::uint8_t* take(std::size_t bytes, bool hashed = true) {
    if (window_.size() - used_ < bytes) {
      if (!refill(bytes)) return nullptr;
    }
    const std::uint8_t* p = window_.data() + used_;
    used_ += bytes;
    consumed_ += bytes;
    if (hashed) XXH3_64bits_update(state_, p, bytes);
    return p;
  }

 private:
  bool refill(std::size_t bytes) {
    const std::size_t left = window_.size() - used_;
    // An empty window may have no storage yet (data() == nullptr), and memmove's arguments must
    // be valid pointers even for zero bytes (UBSan holds us to it).
    if (left > 0) std::memmove(window_.data(), window_.data() + used_, left);
    const std::uint64_t file_left = file_bytes_ - consumed_ - left;
    const std::size_t want = static_cast<std::size_t>(
        std::min<std::uint64_t>(std::max(bytes, kIndexChunkBytes) - left, file_left));
    window_.resize(left + want);
    used_ = 0;
    if (want > 0) {
      const ssize_t n = pread_full(ops_, fd_, window_.data() + left, want, consumed_ + left);
      if (n < 0 || static_cast<std::size_t>(n) != want) return false;
    }
    return window_.size() >= bytes;
  }

  FileOps& ops_;
  int fd_;
  std::uint64_t file_bytes_;
  XXH3_state_t* state_;
  std::vector<std::uint8_t> window_;
  std::size_t used_ = 0;
  std::uint64_t consumed_ = 0;
};

}  // namespace

void encode_file_header(const FileHeader& header, std::uint8_t* out) {
  std::memset(out, 0, kFileHeaderBytes);
  std::memcpy(out, kFileMagic, 8);
  put32(out + 8, kVersion);
  put32(out + 12, static_cast<std::uint32_t>(kFileHeaderBytes));
  put64(out + 16, header.fingerprint);
  put64(out + 24, header.generation);
  put64(out + 56, XXH3_64bits(out, 56));
}

bool starts_like_ours(const std::uint8_t* in, std::size_t bytes, bool index) {
  return std::memcmp(in, index ? kIndexMagic : kFileMagic, std::min<std::size_t>(bytes, 8)) == 0;
}

bool replaceable(FileOps& ops, const std::string& path, bool index) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. O_NOFOLLOW: a
  // symlink planted at our name is not ours, whatever it points to.
  const int fd = ops.open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY, 0);
  if (fd < 0) return errno == ENOENT;
  struct stat st {};
  bool ours = ops.fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (ours && st.st_size > 0) {
    std::uint8_t magic[8] = {};
    const ssize_t got = pread_full(ops, fd, magic, sizeof magic, 0);
    ours = got > 0 && starts_like_ours(magic, static_cast<std::size_t>(got), index);
  }
  ops.close(fd);
  return ours;
}

std::optional<FileHeader> decode_file_header(const std::uint8_t* in) {
  if (std::memcmp(in, kFileMagic, 8) != 0) return std::nullopt;
  if (get32(in + 8) != kVersion || get32(in + 12) != kFileHeaderBytes) return std::nullopt;
  if (get64(in + 56) != XXH3_64bits(in, 56)) return std::nullopt;
  return FileHeader{get64(in + 16), get64(in + 24)};
}

std::uint64_t payload_checksum(const std::uint8_t* data, std::size_t bytes) {
  return XXH3_64bits(data, bytes);
}

Bounds check_bounds(const EntryInfo& e, std::uint64_t end, const Limits& limits) {
  if (e.path_bytes == 0 || e.path_bytes > kMaxPathBytes) return Bounds::kBadLayout;
  if (e.offset < kFileHeaderBytes || e.offset % 8 != 0 || e.offset > end) return Bounds::kBadLayout;
  if (limits.max_payload_bytes != 0 && e.payload_bytes > limits.max_payload_bytes) return Bounds::kOverLimit;
  if (limits.max_source_bytes != 0 && e.file_size > limits.max_source_bytes) return Bounds::kOverLimit;
  // metadata_bytes is at most 48 + 4096 here, so only the sums with offset and payload can wrap.
  const std::optional<std::uint64_t> payload_at = checked_add(e.offset, metadata_bytes(e.path_bytes));
  const std::optional<std::uint64_t> last = payload_at ? checked_add(*payload_at, e.payload_bytes) : std::nullopt;
  if (!last || *last > end) return Bounds::kBadLayout;
  return Bounds::kOk;
}

namespace {
std::uint64_t header_checksum(const std::uint8_t* fixed, const std::uint8_t* path,
                              std::uint32_t path_bytes, std::uint64_t generation) {
  return XXH3_64bits_withSeed(path, path_bytes, XXH3_64bits_withSeed(fixed, 40, generation));
}
}  // namespace

void encode_entry_header(const EntryInfo& entry, std::uint32_t magic, std::string_view path,
                         std::uint64_t generation, std::uint8_t* out) {
  const std::size_t bytes = metadata_bytes(path.size());
  std::memset(out, 0, bytes);
  put32(out, magic);
  put32(out + 4, static_cast<std::uint32_t>(path.size()));
  put64(out + 8, entry.payload_bytes);
  put64(out + 16, entry.file_size);
  put64(out + 24, static_cast<std::uint64_t>(entry.mtime_ns));
  put64(out + 32, entry.payload_hash);
  std::memcpy(out + kEntryHeaderBytes, path.data(), path.size());
  put64(out + 40, header_checksum(out, out + kEntryHeaderBytes,
                                  static_cast<std::uint32_t>(path.size()), generation));
}

RawEntryHeader decode_entry_fixed(const std::uint8_t* in) {
  RawEntryHeader raw;
  raw.magic = get32(in);
  raw.info.path_bytes = get32(in + 4);
  raw.info.payload_bytes = get64(in + 8);
  raw.info.file_size = get64(in + 16);
  raw.info.mtime_ns = static_cast<std::int64_t>(get64(in + 24));
  raw.info.payload_hash = get64(in + 32);
  raw.header_hash = get64(in + 40);
  return raw;
}

bool entry_checksum_ok(const std::uint8_t* in, const RawEntryHeader& raw, std::uint64_t generation) {
  return header_checksum(in, in + kEntryHeaderBytes, raw.info.path_bytes, generation) ==
         raw.header_hash;
}

namespace {

// The entry at `offset`: kOk when its header and path are complete, in bounds and checksummed;
// kOverLimit when it is checksummed but claims more than the limits allow.
Bounds parse_entry(ScanReader& reader, std::uint64_t offset, std::uint64_t size, std::uint64_t generation,
                   const Limits& limits, std::string* path, RawEntryHeader* raw) {
  const std::uint8_t* p = reader.at(offset, kEntryHeaderBytes);
  if (p == nullptr) return Bounds::kBadLayout;
  *raw = decode_entry_fixed(p);
  if (raw->magic != kLiveEntry && raw->magic != kDeadEntry) return Bounds::kBadLayout;
  raw->info.offset = offset;
  // The layout first (the path length decides how many bytes the checksum covers), the limits
  // after the checksum, so only a header that is really a header counts as rejected.
  Bounds bounds = check_bounds(raw->info, size, Limits{});
  if (bounds != Bounds::kOk) return bounds;
  p = reader.at(offset, metadata_bytes(raw->info.path_bytes));
  if (p == nullptr || !entry_checksum_ok(p, *raw, generation)) return Bounds::kBadLayout;
  bounds = check_bounds(raw->info, size, limits);
  if (bounds != Bounds::kOk) return bounds;
  path->assign(reinterpret_cast<const char*>(p + kEntryHeaderBytes), raw->info.path_bytes);
  return Bounds::kOk;
}

// The next 8-aligned position at or after `from` that starts with an entry magic.
std::optional<std::uint64_t> find_magic(ScanReader& reader, std::uint64_t from, std::uint64_t size) {
  while (from + kEntryHeaderBytes <= size) {
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(kResyncChunkBytes, size - from));
    const std::uint8_t* w = reader.at(from, n);
    if (w == nullptr) return std::nullopt;
    for (std::size_t i = 0; i + 4 <= n; i += 8) {
      const std::uint32_t m = get32(w + i);
      if (m == kLiveEntry || m == kDeadEntry) return from + i;
    }
    from += n;
  }
  return std::nullopt;
}

}  // namespace

ScanResult scan_entries(FileOps& ops, int fd, std::uint64_t from, std::uint64_t size,
                        std::uint64_t generation, const Limits& limits, const EntryEmit& emit) {
  ScanReader reader(ops, fd, size);
  ScanResult result;
  result.valid_end = from;
  std::uint64_t offset = pad8(from);
  while (offset + kEntryHeaderBytes <= size) {
    std::string path;
    RawEntryHeader raw;
    const Bounds bounds = parse_entry(reader, offset, size, generation, limits, &path, &raw);
    if (bounds == Bounds::kOverLimit) ++result.rejected;
    if (bounds == Bounds::kOk) {
      if (offset > pad8(result.valid_end)) result.skipped_bytes += offset - pad8(result.valid_end);
      if (raw.magic == kLiveEntry) emit(std::move(path), raw.info);
      ++result.entries;
      reader.set_read_bytes(raw.info.payload_bytes < kSmallEntryBytes ? kScanWindowBytes : kScanReadBytes);
      result.valid_end = entry_end(raw.info);
      offset = pad8(result.valid_end);
      continue;
    }
    const std::optional<std::uint64_t> next = find_magic(reader, offset + 8, size);
    if (!next) break;
    offset = *next;
  }
  return result;
}

bool read_index_file(FileOps& ops, const std::string& path, const FileHeader& data_header,
                     std::uint64_t data_file_bytes, const Limits& limits, const EntryEmit& emit,
                     std::uint64_t* data_end) {
  const int fd = ops.open(path.c_str(), O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return false;
  struct stat st {};
  bool ok = ops.fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
            static_cast<std::uint64_t>(st.st_size) >= kIndexHeaderBytes + kIndexTrailerBytes;
  if (ok) {
    const auto file_bytes = static_cast<std::uint64_t>(st.st_size);
    const std::uint64_t records_end = file_bytes - kIndexTrailerBytes;
    IndexReader in(ops, fd, file_bytes);
    const std::uint8_t* h = in.take(kIndexHeaderBytes);
    ok = h != nullptr && std::memcmp(h, kIndexMagic, 8) == 0 && get32(h + 8) == kVersion &&
         get64(h + 16) == data_header.fingerprint && get64(h + 24) == data_header.generation;
    const std::uint64_t end = ok ? get64(h + 32) : 0;
    ok = ok && end >= kFileHeaderBytes && end <= data_file_bytes;
    std::uint64_t count = 0;
    while (ok && in.position() < records_end) {
      const std::uint8_t* r = records_end - in.position() >= kIndexRecordBytes ? in.take(kIndexRecordBytes) : nullptr;
      if (r == nullptr) {
        ok = false;
        break;
      }
      EntryInfo e;
      e.offset = get64(r);
      e.payload_bytes = get64(r + 8);
      e.file_size = get64(r + 16);
      e.mtime_ns = static_cast<std::int64_t>(get64(r + 24));
      e.payload_hash = get64(r + 32);
      e.path_bytes = get32(r + 40);
      // Bounds first, so a damaged length cannot make us read (or allocate) absurd amounts
      // before the checksum at the end would have caught it.
      if (check_bounds(e, end, limits) != Bounds::kOk || pad8(e.path_bytes) > records_end - in.position()) {
        ok = false;
        break;
      }
      const std::uint8_t* p = in.take(pad8(e.path_bytes));
      if (p == nullptr) {
        ok = false;
        break;
      }
      emit(std::string(reinterpret_cast<const char*>(p), e.path_bytes), e);
      ++count;
    }
    if (ok) {
      const std::uint8_t* c = in.take(8);
      const std::uint64_t expected = in.digest();
      const std::uint8_t* t = in.take(8, /*hashed=*/false);
      ok = c != nullptr && t != nullptr && get64(c) == count && get64(t) == expected;
    }
    if (ok) *data_end = end;
  }
  ops.close(fd);
  return ok;
}

IndexFileWriter::IndexFileWriter(FileOps& ops, std::string path, const FileHeader& data_header,
                                 std::uint64_t data_end)
    : ops_(ops), path_(std::move(path)), tmp_path_(path_ + ".tmp-" + std::to_string(::getpid())) {
  hash_state_ = XXH3_createState();
  XXH3_64bits_reset(state_of(hash_state_));
  buffer_.reserve(kIndexChunkBytes);
  // Created exclusively and never through a link (a symlink planted at the temporary's name is
  // not followed: the open fails and no index is written), readable by the owner only: the index
  // names the reader's files. The writer holds the cache's lock, so the name is its own; one a
  // killed writer left is removed first.
  if (ops_.unlink(tmp_path_.c_str()) != 0 && errno != ENOENT) failed_ = true;
  fd_ = failed_ ? -1 : ops_.open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  failed_ = fd_ < 0;
  std::uint8_t h[kIndexHeaderBytes] = {};
  std::memcpy(h, kIndexMagic, 8);
  put32(h + 8, kVersion);
  put64(h + 16, data_header.fingerprint);
  put64(h + 24, data_header.generation);
  put64(h + 32, data_end);
  append(h, sizeof h);
}

IndexFileWriter::~IndexFileWriter() {
  if (fd_ >= 0) {
    ops_.close(fd_);
    ops_.unlink(tmp_path_.c_str());
  }
  XXH3_freeState(state_of(hash_state_));
}

void IndexFileWriter::add(std::string_view path, const EntryInfo& entry) {
  std::uint8_t r[kIndexRecordBytes] = {};
  put64(r, entry.offset);
  put64(r + 8, entry.payload_bytes);
  put64(r + 16, entry.file_size);
  put64(r + 24, static_cast<std::uint64_t>(entry.mtime_ns));
  put64(r + 32, entry.payload_hash);
  put32(r + 40, static_cast<std::uint32_t>(path.size()));
  append(r, sizeof r);
  append(path.data(), path.size());
  static constexpr std::uint8_t kZeros[8] = {};
  append(kZeros, pad8(path.size()) - path.size());
  ++count_;
}

void IndexFileWriter::append(const void* data, std::size_t bytes) {
  if (failed_) return;
  XXH3_64bits_update(state_of(hash_state_), data, bytes);
  const auto* p = static_cast<const std::uint8_t*>(data);
  buffer_.insert(buffer_.end(), p, p + bytes);
  if (buffer_.size() >= kIndexChunkBytes) flush();
}

void IndexFileWriter::flush() {
  if (failed_ || buffer_.empty()) return;
  failed_ = pwrite_full(ops_, fd_, buffer_.data(), buffer_.size(), written_) != 0;
  written_ += buffer_.size();
  buffer_.clear();
}

bool IndexFileWriter::commit() {
  std::uint8_t count[8];
  put64(count, count_);
  append(count, 8);
  std::uint8_t digest[8];
  put64(digest, XXH3_64bits_digest(state_of(hash_state_)));
  if (!failed_) buffer_.insert(buffer_.end(), digest, digest + 8);
  flush();
  // fsync before rename: otherwise a power cut could leave the new name on an empty file. (An
  // empty or torn index is only ignored, but there is no reason to lose it.)
  if (failed_ || ops_.fsync(fd_) != 0) return false;
  const int fd = fd_;
  fd_ = -1;
  if (ops_.close(fd) != 0 || ops_.rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    ops_.unlink(tmp_path_.c_str());
    return false;
  }
  return true;
}

}  // namespace sluice::stages::disk_cache_format
