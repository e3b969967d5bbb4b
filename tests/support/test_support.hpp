// Helpers shared by the tests: where the shared datasets are, scratch folders, and JPEGs made on
// the spot with TurboJPEG (so bad-input tests do not depend on files we cannot commit).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace sluice::test {

// The shared datasets folder, or empty when absent (tests then GTEST_SKIP with the reason).
std::filesystem::path datasets_dir();
// datasets_dir() / relative, or skips the calling test when it is absent.
#define SLUICE_REQUIRE_DATASET(var, relative)                                              \
  const std::filesystem::path var = ::sluice::test::datasets_dir() / (relative);          \
  if (::sluice::test::datasets_dir().empty() || !std::filesystem::exists(var))            \
  GTEST_SKIP() << "dataset " << (relative) << " not found (set SLUICE_DATASETS_DIR)"

// A fresh folder under the system temp dir, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

std::vector<std::uint8_t> read_bytes(const std::filesystem::path& path);
void write_bytes(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes);

// A deterministic test image (smooth gradients plus a little texture, so JPEG artefacts and
// resampling errors are visible) with `channels` interleaved channels.
std::vector<std::uint8_t> make_pattern(int width, int height, int channels, std::uint32_t seed);

struct JpegEncodeOptions {
  int quality = 90;
  int subsampling = 2;      // TurboJPEG's TJSAMP_*: 0 = 4:4:4, 1 = 4:2:2, 2 = 4:2:0, 3 = grey
  bool progressive = false;
  bool cmyk = false;        // pixels are 4-channel CMYK (written as YCCK)
};
// Encodes interleaved pixels (channels 1, 3, or 4 with cmyk) with TurboJPEG.
std::vector<std::uint8_t> encode_jpeg(const std::vector<std::uint8_t>& pixels, int width,
                                      int height, int channels, JpegEncodeOptions options = {});

// Writes `count` generated JPEGs per class into root/<class>/ and returns their paths in
// sorted order.
std::vector<std::filesystem::path> make_image_folder(const std::filesystem::path& root,
                                                     int classes, int per_class, int width,
                                                     int height);

}  // namespace sluice::test
