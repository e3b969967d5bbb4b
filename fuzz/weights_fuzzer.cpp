// weights_fuzzer: the weights file formats' readers on crafted files: the container
// (read_container, both magics) and the pruned-weights table (CompressedWeights::load, which reads
// by path: the bytes go to a scratch file). The CRC would stop random bytes at the container, so
// the target can repair it (flags) and the table's sizes, dims and offsets get fuzzed.
//
// Input: [0] flags: bit 0 repair the CRC over what the header announces, bit 1 the dense
//            weights magic instead of the pruned one   [1..] the file
// Expected: a loaded file or sluice::Error. A finding: a crash, a sanitizer report (an overflow in
// the size arithmetic included: UBSan), another exception, kInternal, or a loaded tensor whose
// bytes disagree with its shape.
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_support.hpp"
#include "sluice/train/weights_file.hpp"
#include "sluice/train/compressed_weights.hpp"
#include "train/io/weights_file_io.hpp"

namespace sluice::fuzz {

const char* const kDenseMagic = train::kWeightsMagic;

template <class T>
void put(std::vector<std::uint8_t>& out, T v) {
  train::weights_io::put(out, v);
}

// A pruned-weights file of the given tensors (dims, sparse), written as save() writes it.
std::vector<std::uint8_t> pruned_file(const std::vector<std::pair<std::vector<std::int64_t>, bool>>& tensors) {
  std::vector<std::uint8_t> table, blob;
  for (const auto& [dims, sparse] : tensors) {
    std::int64_t n = 1;
    for (const std::int64_t d : dims) n *= d;
    put<std::uint16_t>(table, 1);
    table.push_back('t');
    put<std::uint8_t>(table, static_cast<std::uint8_t>(DType::kF32));
    put<std::uint8_t>(table, static_cast<std::uint8_t>(dims.size()));
    for (const std::int64_t d : dims) put<std::int64_t>(table, d);
    put<std::uint8_t>(table, sparse ? 1 : 0);
    put<std::uint64_t>(table, blob.size());
    if (sparse) {
      const std::size_t words = static_cast<std::size_t>((n + 63) / 64);
      std::vector<std::uint64_t> bitmap(words, 0);
      std::int64_t nonzero = 0;
      for (std::int64_t i = 0; i < n; i += 3) {
        bitmap[static_cast<std::size_t>(i >> 6)] |= std::uint64_t{1} << (i & 63);
        ++nonzero;
      }
      put<std::uint64_t>(table, words * 8);
      put<std::uint64_t>(table, static_cast<std::uint64_t>(nonzero) * 4);
      for (const std::uint64_t w : bitmap) put<std::uint64_t>(blob, w);
      for (std::int64_t i = 0; i < nonzero; ++i) put<float>(blob, 1.5f + static_cast<float>(i));
    } else {
      put<std::uint64_t>(table, 0);
      put<std::uint64_t>(table, static_cast<std::uint64_t>(n) * 4);
      for (std::int64_t i = 0; i < n; ++i) put<float>(blob, static_cast<float>(i));
    }
  }
  std::vector<std::uint8_t> out(train::kSparseWeightsMagic, train::kSparseWeightsMagic + 8);
  put<std::uint32_t>(out, train::kSparseWeightsVersion);
  put<std::uint32_t>(out, static_cast<std::uint32_t>(tensors.size()));
  put<std::uint64_t>(out, table.size());
  put<std::uint64_t>(out, blob.size());
  put<std::uint32_t>(out, train::crc32(blob.data(), blob.size(), train::crc32(table.data(), table.size())));
  put<std::uint32_t>(out, 0);
  out.insert(out.end(), table.begin(), table.end());
  out.insert(out.end(), blob.begin(), blob.end());
  return out;
}

void write_seeds(const std::filesystem::path& folder) {
  int n = 0;
  const std::vector<std::vector<std::pair<std::vector<std::int64_t>, bool>>> files = {
      {{{4, 3}, true}},
      {{{8}, false}, {{2, 2, 2}, true}},
      {{{}, false}, {{65}, true}, {{1, 1, 1, 1, 1, 3}, false}},
  };
  for (const auto& tensors : files) {
    std::vector<std::uint8_t> seed = {1};
    const std::vector<std::uint8_t> file = pruned_file(tensors);
    seed.insert(seed.end(), file.begin(), file.end());
    write_seed(folder, "pruned_" + std::to_string(n++), seed);
    seed[0] = 0;
    write_seed(folder, "pruned_" + std::to_string(n++), seed);
  }
}

}  // namespace sluice::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sluice;
  using namespace sluice::fuzz;
  if (size < 1) return -1;
  const std::uint8_t flags = data[0];
  std::vector<std::uint8_t> file(data + 1, data + size);
  const bool dense = (flags & 2) != 0;
  if (file.size() >= 8) std::memcpy(file.data(), dense ? kDenseMagic : train::kSparseWeightsMagic, 8);
  if ((flags & 1) != 0 && file.size() >= train::weights_io::kContainerHeaderBytes) {
    std::uint64_t table = 0, blob = 0;
    std::memcpy(&table, file.data() + 16, 8);
    std::memcpy(&blob, file.data() + 24, 8);
    const std::uint64_t body = file.size() - train::weights_io::kContainerHeaderBytes;
    if (table <= body && blob <= body - table) {
      const std::uint8_t* t = file.data() + train::weights_io::kContainerHeaderBytes;
      const std::uint32_t crc = train::crc32(t + table, blob, train::crc32(t, table));
      std::memcpy(file.data() + 32, &crc, 4);
    }
  }
  const train::weights_io::ContainerFormat format{
      .magic = dense ? kDenseMagic : train::kSparseWeightsMagic,
      .version = dense ? train::kWeightsVersion : train::kSparseWeightsVersion,
      .noun = dense ? "weights file" : "pruned weights file"};
  try {
    train::weights_io::parse_container(file, "fuzz", format);
  } catch (const Error& e) {
    check_error(e, "parse_container");
  }
  if (dense) return 0;
  static const std::filesystem::path path = scratch() / "w.sluicesp";
  write_file(path, file.data(), file.size());
  try {
    const train::CompressedWeights weights = train::CompressedWeights::load(path.string());
    for (const train::CompressedTensor& t : weights.tensors()) {
      // A loaded tensor is consistent: dense values fill the shape, sparse ones match the bitmap.
      if (!t.sparse && t.values.size() != t.dense_bytes()) finding("load", "dense values do not fill the shape");
      if (t.sparse && t.values.size() != static_cast<std::size_t>(t.nonzeros()) * 4) {
        finding("load", "sparse values do not match the bitmap");
      }
    }
    (void)weights.dense_bytes();
  } catch (const Error& e) {
    check_error(e, "CompressedWeights::load");
  }
  return 0;
}
