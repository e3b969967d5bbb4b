// Saving and loading a model's weights: its parameters and buffers (BatchNorm's running
// statistics), by name, in one file. Optimizer state is not included.
//
// Format (little-endian), version 1:
//   header (40 bytes): magic "SLUICEWT", u32 version, u32 tensor count, u64 table bytes,
//                      u64 blob bytes, u32 CRC-32 of table and blob (zlib's polynomial), u32 zero
//   table: per tensor, u16 name length, the name, u8 dtype, u8 rank, i64 dims[rank],
//          u64 offset into the blob, u64 bytes
//   blob:  the tensors' elements, raw, each at a 256-byte aligned offset
//
// A file that is not one (bad magic), of another version, truncated, with trailing bytes or a
// checksum that does not match throws sluice::Error naming the file and the problem (codes
// kUnsupportedFormat, kCorruptData); one written for another model (names, shapes, dtypes) throws
// kInvalidArgument naming the first tensor that differs. A failed load changes no weight.
#pragma once

#include <string>

#include "sluice/train/context.hpp"
#include "sluice/train/sequential.hpp"

namespace sluice::train {

inline constexpr char kWeightsMagic[8] = {'S', 'L', 'U', 'I', 'C', 'E', 'W', 'T'};
inline constexpr std::uint32_t kWeightsVersion = 1;
inline constexpr std::size_t kWeightsHeaderBytes = 40;

// Writes to `path` + ".tmp" and renames, so a crash never leaves a half-written file under
// `path`. Throws sluice::Error(kIo) when the file cannot be written.
void save_weights(Context& ctx, Sequential& model, const std::string& path);
void load_weights(Context& ctx, Sequential& model, const std::string& path);

// CRC-32 (IEEE 802.3, as zlib's crc32) of `bytes`, continuing from `crc`.
std::uint32_t crc32(const void* bytes, std::size_t size, std::uint32_t crc = 0);

}  // namespace sluice::train
