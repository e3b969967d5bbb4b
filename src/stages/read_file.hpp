// The read stage's kernel: a whole file into a reusable buffer with pread, errors mapped to
// sluice::Error codes that name the path. The calls go through a FileOps (stages/file_ops.hpp),
// the real file system unless a caller hands another: tests inject EIO, vanished and truncated
// files and flipped bytes through it (tests/support/fault_fs.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "sluice/memory/aligned_buffer.hpp"
#include "stages/file_ops.hpp"

namespace sluice::stages {

// Reads `path` into `buffer` (grown if needed) and returns the byte count. Throws sluice::Error
// with the path: kNotFound, kPermissionDenied, kIo, kCorruptData ("empty file"), kTooLarge
// (over max_bytes, before reading anything). `ops` null: the real file system.
std::size_t read_file(const std::string& path, AlignedBuffer& buffer, std::uint64_t max_bytes,
                      FileOps* ops = nullptr);

// Size of a file from its metadata, or throws like read_file.
std::uint64_t file_size(const std::string& path, FileOps* ops = nullptr);

}  // namespace sluice::stages
