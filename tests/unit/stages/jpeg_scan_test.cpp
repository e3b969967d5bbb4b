// The resume-point scanner's fast paths (stages/decode/jpeg_scan.cpp: eight-byte refills, 9-bit
// lookups that skip AC coefficients whole) against a plain decoder here that unstuffs the data
// first and reads it one bit at a time: the same points (byte, bit, DC predictors) and the same
// count on every baseline file of imagenet-photos, and where the fast paths have edges: a 0xFF
// byte at every offset of a scan (so at every place relative to a refill), the data cut at every
// byte, a marker put at every byte, and data full of stuffed 0xFF bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "stages/decode/jpeg_resume.hpp"
#include "test_support.hpp"

namespace sluice::stages {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

// The entropy-coded data, unstuffed, ending at the first marker or the end of the file.
struct PlainBits {
  Bytes bytes;
  std::vector<std::uint32_t> origin;  // each data byte's offset in the file
  std::uint32_t end = 0;              // offset of the marker, or the file's size
  std::size_t at = 0;                 // next bit

  PlainBits(const Bytes& jpeg, std::size_t from) {
    std::size_t i = from;
    while (i < jpeg.size()) {
      if (jpeg[i] == 0xFF && (i + 1 >= jpeg.size() || jpeg[i + 1] != 0x00)) break;
      bytes.push_back(jpeg[i]);
      origin.push_back(static_cast<std::uint32_t>(i));
      i += jpeg[i] == 0xFF ? 2 : 1;
    }
    end = static_cast<std::uint32_t>(i);
  }
  bool bit(int& b) {
    if (at >= bytes.size() * 8) return false;
    b = (bytes[at / 8] >> (7 - at % 8)) & 1;
    ++at;
    return true;
  }
  bool bits(int n, int& v) {
    v = 0;
    for (int i = 0, b = 0; i < n; ++i) {
      if (!bit(b)) return false;
      v = (v << 1) | b;
    }
    return true;
  }
  ResumePoint position() const {
    ResumePoint p;
    p.byte = at / 8 < origin.size() ? origin[at / 8] : end;
    p.bit = static_cast<std::uint8_t>(at % 8);
    return p;
  }
};

// JPEG Annex C/F: canonical codes, decoded one bit at a time. -1: no code, or the data ended.
int plain_symbol(PlainBits& in, const ScanLayout::Huffman& t) {
  int code = 0, first = 0, index = 0;
  for (int len = 1; len <= 16; ++len) {
    int b = 0;
    if (!in.bit(b)) return -1;
    code = (code << 1) | b;
    if (code - first < t.bits[len]) return t.values[index + code - first];
    index += t.bits[len];
    first = (first + t.bits[len]) << 1;
  }
  return -1;
}

std::vector<ResumePoint> plain_points(const Bytes& jpeg, const ScanLayout& layout, int rows) {
  rows = std::clamp(rows, 0, std::max(0, layout.mcu_rows - 1));
  PlainBits in(jpeg, layout.scan_offset);
  std::vector<ResumePoint> points{in.position()};
  int pred[3] = {0, 0, 0};
  for (int row = 0; row < rows; ++row) {
    for (int m = 0; m < layout.mcus_per_row; ++m) {
      for (int b = 0; b < layout.blocks; ++b) {
        const int c = layout.block_component[b];
        const int s = plain_symbol(in, layout.dc[layout.dc_table[c]]);
        int v = 0;
        if (s < 0 || s > 11 || !in.bits(s, v)) return points;
        if (s > 0) pred[c] += v < (1 << (s - 1)) ? v - (1 << s) + 1 : v;
        if (pred[c] < -32768 || pred[c] > 32767) return points;
        for (int k = 1; k < 64; ++k) {
          const int rs = plain_symbol(in, layout.ac[layout.ac_table[c]]);
          if (rs < 0 || !in.bits(rs & 15, v)) return points;
          if ((rs & 15) != 0) {
            k += rs >> 4;
          } else if (rs >> 4 == 15) {
            k += 15;
          } else {
            break;
          }
        }
      }
    }
    ResumePoint p = in.position();
    for (int c = 0; c < layout.components; ++c) p.dc[c] = static_cast<std::int16_t>(pred[c]);
    points.push_back(p);
  }
  return points;
}

// The scanner's points for rows [0, rows] equal the plain decoder's; true where the layout parsed.
bool same_points(const Bytes& jpeg, int rows, const std::string& what) {
  ScanLayout layout;
  if (!parse_scan_layout(jpeg, layout)) return false;
  if (rows < 0) rows = layout.mcu_rows - 1;
  std::vector<ResumePoint> got;
  scan_resume_points(jpeg, layout, rows, got);
  const std::vector<ResumePoint> want = plain_points(jpeg, layout, rows);
  EXPECT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    EXPECT_EQ(got[i].byte, want[i].byte) << what << " row " << i;
    EXPECT_EQ(got[i].bit, want[i].bit) << what << " row " << i;
    for (int c = 0; c < 3; ++c) EXPECT_EQ(got[i].dc[c], want[i].dc[c]) << what << " row " << i << " component " << c;
  }
  return true;
}

