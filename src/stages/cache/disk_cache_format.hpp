// The on-disk format of DiskCacheStore (docs/decisions/disk-cache.md): byte layouts, checksums, the
// scan that recovers entries after a crash, and the index file that lets a cache open without
// reading its entries. Kept apart from disk_cache.cpp
// so the format can be read (and tested) in one place. All integers are little-endian.
//
// Data file (the cache path):
//   file header, 64 bytes:
//     0  char[8]  "SLUICEDC"
//     8  u32      format version (1)
//     12 u32      header bytes (64)
//     16 u64      fingerprint of the pipeline upstream
//     24 u64      generation: random, new whenever the file is (re)created; seeds entry checksums
//     32 u8[24]   zero
//     56 u64      XXH3-64 of bytes 0..55
//   then entries, each starting at a multiple of 8:
//     0  u32      "SDCE" (live) or "SDCD" (dead: its payload failed its checksum)
//     4  u32      path bytes (1..4096)
//     8  u64      payload bytes
//     16 u64      source file size
//     24 i64      source file mtime, ns
//     32 u64      XXH3-64 of the payload
//     40 u64      header checksum: XXH3-64 of the path seeded with XXH3-64 of bytes 0..39 seeded
//                 with the generation (so a stale header of a former file never validates)
//     48 path, zero padded to a multiple of 8; then the payload
//   An entry is written payload first and header last: its header is its commit record. A writer
//   killed mid-entry leaves a region with no valid header, which readers skip and the next writer
//   truncates when it is at the end.
//
// Index file (the cache path + ".idx"), written by the writer when it closes (write to .idx.tmp,
// fsync, rename): a snapshot of the in-memory index, so opening reads it instead of every header.
//   header, 48 bytes: "SLUICEIX", u32 version, u32 zero, u64 fingerprint, u64 generation,
//                     u64 data_end (the data file's size when written), u64 zero
//   records: u64 entry offset, u64 payload bytes, u64 file size, i64 mtime ns, u64 payload XXH3,
//            u32 path bytes, u32 zero, path zero padded to 8
//   trailer: u64 record count, u64 XXH3-64 of every byte before it
//   It is used only when its fingerprint and generation match the data file's and data_end is
//   within it; entries past data_end (appended by a run that did not close) are then scanned.
//
// Trust: checksums say a header is intact, not that its numbers are sane, since anyone
// can write a file with valid XXH3s. Every length read from either file is bounded (Limits, the
// file's own size, kMaxPathBytes) before it takes part in any arithmetic, and the sums are
// checked for overflow, so a crafted file can neither make a reader allocate or read absurd
// amounts nor wrap an offset around.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::stages {
class FileOps;
}

