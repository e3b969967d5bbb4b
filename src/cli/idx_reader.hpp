// Reading IDX files, the format of MNIST and Fashion-MNIST, gzip-compressed or plain. Every header
// field is checked against the bytes actually present, so `sluice prepare` stops with the file and
// the problem named instead of writing images from a damaged or foreign file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace sluice::cli {

inline constexpr std::uint32_t kIdxImagesMagic = 2051;  // 0x00000803: unsigned bytes, 3 dims
inline constexpr std::uint32_t kIdxLabelsMagic = 2049;  // 0x00000801: unsigned bytes, 1 dim

// Images as stored: `count` images of rows x cols bytes each, row-major, one byte a pixel.
struct IdxImages {
  std::uint32_t count = 0;
  std::uint32_t rows = 0;
  std::uint32_t cols = 0;
  std::vector<std::uint8_t> pixels;  // (count, rows, cols)

  const std::uint8_t* image(std::uint32_t index) const {
    return pixels.data() + static_cast<std::size_t>(index) * rows * cols;
  }
};

struct IdxLabels {
  std::vector<std::uint8_t> labels;  // (count)
};

// The whole file through zlib (which passes non-gzip data through unchanged). Throws
// sluice::Error naming the path: kNotFound, kPermissionDenied, kCorruptData for a damaged or
// truncated gzip stream, kTooLarge past max_bytes of output (a guard against a gzip bomb).
std::vector<std::uint8_t> read_gzip_file(const std::filesystem::path& path,
                                         std::size_t max_bytes = std::size_t{1} << 30);

// Parse decompressed IDX bytes; `path` only names the file in errors. Throw sluice::Error
// (kCorruptData) on a wrong magic number, a short or long payload, or a zero dimension.
IdxImages parse_idx_images(std::vector<std::uint8_t> bytes, const std::filesystem::path& path);
IdxLabels parse_idx_labels(std::vector<std::uint8_t> bytes, const std::filesystem::path& path);

inline IdxImages read_idx_images(const std::filesystem::path& path) {
  return parse_idx_images(read_gzip_file(path), path);
}
inline IdxLabels read_idx_labels(const std::filesystem::path& path) {
  return parse_idx_labels(read_gzip_file(path), path);
}

}  // namespace sluice::cli
