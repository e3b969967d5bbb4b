// The weights file formats on crafted files: containers whose CRC is valid but whose
// sizes wrap or exceed the file, and pruned-weights tables whose dimensions multiply past 64 bits
// or past what the blob holds; each is an Error(kCorruptData) naming the file, never a crash or
// an allocation sized by the header. A FIFO in place of the file is refused without blocking.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/train/weights_file.hpp"
#include "sluice/train/compressed_weights.hpp"
#include "test_support.hpp"
#include "train/io/weights_file_io.hpp"

namespace sluice::train {
namespace {

using weights_io::put;

constexpr weights_io::ContainerFormat kSparse{.magic = kSparseWeightsMagic, .version = kSparseWeightsVersion,
                                              .noun = "pruned weights file"};

// A container with a correct CRC around `table` and `blob`; `table_bytes`/`blob_bytes` may lie.
std::vector<std::uint8_t> container(std::uint32_t count, const std::vector<std::uint8_t>& table,
                                    const std::vector<std::uint8_t>& blob, std::uint64_t table_bytes,
                                    std::uint64_t blob_bytes) {
  std::vector<std::uint8_t> out(kSparseWeightsMagic, kSparseWeightsMagic + 8);
  put<std::uint32_t>(out, kSparseWeightsVersion);
  put<std::uint32_t>(out, count);
  put<std::uint64_t>(out, table_bytes);
  put<std::uint64_t>(out, blob_bytes);
  put<std::uint32_t>(out, crc32(blob.data(), blob.size(), crc32(table.data(), table.size())));
  put<std::uint32_t>(out, 0);
  out.insert(out.end(), table.begin(), table.end());
  out.insert(out.end(), blob.begin(), blob.end());
  return out;
}

// One table record: name, dtype f32, the dims, encoding, offset, bitmap and value bytes.
std::vector<std::uint8_t> record(const std::vector<std::int64_t>& dims, std::uint8_t encoding, std::uint64_t offset,
                                 std::uint64_t bitmap_bytes, std::uint64_t value_bytes) {
  std::vector<std::uint8_t> t;
  put<std::uint16_t>(t, 1);
  t.push_back('w');
  put<std::uint8_t>(t, static_cast<std::uint8_t>(DType::kF32));
  put<std::uint8_t>(t, static_cast<std::uint8_t>(dims.size()));
  for (const std::int64_t d : dims) put<std::int64_t>(t, d);
  put<std::uint8_t>(t, encoding);
  put<std::uint64_t>(t, offset);
  put<std::uint64_t>(t, bitmap_bytes);
  put<std::uint64_t>(t, value_bytes);
  return t;
}

std::string load_error(const std::vector<std::uint8_t>& file) {
  test::TempDir dir;
  const std::string path = (dir / "w.sluicesp").string();
  test::write_bytes(path, file);
  try {
    CompressedWeights::load(path);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCorruptData) << e.what();
    EXPECT_EQ(e.path(), path);
    return e.cause();
  }
  ADD_FAILURE() << "loaded a crafted file";
  return {};
}

TEST(WeightsFileTrust, ContainerSizesThatWrapAreRefused) {
  const std::vector<std::uint8_t> table(16, 1), blob(16, 2);
  // table + blob wraps to the real body size (32) in 64 bits.
  EXPECT_NE(load_error(container(0, table, blob, 48, UINT64_MAX - 15)).find("truncated"), std::string::npos);
  EXPECT_NE(load_error(container(0, table, blob, UINT64_MAX, 33)).find("truncated"), std::string::npos);
  EXPECT_NE(load_error(container(0, table, blob, 16, 15)).find("after its blob"), std::string::npos);
  // parse_container on the same bytes, in memory.
  EXPECT_THROW(weights_io::parse_container(container(0, table, blob, 48, UINT64_MAX - 15), "m", kSparse), Error);
  EXPECT_NO_THROW(weights_io::parse_container(container(0, table, blob, 16, 16), "m", kSparse));
}

TEST(WeightsFileTrust, DimensionsWhoseProductOverflowsAreRefused) {
  const std::vector<std::uint8_t> blob(64, 0);
  // Six dims of 2^40: the product wraps 64 bits many times over (each dim alone is allowed).
  const std::int64_t big = std::int64_t{1} << 40;
  std::vector<std::uint8_t> t = record({big, big, big, big, big, big}, 1, 0, 8, 0);
  EXPECT_NE(load_error(container(1, t, blob, t.size(), blob.size())).find("impossible dimension"), std::string::npos);
  // 2^40 x 2^23 = 2^63 wraps int64 exactly to a negative.
  t = record({big, std::int64_t{1} << 23}, 0, 0, 0, 64);
  EXPECT_NE(load_error(container(1, t, blob, t.size(), blob.size())).find("impossible dimension"), std::string::npos);
  // A product that fits but that no blob of 64 bytes could hold.
  t = record({big}, 1, 0, 64, 0);
  EXPECT_NE(load_error(container(1, t, blob, t.size(), blob.size())).find("than the blob could hold"), std::string::npos);
  // Offsets and sizes that wrap.
  t = record({4}, 0, 8, UINT64_MAX - 4, 16);
  EXPECT_NE(load_error(container(1, t, blob, t.size(), blob.size())).find("outside the blob"), std::string::npos);
  t = record({4}, 0, UINT64_MAX, 0, 16);
  EXPECT_NE(load_error(container(1, t, blob, t.size(), blob.size())).find("outside the blob"), std::string::npos);
  // More records announced than the table holds.
  t = record({4}, 0, 0, 0, 16);
  EXPECT_NE(load_error(container(1000, t, blob, t.size(), blob.size())).find("ends mid-entry"), std::string::npos);
  // And the honest record loads.
  const std::vector<std::uint8_t> sixteen(16, 0);
  test::TempDir dir;
  test::write_bytes(dir / "ok", container(1, t, sixteen, t.size(), sixteen.size()));
  EXPECT_EQ(CompressedWeights::load((dir / "ok").string()).tensors().size(), 1u);
}

// Found by weights_fuzzer: a sparse tensor with a dimension of 0 has an empty bitmap, and copying
// its 0 bytes went through memcpy with a null destination (undefined; UBSan aborts).
TEST(WeightsFileTrust, ASparseTensorWithoutElementsLoads) {
  const std::vector<std::uint8_t> t = record({0, 3}, 1, 0, 0, 0);
  const std::vector<std::uint8_t> empty_blob;
  test::TempDir dir;
  test::write_bytes(dir / "empty", container(1, t, empty_blob, t.size(), 0));
  const CompressedWeights w = CompressedWeights::load((dir / "empty").string());
  ASSERT_EQ(w.tensors().size(), 1u);
  EXPECT_EQ(w.tensors()[0].shape.elements(), 0);
  EXPECT_EQ(w.tensors()[0].nonzeros(), 0);
}

TEST(WeightsFileTrust, AFifoIsRefusedWithoutBlocking) {
  test::TempDir dir;
  const std::string path = (dir / "w.sluicesp").string();
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
  try {
    CompressedWeights::load(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.path(), path);
    EXPECT_NE(e.cause().find("not a regular file"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sluice::train