namespace sluice::stages::disk_cache_format {

inline constexpr std::uint32_t kVersion = 1;
inline constexpr std::size_t kFileHeaderBytes = 64;
inline constexpr std::size_t kEntryHeaderBytes = 48;
inline constexpr std::size_t kMaxPathBytes = 4096;
inline constexpr std::uint32_t kLiveEntry = 0x45434453;  // "SDCE" in file order
inline constexpr std::uint32_t kDeadEntry = 0x44434453;  // "SDCD"

constexpr std::uint64_t pad8(std::uint64_t n) { return (n + 7) & ~std::uint64_t{7}; }

struct FileHeader {
  std::uint64_t fingerprint = 0;
  std::uint64_t generation = 0;
};

void encode_file_header(const FileHeader& header, std::uint8_t* out);  // kFileHeaderBytes
// True when the first `bytes` bytes of a file (any number, 0 included) could be the start of a
// file sluice wrote: a data file (`index` false) or an index file. What is not is never
// truncated, overwritten or unlinked.
bool starts_like_ours(const std::uint8_t* in, std::size_t bytes, bool index);
// The same for the file at `path`, read through `ops` without blocking (a FIFO there is not ours)
// and without following a symlink for the last component: true when it does not exist, or is an
// empty regular file or a regular file with our magic.
bool replaceable(FileOps& ops, const std::string& path, bool index);
// nullopt: not a sluice cache, another format version, or a damaged header.
std::optional<FileHeader> decode_file_header(const std::uint8_t* in);

// One entry as the in-memory index keeps it (the path is the index's key).
struct EntryInfo {
  std::uint64_t offset = 0;  // of the entry header in the data file
  std::uint64_t payload_bytes = 0;
  std::uint64_t file_size = 0;
  std::int64_t mtime_ns = 0;
  std::uint64_t payload_hash = 0;
  std::uint32_t path_bytes = 0;
};

constexpr std::uint64_t metadata_bytes(std::uint64_t path_bytes) {
  return kEntryHeaderBytes + pad8(path_bytes);
}
constexpr std::uint64_t payload_offset(const EntryInfo& e) { return e.offset + metadata_bytes(e.path_bytes); }
// The end of the entry's bytes; the next entry starts at pad8 of it.
constexpr std::uint64_t entry_end(const EntryInfo& e) { return payload_offset(e) + e.payload_bytes; }

std::uint64_t payload_checksum(const std::uint8_t* data, std::size_t bytes);

// What an entry may claim, from the pipeline's own limits (a decoded image is at most
// max_image_pixels x channels + its header; an encoded file at most max_file_size). 0: no bound
// beyond the file's size.
struct Limits {
  std::uint64_t max_payload_bytes = 0;
  std::uint64_t max_source_bytes = 0;
};

// Why an entry's numbers are refused, or kOk; `end` bounds the entry's last byte. Checked 64-bit
// arithmetic: no sum wraps.
enum class Bounds : std::uint8_t { kOk, kBadLayout, kOverLimit };
Bounds check_bounds(const EntryInfo& entry, std::uint64_t end, const Limits& limits);

// Writes the header and the zero-padded path into `out` (metadata_bytes(path) bytes).
void encode_entry_header(const EntryInfo& entry, std::uint32_t magic, std::string_view path,
                         std::uint64_t generation, std::uint8_t* out);

// The fixed 48 bytes of an entry header, not yet validated.
struct RawEntryHeader {
  std::uint32_t magic = 0;
  EntryInfo info;  // offset left 0
  std::uint64_t header_hash = 0;
};
RawEntryHeader decode_entry_fixed(const std::uint8_t* in);
// True when the checksum matches; `in` holds the fixed part followed by the path.
bool entry_checksum_ok(const std::uint8_t* in, const RawEntryHeader& raw, std::uint64_t generation);

// Recovers entries from the data file without an index: reads each header (and its path) from
// `from` to `size`, skips regions with no valid header (an unfinished write, damage) by looking
// for the next one, and calls `emit` for every live entry in file order (a later entry for the
// same path replaces an earlier one). Reads about the headers, not the payloads.
struct ScanResult {
  std::uint64_t valid_end = 0;      // end of the last valid entry (`from` when none)
  std::uint64_t skipped_bytes = 0;  // in regions between valid entries that held none
  std::int64_t entries = 0;         // valid headers seen, dead ones included
  std::int64_t rejected = 0;        // valid checksums, but sizes over the Limits: not indexed
};
using EntryEmit = std::function<void(std::string&& path, const EntryInfo& entry)>;
ScanResult scan_entries(FileOps& ops, int fd, std::uint64_t from, std::uint64_t size,
                        std::uint64_t generation, const Limits& limits, const EntryEmit& emit);

// The index file. read_index_file calls `emit` for each record as it streams through the file and
// returns false (the caller then discards what was emitted) when the file is absent, damaged or
// belongs to another data file, or when any record is out of bounds (check_bounds); on success
// *data_end says where the data file's scan resumes.
bool read_index_file(FileOps& ops, const std::string& path, const FileHeader& data_header,
                     std::uint64_t data_file_bytes, const Limits& limits, const EntryEmit& emit,
                     std::uint64_t* data_end);

// Streams records to `<path>.tmp`; commit() adds the trailer, fsyncs and renames it over `path`.
// Any failure (a full disk included) leaves no file behind and is reported as false, silently:
// without an index the next open scans the data file instead.
class IndexFileWriter {
 public:
  IndexFileWriter(FileOps& ops, std::string path, const FileHeader& data_header,
                  std::uint64_t data_end);
  ~IndexFileWriter();
  IndexFileWriter(const IndexFileWriter&) = delete;
  IndexFileWriter& operator=(const IndexFileWriter&) = delete;

  void add(std::string_view path, const EntryInfo& entry);
  bool commit();

 private:
  void append(const void* data, std::size_t bytes);
  void flush();

  FileOps& ops_;
  std::string path_;
  std::string tmp_path_;
  int fd_ = -1;
  bool failed_ = false;
  std::uint64_t written_ = 0;
  std::uint64_t count_ = 0;
  std::vector<std::uint8_t> buffer_;
  void* hash_state_ = nullptr;  // XXH3_state_t, kept opaque here
};

}  // namespace sluice::stages::disk_cache_format
