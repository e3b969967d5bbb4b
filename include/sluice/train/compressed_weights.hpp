// CompressedWeights: a model's weights with the pruned ones left out, resident in memory and as a
// file. Each prunable tensor (sluice/train/pruning.hpp: rank >= 2) is a bitmap with one bit an
// element (set: the element is not zero) and its nonzero elements packed in order; every other
// tensor (biases, BatchNorm's parameters and running statistics), and a prunable one that the
// bitmap would not make smaller (under about 3 % zeros), is kept dense. At sparsity s a pruned
// f32 tensor of n elements takes n / 8 + 4 n (1 - s) bytes instead of 4 n: at 80 %, 23 %.
// An element counts as zero when all its bits are (so -0.0 is kept): decompression restores
// every tensor bit for bit.
//
// File format (little-endian), version 1, after sluice/train/weights_file.hpp's weights file:
//   header (40 bytes): magic "SLUICESP", u32 version, u32 tensor count, u64 table bytes,
//                      u64 blob bytes, u32 CRC-32 of table and blob (zlib's polynomial), u32 zero
//   table: per tensor, u16 name length, the name, u8 dtype, u8 rank, i64 dims[rank],
//          u8 encoding (0 dense, 1 bitmap), u64 offset into the blob, u64 bitmap bytes,
//          u64 value bytes
//   blob:  per tensor its bitmap (u64 words, ceil(n / 64) of them; none when dense), then its
//          values (the nonzero elements, or all of them when dense), packed without padding
//
// A file that is not one (bad magic), of another version, truncated, with trailing bytes, a
// checksum that does not match or an inconsistent table throws sluice::Error naming the file
// and the problem (kUnsupportedFormat, kCorruptData); one for another model throws
// kInvalidArgument naming the first tensor that differs. A failed restore changes no weight.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sluice/core/dtype.hpp"
#include "sluice/core/shape.hpp"
#include "sluice/train/context.hpp"
#include "sluice/train/sequential.hpp"

namespace sluice::train {

inline constexpr char kSparseWeightsMagic[8] = {'S', 'L', 'U', 'I', 'C', 'E', 'S', 'P'};
inline constexpr std::uint32_t kSparseWeightsVersion = 2;  // 1 held a CRC-32: refused, with a message
inline constexpr std::size_t kSparseWeightsHeaderBytes = 40;

struct CompressedTensor {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  bool sparse = false;                 // bitmap + nonzero values; else dense values
  std::vector<std::uint64_t> bitmap;   // sparse: bit i set when element i is nonzero
  std::vector<std::uint8_t> values;    // the nonzero elements' bytes in order (all when dense)

  std::int64_t nonzeros() const;
  // Bytes held: bitmap and values.
  std::size_t bytes() const { return bitmap.size() * sizeof(std::uint64_t) + values.size(); }
  std::size_t dense_bytes() const { return static_cast<std::size_t>(shape.elements()) * size_of(dtype); }
};

class CompressedWeights {
 public:
  // The model's parameters and buffers (in checkpoint order): prunable f32 parameters as
  // bitmaps when that is smaller, the others dense.
  static CompressedWeights from_model(Context& ctx, Sequential& model);
  // Reads and validates a file (see above).
  static CompressedWeights load(const std::string& path);

  // Writes the file atomically (an exclusive temporary beside it, fsync, rename), replacing only
  // an absent path or a pruned weights file. Throws sluice::Error naming the path and the reason.
  void save(const std::string& path) const;
  // Decompresses into the model's tensors, after checking every name, dtype and shape.
  void restore(Context& ctx, Sequential& model) const;

  // Bytes resident in memory (bitmaps and values), and what the same tensors take dense.
  std::size_t resident_bytes() const;
  std::size_t dense_bytes() const;
  const std::vector<CompressedTensor>& tensors() const { return tensors_; }

 private:
  std::vector<CompressedTensor> tensors_;
};

// Throws what save() would for a path it cannot write, without writing (for a run that saves
// at its end).
void check_pruned_weights_output(const std::string& path);

// from_model(...).save(path) and load(path).restore(...).
void save_pruned_weights(Context& ctx, Sequential& model, const std::string& path);
void load_pruned_weights(Context& ctx, Sequential& model, const std::string& path);

}  // namespace sluice::train
