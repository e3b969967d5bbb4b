// Implementation of the pipeline test helpers.
#include "pipeline_support.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstring>

#include "test_support.hpp"

namespace sluice::test {

std::array<std::uint8_t, 3> colour_of(int index) {
  return {static_cast<std::uint8_t>((index % 16) * 16 + 8), static_cast<std::uint8_t>(((index / 16) % 16) * 16 + 8),
          static_cast<std::uint8_t>(((index / 256) % 16) * 16 + 8)};
}

int index_of_colour(const std::uint8_t* rgb) {
  const auto q = [](std::uint8_t v) { return std::min(15, v / 16); };
  return q(rgb[0]) + 16 * q(rgb[1]) + 256 * q(rgb[2]);
}

std::vector<Item> make_coded_items(const std::filesystem::path& root, int count) {
  std::vector<Item> items;
  for (int i = 0; i < count; ++i) {
    const auto c = colour_of(i);
    std::vector<std::uint8_t> pixels(24 * 16 * 3);
    for (std::size_t p = 0; p < pixels.size(); p += 3) std::memcpy(&pixels[p], c.data(), 3);
    const auto path = root / ("item_" + std::to_string(i) + ".jpg");
    write_bytes(path, encode_jpeg(pixels, 24, 16, 3, {.quality = 95, .subsampling = 0}));
    items.push_back(Item{path.string(), i});
  }
  return items;
}

std::uint64_t epoch_checksum(Loader& loader, std::int64_t epoch) {
  // FNV-1a over bytes and labels: plenty to tell batches apart in a test.
  std::uint64_t h = 1469598103934665603ull;
  const auto mix = [&h](const void* data, std::size_t n) {
    const auto* p = static_cast<const std::uint8_t*>(data);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  };
  for (Batch& b : loader.epoch(epoch)) {
    mix(b.data().data, b.data().bytes());
    mix(b.labels().data(), b.labels().size_bytes());
  }
  return h;
}

namespace {
std::vector<std::uint8_t> small_jpeg() {
  return encode_jpeg(make_pattern(40, 30, 3, 5), 40, 30, 3);
}
}  // namespace

std::filesystem::path write_truncated_jpeg(const std::filesystem::path& dir) {
  auto bytes = small_jpeg();
  bytes.resize(bytes.size() / 2);
  write_bytes(dir / "truncated.jpg", bytes);
  return dir / "truncated.jpg";
}

std::filesystem::path write_empty_jpeg(const std::filesystem::path& dir) {
  write_bytes(dir / "empty.jpg", {});
  return dir / "empty.jpg";
}

std::filesystem::path write_png_named_jpg(const std::filesystem::path& dir) {
  // A real PNG signature and IHDR chunk start: what a mislabelled PNG looks like.
  const std::vector<std::uint8_t> png{0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13,
                                      'I', 'H', 'D', 'R', 0, 0, 0, 40, 0, 0, 0, 30, 8, 2, 0, 0, 0};
  write_bytes(dir / "png.jpg", png);
  return dir / "png.jpg";
}

std::filesystem::path write_random_bytes_jpg(const std::filesystem::path& dir) {
  std::vector<std::uint8_t> bytes(4000);
  std::uint32_t s = 12345;
  for (auto& b : bytes) b = static_cast<std::uint8_t>((s = s * 1664525u + 1013904223u) >> 24);
  write_bytes(dir / "random.jpg", bytes);
  return dir / "random.jpg";
}

std::filesystem::path write_huge_header_jpeg(const std::filesystem::path& dir) {
  auto bytes = small_jpeg();
  // Patch the frame header (SOF0/SOF2): height and width are at offsets 5 and 7 from the marker.
  for (std::size_t i = 0; i + 8 < bytes.size(); ++i) {
    if (bytes[i] == 0xFF && (bytes[i + 1] == 0xC0 || bytes[i + 1] == 0xC2)) {
      const std::uint16_t side = 60000;
      bytes[i + 5] = bytes[i + 7] = static_cast<std::uint8_t>(side >> 8);
      bytes[i + 6] = bytes[i + 8] = static_cast<std::uint8_t>(side & 0xFF);
      break;
    }
  }
  write_bytes(dir / "huge.jpg", bytes);
  return dir / "huge.jpg";
}

std::uint64_t memory_used(const Stats& stats, const std::string& use) {
  for (const MemoryStats& m : stats.memory) {
    if (m.use == use) return m.used;
  }
  ADD_FAILURE() << "no memory use " << use;
  return 0;
}

}  // namespace sluice::test
