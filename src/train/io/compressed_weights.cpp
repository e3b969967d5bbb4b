// Compressing a model's weights into bitmaps and packed values, the file's writer, and a reader
// that validates everything (header, size, checksum, the table's consistency) before it returns.
#include "sluice/train/compressed_weights.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

#include "sluice/core/error.hpp"
#include "sluice/train/weights_file.hpp"
#include "sluice/train/ops.hpp"
#include "sluice/train/pruning.hpp"
#include "train/io/weights_file_io.hpp"

namespace sluice::train {
namespace {

struct Entry {
  std::string name;
  Tensor* tensor = nullptr;
  bool prunable = false;
};

// The checkpoint's order: parameters, then buffers.
std::vector<Entry> entries_of(Sequential& model) {
  std::vector<Entry> out;
  for (const Parameter& p : model.parameters()) out.push_back({p.name, p.value, is_prunable(p)});
  for (const Buffer& b : model.buffers()) out.push_back({b.name, b.value, false});
  return out;
}

using weights_io::put;
using weights_io::Reader;
using weights_io::shape_of;

constexpr weights_io::ContainerFormat kFormat{.magic = kSparseWeightsMagic, .version = kSparseWeightsVersion,
                                              .noun = "pruned weights file"};

std::size_t bitmap_words(std::int64_t elements) { return static_cast<std::size_t>((elements + 63) / 64); }

CompressedTensor compress(Context& ctx, const std::string& name, const Tensor& t, bool sparse) {
  CompressedTensor c;
  c.name = name;
  c.dtype = t.dtype();
  c.shape = t.shape();
  c.sparse = sparse && t.dtype() == DType::kF32;
  std::vector<std::uint8_t> dense(t.bytes());
  ops::copy_to_host(ctx, t, dense.data());
  if (!c.sparse) {
    c.values = std::move(dense);
    return c;
  }
  const std::int64_t n = t.elements();
  c.bitmap.assign(bitmap_words(n), 0);
  std::size_t nonzero = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, dense.data() + i * 4, 4);
    if (bits != 0) {
      c.bitmap[static_cast<std::size_t>(i >> 6)] |= std::uint64_t{1} << (i & 63);
      ++nonzero;
    }
  }
  if (c.bitmap.size() * sizeof(std::uint64_t) + nonzero * 4 >= dense.size()) {  // too dense to gain: keep it dense
    c.sparse = false;
    c.bitmap.clear();
    c.values = std::move(dense);
    return c;
  }
  c.values.resize(nonzero * 4);
  std::size_t k = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    if ((c.bitmap[static_cast<std::size_t>(i >> 6)] >> (i & 63)) & 1u) {
      std::memcpy(c.values.data() + k * 4, dense.data() + i * 4, 4);
      ++k;
    }
  }
  return c;
}

// The dense bytes of a compressed tensor.
std::vector<std::uint8_t> expand(const CompressedTensor& c) {
  if (!c.sparse) return c.values;
  const std::int64_t n = c.shape.elements();
  std::vector<std::uint8_t> dense(static_cast<std::size_t>(n) * 4, 0);
  std::size_t k = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    if ((c.bitmap[static_cast<std::size_t>(i >> 6)] >> (i & 63)) & 1u) {
      std::memcpy(dense.data() + i * 4, c.values.data() + k * 4, 4);
      ++k;
    }
  }
  return dense;
}

}  // namespace

std::int64_t CompressedTensor::nonzeros() const {
  if (!sparse) return shape.elements();
  std::int64_t n = 0;
  for (std::uint64_t w : bitmap) n += std::popcount(w);
  return n;
}

CompressedWeights CompressedWeights::from_model(Context& ctx, Sequential& model) {
  CompressedWeights out;
  for (const Entry& e : entries_of(model)) out.tensors_.push_back(compress(ctx, e.name, *e.tensor, e.prunable));
  return out;
}

std::size_t CompressedWeights::resident_bytes() const {
  std::size_t n = 0;
  for (const CompressedTensor& t : tensors_) n += t.bytes();
  return n;
}

