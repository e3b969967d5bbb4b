// Indexing one tar shard: its samples (WebDataset's grouping: consecutive members that share a
// key, the name up to the first dot of its last component), each with where its image's data
// lies and its label; and the index file that keeps this beside the shard between runs.
//
// A damaged tar gives damaged samples, never an exception: a bad header checksum (the member it
// starts is lost; indexing resumes at the next block that is a valid ustar header), a member cut
// by the end of the file or larger than it, a malformed pax header, a key without an image or
// with two. Each damaged sample keeps the best name known and its cause, and becomes an item that
// fails when read, so OnError decides (stages/source/item_table.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace sluice::stages {

class FileOps;

enum class LabelKind : std::uint8_t { kNone, kNumber, kClassName };

struct ShardSample {
  std::string name;            // the image member's name; a damaged sample's best name known
  std::uint64_t offset = 0;    // where the image's data starts in the shard
  std::uint64_t size = 0;      // the image's bytes
  // The ustar header's own size field equals `size` (a pax record may set another): the read
  // checks the field then, besides the header's checksum and type.
  bool header_size_agrees = true;
  LabelKind label_kind = LabelKind::kNone;
  std::int32_t number = 0;     // kNumber: key.cls
  std::string class_name;      // kClassName: key.class
  std::string damage;          // empty: readable
};

struct IndexedShard {
  std::uint64_t shard_size = 0;
  std::int64_t mtime_ns = 0;
  std::vector<ShardSample> samples;
};

// Reads the shard's headers (and its label members, never its images) through `ops`. Throws
// sluice::Error only when the file cannot be read (kIo), with `path`.
IndexedShard scan_shard(FileOps& ops, int fd, std::uint64_t shard_size, std::int64_t mtime_ns,
                      const std::string& path);

// ---- the index file ("<shard>.sluice-idx", stages/tar/tar_source.cpp decides where) --------------
// Layout (little-endian): magic "SLUICETI", u32 version, u32 reserved, u64 shard size, i64 shard
// mtime (ns), u64 samples, u64 payload bytes, u64 XXH3 of the payload, u64 XXH3 of the header's
// first 56 bytes; then per sample: u64 offset, u64 size, u8 flags (bit 0 header_size_agrees),
// u8 label kind, i32 number, u16 name, u16 class name and u16 damage lengths, then those bytes.
inline constexpr std::size_t kShardIndexHeaderBytes = 64;

std::vector<std::uint8_t> encode_shard_index(const IndexedShard& index);
// The index, when `bytes` is an intact index of a shard of this size and mtime whose records all
// lie inside it; otherwise nullopt with `why` ("another shard's", "damaged", ...).
std::optional<IndexedShard> decode_shard_index(std::span<const std::uint8_t> bytes, std::uint64_t shard_size,
                                             std::int64_t mtime_ns, std::string& why);
// Whether these bytes start like an index of ours (any version or shard): such a file sluice may
// replace; any other file it must leave alone.
bool is_shard_index(std::span<const std::uint8_t> first_bytes);

}  // namespace sluice::stages
