// The read stage's kernel: a whole file into a reusable buffer with pread, errors mapped to
// sluice::Error codes that name the path; and ItemReader, which reads an item of the item table
// wherever it lies (a file, or a member of a tar shard). The calls go through a FileOps
// (stages/source/file_ops.hpp), the real file system unless a caller hands another: tests inject EIO,
// vanished and truncated files and flipped bytes through it (tests/support/fault_fs.hpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "sluice/detail/memory/aligned_buffer.hpp"
#include "stages/source/file_ops.hpp"
#include "stages/source/item_table.hpp"

namespace sluice::stages {

// Reads `path` into `buffer` (grown if needed) and returns the byte count. Throws sluice::Error
// with the path: kNotFound, kPermissionDenied, kIo, kCorruptData ("empty file"), kTooLarge
// (over max_bytes, before reading anything). `ops` null: the real file system.
std::size_t read_file(const std::string& path, AlignedBuffer& buffer, std::uint64_t max_bytes,
                      FileOps* ops = nullptr);

// Size of a file from its metadata, or throws like read_file.
std::uint64_t file_size(const std::string& path, FileOps* ops = nullptr);

// Reads items of an ItemTable: a file by its path (read_file); a tar member with one pread of its
// header and data at its offset, from a shard this reader keeps open (no open and close per
// sample: that is what shards save). Each read checks the member's own header (checksum, regular
// file, and its size when the header holds it), so an index that no longer matches its shard
// fails that sample instead of serving other bytes. One per worker: not thread-safe.
class ItemReader {
 public:
  explicit ItemReader(FileOps* ops = nullptr);
  ~ItemReader();  // closes the shards it holds open
  ItemReader(const ItemReader&) = delete;
  ItemReader& operator=(const ItemReader&) = delete;

  // Item `item`'s bytes, read into `buffer` (grown if needed), as a view into it. Throws
  // sluice::Error naming the item (its path, or shard:member) with read_file's codes, and for a
  // member also kCorruptData when it is damaged, cut, or its header does not match the index.
  std::span<const std::uint8_t> read(const ItemTable& items, std::int64_t item, AlignedBuffer& buffer,
                                     std::uint64_t max_bytes);
  // Its size: a member's from the table, a file's from its metadata. Throws like read().
  std::uint64_t size(const ItemTable& items, std::int64_t item);
  // The buffer read() needs for an item of `bytes`: a tar member is read with its header block.
  static std::uint64_t workspace_requirements(std::uint64_t bytes, ItemTable::Kind kind);
  // The whole path of a file item, assembled in this reader (valid until its next call).
  const std::string& file_path(const ItemTable::Location& at);
  // Reads through `ops` from now on (null: the real file system), closing what it holds open
  // through the old one: a workspace may serve programs configured with different seams.
  void use(FileOps* ops);

 private:
  void close_all();
  static constexpr int kOpenShards = 8;
  struct OpenShard {
    const ItemTable* table = nullptr;
    std::int32_t shard = -1;
    int fd = -1;
    std::uint64_t last_use = 0;
  };
  // `partial`: the shard is still arriving; open its partial file (the copy if it was moved).
  int shard_fd(const ItemTable& items, std::int32_t shard, bool partial);

  FileOps* ops_;
  std::string path_;
  std::array<OpenShard, kOpenShards> open_{};
  std::uint64_t uses_ = 0;
};

}  // namespace sluice::stages