std::size_t CompressedWeights::dense_bytes() const {
  std::size_t n = 0;
  for (const CompressedTensor& t : tensors_) n += t.dense_bytes();
  return n;
}

void check_pruned_weights_output(const std::string& path) { weights_io::check_container_output(path, kFormat); }

void CompressedWeights::save(const std::string& path) const {
  std::vector<std::uint8_t> table, blob;
  for (const CompressedTensor& t : tensors_) {
    put<std::uint16_t>(table, static_cast<std::uint16_t>(t.name.size()));
    table.insert(table.end(), t.name.begin(), t.name.end());
    put<std::uint8_t>(table, static_cast<std::uint8_t>(t.dtype));
    put<std::uint8_t>(table, static_cast<std::uint8_t>(t.shape.rank()));
    for (std::int64_t d : t.shape) put<std::int64_t>(table, d);
    put<std::uint8_t>(table, t.sparse ? 1 : 0);
    put<std::uint64_t>(table, blob.size());
    put<std::uint64_t>(table, t.bitmap.size() * sizeof(std::uint64_t));
    put<std::uint64_t>(table, t.values.size());
    for (std::uint64_t w : t.bitmap) put<std::uint64_t>(blob, w);
    blob.insert(blob.end(), t.values.begin(), t.values.end());
  }
  weights_io::write_container(path, kFormat, static_cast<std::uint32_t>(tensors_.size()), table, blob);
}