TEST(JpegScan, ImagenetPhotosGiveThePlainDecodersPoints) {
  const fs::path dir = fs::path(SLUICE_DATASETS_DIR) / "imagenet-photos";
  if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), 1000u);
  int scanned = 0;
  for (const fs::path& path : files) {
    scanned += same_points(test::read_bytes(path), -1, path.filename().string()) ? 1 : 0;
    if (HasFailure()) return;
  }
  EXPECT_EQ(scanned, 1000 - 56);  // progressive files and restart intervals are refused
}

// Noise at quality 100: long codes, large values and many 0xFF data bytes (stuffed).
Bytes noisy_jpeg(int subsampling, int w = 72, int h = 56) {
  const int channels = subsampling == 3 ? 1 : 3;
  Bytes pixels(static_cast<std::size_t>(w) * h * channels);
  std::mt19937 rng(static_cast<unsigned>(subsampling) + 5);
  for (auto& p : pixels) p = static_cast<std::uint8_t>(rng());
  return test::encode_jpeg(pixels, w, h, channels, {.quality = 100, .subsampling = subsampling});
}

TEST(JpegScan, StuffedBytesEverywhereGiveThePlainDecodersPoints) {
  for (int subsampling : {0, 1, 2, 3}) {
    const Bytes jpeg = noisy_jpeg(subsampling);
    ScanLayout layout;
    ASSERT_TRUE(parse_scan_layout(jpeg, layout));
    const auto stuffed = std::count(jpeg.begin() + layout.scan_offset, jpeg.end(), std::uint8_t{0xFF});
    EXPECT_GT(stuffed, 20) << "subsampling " << subsampling;
    ASSERT_TRUE(same_points(jpeg, -1, "noise, subsampling " + std::to_string(subsampling)));
    std::vector<ResumePoint> points;
    ASSERT_EQ(scan_resume_points(jpeg, layout, layout.mcu_rows - 1, points), layout.mcu_rows);
  }
  // Large enough (4,608 blocks) for the scanner's two-codes-at-once tables.
  ASSERT_TRUE(same_points(noisy_jpeg(0, 384, 256), -1, "noise 384x256"));
}

// A 0xFF data byte (stuffed) written at an offset, the data cut there, or a marker put there:
// wherever they fall against the eight-byte refills, the scanner stops where the plain decoder
// does and never records a point that needed bits past the data.
void check_edges(const Bytes& jpeg, std::size_t from, std::size_t to, const std::string& what) {
  for (std::size_t i = from; i < to; ++i) {
    const std::string at = what + " at " + std::to_string(i);
    Bytes ff(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(i));
    ff.insert(ff.end(), {0xFF, 0x00});
    ff.insert(ff.end(), jpeg.begin() + static_cast<std::ptrdiff_t>(i) + 1, jpeg.end());
    same_points(ff, -1, "0xFF" + at);
    same_points(Bytes(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(i)), -1, "cut" + at);
    Bytes marker = jpeg;
    marker.insert(marker.begin() + static_cast<std::ptrdiff_t>(i), {0xFF, 0xD0});
    same_points(marker, -1, "marker" + at);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(JpegScan, EdgesAtEveryByteGiveThePlainDecodersPoints) {
  // A small file at every byte of its scan (one code per coefficient: too few blocks for the
  // pair tables).
  const Bytes small =
      test::encode_jpeg(test::make_pattern(48, 64, 3, 11), 48, 64, 3, {.quality = 75, .subsampling = 2});
  ScanLayout layout;
  ASSERT_TRUE(parse_scan_layout(small, layout));
  check_edges(small, layout.scan_offset, small.size() - 2, "small");  // up to the EOI
  // A large one (6,144 blocks, pair tables) at every byte of three windows: the scan's start,
  // middle and end.
  const Bytes large =
      test::encode_jpeg(test::make_pattern(512, 256, 3, 12), 512, 256, 3, {.quality = 90, .subsampling = 0});
  ASSERT_TRUE(parse_scan_layout(large, layout));
  ASSERT_GE(std::int64_t{layout.mcus_per_row} * layout.mcu_rows * layout.blocks, 6000);
  const std::size_t mid = (layout.scan_offset + large.size()) / 2;
  for (const std::size_t from : {std::size_t{layout.scan_offset}, mid, large.size() - 66}) {
    check_edges(large, from, from + 64, "large");
    if (HasFailure()) return;
  }
}

// Resuming from a recorded point reads the rest as a scan from the top does.
TEST(JpegScan, ResumingFromEachPointGivesTheSameLaterPoints) {
  const Bytes jpeg = noisy_jpeg(2);
  ScanLayout layout;
  ASSERT_TRUE(parse_scan_layout(jpeg, layout));
  std::vector<ResumePoint> all;
  ASSERT_EQ(scan_resume_points(jpeg, layout, layout.mcu_rows - 1, all), layout.mcu_rows);
  for (int row = 0; row < layout.mcu_rows; ++row) {
    std::vector<ResumePoint> part(all.begin(), all.begin() + row + 1);
    ASSERT_EQ(scan_resume_points(jpeg, layout, layout.mcu_rows - 1, part), layout.mcu_rows);
    for (std::size_t i = 0; i < all.size(); ++i) {
      EXPECT_EQ(part[i].byte, all[i].byte) << row;
      EXPECT_EQ(part[i].bit, all[i].bit) << row;
      EXPECT_EQ(part[i].dc[0], all[i].dc[0]) << row;
    }
  }
}

}  // namespace
}  // namespace sluice::stages
