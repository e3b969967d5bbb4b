// Weights files: the writer, and a reader that validates everything (header, size, checksum,
// the table against the model) before it changes a single weight.
#include "sluice/train/weights_file.hpp"

#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/train/ops.hpp"
#include "train/io/weights_file_io.hpp"

namespace sluice::train {
namespace {

struct Entry {
  std::string name;
  Tensor* tensor = nullptr;
};

std::vector<Entry> entries_of(Sequential& model) {
  std::vector<Entry> out;
  for (const Parameter& p : model.parameters()) out.push_back({p.name, p.value});
  for (const Buffer& b : model.buffers()) out.push_back({b.name, b.value});
  return out;
}

using weights_io::put;
using weights_io::Reader;
using weights_io::shape_of;

constexpr weights_io::ContainerFormat kFormat{.magic = kWeightsMagic, .version = kWeightsVersion,
                                              .noun = "weights file"};

constexpr std::uint64_t align256(std::uint64_t v) { return (v + 255) & ~std::uint64_t{255}; }

}  // namespace

void check_weights_output(const std::string& path) { weights_io::check_container_output(path, kFormat); }

void save_weights(Context& ctx, Sequential& model, const std::string& path) {
  const std::vector<Entry> entries = entries_of(model);
  std::vector<std::uint8_t> table;
  std::uint64_t blob_bytes = 0;
  for (const Entry& e : entries) {
    const Tensor& t = *e.tensor;
    put<std::uint16_t>(table, static_cast<std::uint16_t>(e.name.size()));
    table.insert(table.end(), e.name.begin(), e.name.end());
    put<std::uint8_t>(table, static_cast<std::uint8_t>(t.dtype()));
    put<std::uint8_t>(table, static_cast<std::uint8_t>(t.rank()));
    for (std::int64_t d : t.shape()) put<std::int64_t>(table, d);
    blob_bytes = align256(blob_bytes);
    put<std::uint64_t>(table, blob_bytes);
    put<std::uint64_t>(table, t.bytes());
    blob_bytes += t.bytes();
  }
  std::vector<std::uint8_t> blob(blob_bytes, 0);
  std::uint64_t offset = 0;
  for (const Entry& e : entries) {
    offset = align256(offset);
    ops::copy_to_host(ctx, *e.tensor, blob.data() + offset);
    offset += e.tensor->bytes();
  }
  ctx.synchronize();
  weights_io::write_container(path, kFormat, static_cast<std::uint32_t>(entries.size()), table, blob);
}

void load_weights(Context& ctx, Sequential& model, const std::string& path) {
  const weights_io::Container file = weights_io::read_container(path, kFormat);
  const std::uint32_t count = file.count;
  const std::uint8_t* table = file.table;
  const std::uint64_t table_bytes = file.table_bytes;
  const std::uint8_t* blob = file.blob;
  const std::uint64_t blob_bytes = file.blob_bytes;

  const std::vector<Entry> entries = entries_of(model);
  if (count != entries.size()) {
    throw Error(ErrorCode::kInvalidArgument, "weights file holds " + std::to_string(count) + " tensors, the model has " +
                                                 std::to_string(entries.size()) + ": written for another model", path);
  }
  std::vector<std::uint64_t> offsets;
  Reader r(table, table_bytes, path, "weights table");
  for (const Entry& e : entries) {
    const std::string name = r.text(r.get<std::uint16_t>());
    const auto dtype = static_cast<DType>(r.get<std::uint8_t>());
    const int rank = r.get<std::uint8_t>();
    if (rank > Shape::kMaxRank) throw Error(ErrorCode::kCorruptData, "tensor " + name + " has rank " + std::to_string(rank), path);
    std::array<std::int64_t, Shape::kMaxRank> dims{};
    for (int i = 0; i < rank; ++i) dims[static_cast<std::size_t>(i)] = r.get<std::int64_t>();
    const Shape shape = shape_of(dims, rank);
    const auto offset = r.get<std::uint64_t>();
    const auto bytes = r.get<std::uint64_t>();
    const Tensor& t = *e.tensor;
    if (name != e.name || shape != t.shape() || dtype != t.dtype()) {
      throw Error(ErrorCode::kInvalidArgument, "weights file does not match the model: it has " + name + " " +
                                                   std::string(to_string(dtype)) + " " + shape.to_string() +
                                                   " where the model has " + e.name + " " + t.describe(), path);
    }
    if (bytes != t.bytes() || offset > blob_bytes || bytes > blob_bytes - offset) {
      throw Error(ErrorCode::kCorruptData, "tensor " + name + " lies outside the blob", path);
    }
    offsets.push_back(offset);
  }
  if (!r.done()) throw Error(ErrorCode::kCorruptData, "weights table has bytes after its last entry", path);
  for (std::size_t i = 0; i < entries.size(); ++i) ops::copy_from_host(ctx, blob + offsets[i], *entries[i].tensor);
  ctx.synchronize();
}

}  // namespace sluice::train
