// The IDX reader on crafted files: headers whose counts and sizes would overflow or
// exceed the bytes present, a FIFO in place of the file, a gzip bomb cap; each is an Error naming
// the file, never a crash, a hang or an allocation sized by the header.
#include "cli/idx_reader.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <vector>

#include "sluice/core/error.hpp"
#include "test_support.hpp"

namespace sluice::cli {
namespace {

std::vector<std::uint8_t> header(std::uint32_t magic, std::vector<std::uint32_t> fields) {
  std::vector<std::uint8_t> out;
  fields.insert(fields.begin(), magic);
  for (const std::uint32_t v : fields) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(v >> shift));
  }
  return out;
}

ErrorCode code_of(std::vector<std::uint8_t> bytes, bool images) {
  try {
    if (images) {
      parse_idx_images(std::move(bytes), "x.idx");
    } else {
      parse_idx_labels(std::move(bytes), "x.idx");
    }
  } catch (const Error& e) {
    EXPECT_EQ(e.path(), "x.idx");
    return e.code();
  }
  ADD_FAILURE() << "no error";
  return ErrorCode::kInternal;
}

TEST(IdxReader, CraftedHeadersAreRefused) {
  // The largest counts and sizes a header can hold, with a few bytes of payload.
  std::vector<std::uint8_t> huge = header(kIdxImagesMagic, {0xFFFFFFFF, 65535, 65535});
  huge.resize(huge.size() + 100, 1);
  EXPECT_EQ(code_of(huge, true), ErrorCode::kCorruptData);
  EXPECT_EQ(code_of(header(kIdxImagesMagic, {1, 0, 28}), true), ErrorCode::kCorruptData);
  EXPECT_EQ(code_of(header(kIdxImagesMagic, {1, 70000, 28}), true), ErrorCode::kCorruptData);
  EXPECT_EQ(code_of(header(kIdxLabelsMagic, {0xFFFFFFFF}), false), ErrorCode::kCorruptData);
  EXPECT_EQ(code_of({0x00, 0x00, 0x08}, true), ErrorCode::kCorruptData);
  EXPECT_EQ(code_of(header(kIdxLabelsMagic, {}), false), ErrorCode::kCorruptData);
  EXPECT_EQ(code_of(header(kIdxImagesMagic, {2, 2}), true), ErrorCode::kCorruptData);
  // One byte too many or too few.
  std::vector<std::uint8_t> images = header(kIdxImagesMagic, {2, 3, 4});
  images.resize(images.size() + 24, 7);
  EXPECT_EQ(parse_idx_images(images, "x.idx").count, 2u);
  images.push_back(0);
  EXPECT_EQ(code_of(images, true), ErrorCode::kCorruptData);
  images.resize(images.size() - 2);
  EXPECT_EQ(code_of(images, true), ErrorCode::kCorruptData);
}

TEST(IdxReader, AFifoIsRefusedWithoutBlocking) {
  test::TempDir dir;
  const std::string path = (dir / "train-images-idx3-ubyte.gz").string();
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
  try {
    read_gzip_file(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.path(), path);
  }
}

TEST(IdxReader, OutputOverTheCapIsTooLarge) {
  test::TempDir dir;
  const std::string path = (dir / "plain.idx").string();
  test::write_bytes(path, std::vector<std::uint8_t>(5000, 0));
  try {
    read_gzip_file(path, 1000);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTooLarge);
  }
}

}  // namespace
}  // namespace sluice::cli
