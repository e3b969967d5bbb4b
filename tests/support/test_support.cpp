// Implementation of the shared test helpers.
#include "test_support.hpp"

#include <turbojpeg.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>

namespace sluice::test {

std::filesystem::path datasets_dir() {
  if (const char* env = std::getenv("SLUICE_DATASETS"); env != nullptr && *env != '\0') {
    return env;
  }
  return SLUICE_DATASETS_DIR;
}

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "sluice-test-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  // Restore permissions a test may have removed, so removal works.
  for (auto it = std::filesystem::recursive_directory_iterator(path_, ec);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    std::filesystem::permissions(it->path(), std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ec);
  }
  std::filesystem::remove_all(path_, ec);
}

std::vector<std::uint8_t> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::vector<std::uint8_t> make_pattern(int width, int height, int channels, std::uint32_t seed) {
  std::vector<std::uint8_t> pixels(static_cast<std::size_t>(width) * height * channels);
  std::uint32_t state = seed * 2654435761u + 1u;
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < channels; ++c) {
        state = state * 1664525u + 1013904223u;
        const int smooth = (x * (97 + 31 * c) / (width + 1) + y * (61 + 17 * c) / (height + 1) +
                            static_cast<int>(seed) * 13) % 256;
        const int noise = static_cast<int>(state >> 28) - 8;
        int v = smooth + noise;
        v = v < 0 ? 0 : (v > 255 ? 255 : v);
        pixels[(static_cast<std::size_t>(y) * width + x) * channels + c] = static_cast<std::uint8_t>(v);
      }
    }
  }
  return pixels;
}

std::vector<std::uint8_t> encode_jpeg(const std::vector<std::uint8_t>& pixels, int width,
                                      int height, int channels, JpegEncodeOptions options) {
  tjhandle handle = tjInitCompress();
  if (handle == nullptr) throw std::runtime_error("tjInitCompress failed");
  int format = TJPF_RGB;
  int subsampling = options.subsampling;
  if (options.cmyk) {
    format = TJPF_CMYK;
  } else if (channels == 1) {
    format = TJPF_GRAY;
    subsampling = TJSAMP_GRAY;
  }
  unsigned char* out = nullptr;
  unsigned long size = 0;
  int flags = options.progressive ? TJFLAG_PROGRESSIVE : 0;
  const int rc = tjCompress2(handle, pixels.data(), width, 0, height, format, &out, &size,
                             subsampling, options.quality, flags);
  if (rc != 0) {
    std::string message = tjGetErrorStr2(handle);
    tjDestroy(handle);
    throw std::runtime_error("tjCompress2: " + message);
  }
  std::vector<std::uint8_t> bytes(out, out + size);
  tjFree(out);
  tjDestroy(handle);
  return bytes;
}

std::vector<std::filesystem::path> make_image_folder(const std::filesystem::path& root,
                                                     int classes, int per_class, int width,
                                                     int height) {
  std::vector<std::filesystem::path> paths;
  for (int c = 0; c < classes; ++c) {
    for (int i = 0; i < per_class; ++i) {
      const auto pixels = make_pattern(width, height, 3, static_cast<std::uint32_t>(c * 1000 + i));
      char name[64];
      std::snprintf(name, sizeof name, "class_%02d/img_%04d.jpg", c, i);
      paths.push_back(root / name);
      write_bytes(paths.back(), encode_jpeg(pixels, width, height, 3));
    }
  }
  return paths;
}

}  // namespace sluice::test
