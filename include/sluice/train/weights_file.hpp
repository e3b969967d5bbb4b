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
inline constexpr std::uint32_t kWeightsVersion = 2;  // 1 held a CRC-32: refused, with a message
inline constexpr std::size_t kWeightsHeaderBytes = 40;

// Writes an exclusively created temporary beside `path`, fsyncs it and renames it over `path`,
// so a crash never leaves a half-written file there and nothing planted at the path or beside it
// is written through. Only an absent path or a weights file is replaced. Throws sluice::Error
// naming the path and the reason (ENOSPC, EACCES; kInvalidArgument for a foreign file, a symlink).
void save_weights(Context& ctx, Sequential& model, const std::string& path);
void load_weights(Context& ctx, Sequential& model, const std::string& path);

// Throws what save_weights would for a path it cannot write (a missing or read-only folder, a
// foreign file or a symlink there), without writing: for a run that saves at its end.
void check_weights_output(const std::string& path);

}  // namespace sluice::train