CompressedWeights CompressedWeights::load(const std::string& path) {
  const weights_io::Container file = weights_io::read_container(path, kFormat);
  const std::uint32_t count = file.count;
  const std::uint8_t* table = file.table;
  const std::uint64_t table_bytes = file.table_bytes;
  const std::uint8_t* blob = file.blob;
  const std::uint64_t blob_bytes = file.blob_bytes;

  CompressedWeights out;
  Reader r(table, table_bytes, path, "pruned weights table");
  for (std::uint32_t i = 0; i < count; ++i) {
    CompressedTensor t;
    t.name = r.text(r.get<std::uint16_t>());
    const auto dtype = r.get<std::uint8_t>();
    if (dtype > static_cast<std::uint8_t>(DType::kF32)) {
      throw Error(ErrorCode::kCorruptData, "tensor " + t.name + " has unknown dtype " + std::to_string(dtype), path);
    }
    t.dtype = static_cast<DType>(dtype);
    const int rank = r.get<std::uint8_t>();
    if (rank > Shape::kMaxRank) throw Error(ErrorCode::kCorruptData, "tensor " + t.name + " has rank " + std::to_string(rank), path);
    std::array<std::int64_t, Shape::kMaxRank> dims{};
    // The element count in checked arithmetic, bounded by what the blob can hold (a bit per
    // element at the sparsest), before anything multiplies or allocates by it.
    std::int64_t elements = 1;
    for (int d = 0; d < rank; ++d) {
      dims[static_cast<std::size_t>(d)] = r.get<std::int64_t>();
      if (dims[static_cast<std::size_t>(d)] < 0 || dims[static_cast<std::size_t>(d)] > (std::int64_t{1} << 40) ||
          __builtin_mul_overflow(elements, dims[static_cast<std::size_t>(d)], &elements)) {
        throw Error(ErrorCode::kCorruptData, "tensor " + t.name + " has an impossible dimension", path);
      }
    }
    if (static_cast<std::uint64_t>(elements) / 8 > blob_bytes) {
      throw Error(ErrorCode::kCorruptData, "tensor " + t.name + " has more elements (" + std::to_string(elements) +
                                               ") than the blob could hold", path);
    }
    t.shape = shape_of(dims, rank);
    const auto encoding = r.get<std::uint8_t>();  // dims and offsets are checked before use
    const auto offset = r.get<std::uint64_t>();
    const auto bitmap_bytes = r.get<std::uint64_t>();
    const auto value_bytes = r.get<std::uint64_t>();
    if (encoding > 1) throw Error(ErrorCode::kCorruptData, "tensor " + t.name + " has unknown encoding " + std::to_string(encoding), path);
    t.sparse = encoding == 1;
    if (t.sparse && t.dtype != DType::kF32) throw Error(ErrorCode::kCorruptData, "tensor " + t.name + " is a bitmap of non-f32 values", path);
    if (offset > blob_bytes || bitmap_bytes > blob_bytes - offset || value_bytes > blob_bytes - offset - bitmap_bytes) {
      throw Error(ErrorCode::kCorruptData, "tensor " + t.name + " lies outside the blob", path);
    }
    const std::uint8_t* at = blob + offset;
    if (t.sparse) {
      if (bitmap_bytes != bitmap_words(t.shape.elements()) * sizeof(std::uint64_t)) {
        throw Error(ErrorCode::kCorruptData, "tensor " + t.name + ": bitmap of " + std::to_string(bitmap_bytes) +
                                                 " bytes for " + std::to_string(t.shape.elements()) + " elements", path);
      }
      t.bitmap.resize(bitmap_words(t.shape.elements()));
      // copy_n, not memcpy: a tensor without elements has an empty bitmap, whose data() may be null.
      std::copy_n(at, bitmap_bytes, reinterpret_cast<std::uint8_t*>(t.bitmap.data()));
      const auto tail = t.shape.elements() & 63;
      if (tail != 0 && !t.bitmap.empty() && (t.bitmap.back() >> tail) != 0) {
        throw Error(ErrorCode::kCorruptData, "tensor " + t.name + ": bitmap has bits past the last element", path);
      }
      if (value_bytes != static_cast<std::uint64_t>(t.nonzeros()) * 4) {
        throw Error(ErrorCode::kCorruptData, "tensor " + t.name + ": " + std::to_string(value_bytes) +
                                                 " value bytes for " + std::to_string(t.nonzeros()) + " nonzeros", path);
      }
    } else if (bitmap_bytes != 0 || value_bytes != t.dense_bytes()) {
      throw Error(ErrorCode::kCorruptData, "tensor " + t.name + ": " + std::to_string(value_bytes) +
                                               " value bytes where dense takes " + std::to_string(t.dense_bytes()), path);
    }
    t.values.assign(at + bitmap_bytes, at + bitmap_bytes + value_bytes);
    out.tensors_.push_back(std::move(t));
  }
  if (!r.done()) throw Error(ErrorCode::kCorruptData, "pruned weights table has bytes after its last entry", path);
  return out;
}

void CompressedWeights::restore(Context& ctx, Sequential& model) const {
  const std::vector<Entry> entries = entries_of(model);
  if (tensors_.size() != entries.size()) {
    throw Error(ErrorCode::kInvalidArgument, "pruned weights hold " + std::to_string(tensors_.size()) +
                                                 " tensors, the model has " + std::to_string(entries.size()) +
                                                 ": written for another model");
  }
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const CompressedTensor& c = tensors_[i];
    const Tensor& t = *entries[i].tensor;
    if (c.name != entries[i].name || c.shape != t.shape() || c.dtype != t.dtype()) {
      throw Error(ErrorCode::kInvalidArgument, "pruned weights do not match the model: they have " + c.name + " " +
                                                   std::string(to_string(c.dtype)) + " " + c.shape.to_string() +
                                                   " where the model has " + entries[i].name + " " + t.describe());
    }
  }
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::vector<std::uint8_t> dense = expand(tensors_[i]);
    ops::copy_from_host(ctx, dense.data(), *entries[i].tensor);
  }
  ctx.synchronize();
}

void save_pruned_weights(Context& ctx, Sequential& model, const std::string& path) {
  CompressedWeights::from_model(ctx, model).save(path);
}

void load_pruned_weights(Context& ctx, Sequential& model, const std::string& path) {
  CompressedWeights::load(path).restore(ctx, model);
}

}  // namespace sluice::train
