// The read stage's kernel: a whole file into a reusable buffer with pread, errors mapped to
// sluice::Error codes that name the path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "sluice/memory/aligned_buffer.hpp"

namespace sluice::stages {

// Reads `path` into `buffer` (grown if needed) and returns the byte count. Throws sluice::Error
// with the path: kNotFound, kPermissionDenied, kIo, kCorruptData ("empty file"), kTooLarge
// (over max_bytes, before reading anything).
std::size_t read_file(const std::string& path, AlignedBuffer& buffer, std::uint64_t max_bytes);

// Size of a file from its metadata, or throws like read_file.
std::uint64_t file_size(const std::string& path);

}  // namespace sluice::stages
