// The colour kernel of small JPEGs (src/stages/ycc_planes.*) on its own: against a reference
// written from libjpeg's description (jdcolor.c's tables, jdsample.c's h2v2 triangle filter with
// its edge cases), for the SSE4.1 and the portable loops, on every width and height a block
// boundary can fall on, with strided planes and outputs and saturating colours. The decoder's
// tests hold the whole path to tjDecompress2.
#include "stages/decode/ycc_planes.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "sluice/detail/memory/aligned_buffer.hpp"

namespace sluice::stages {
namespace {

using Bytes = std::vector<std::uint8_t>;

struct Plane {
  int width = 0, height = 0, stride = 0;
  Bytes data;
  SamplePlane view() const { return {data.data(), width, height, stride}; }
  int at(int x, int y) const { return data[static_cast<std::size_t>(y) * stride + x]; }
};

Plane random_plane(int width, int height, std::mt19937& rng, int extremes) {
  Plane p{width, height, width + 5, {}};  // a stride wider than the row
  p.data.resize(static_cast<std::size_t>(p.stride) * height);
  for (auto& v : p.data) {
    // Some planes lean on 0 and 255 so the conversion saturates both ways.
    const auto r = rng();
    v = static_cast<std::uint8_t>(extremes != 0 && r % 3 == 0 ? (r % 2 == 0 ? 0 : 255) : r & 255);
  }
  return p;
}

// jdcolor.c's build_ycc_rgb_table, as tables, and its range limit.
struct Tables {
  int cr_r[256], cb_b[256];
  long cr_g[256], cb_g[256];
  Tables() {
    const auto fix = [](double x) { return static_cast<long>(x * 65536.0 + 0.5); };
    for (int i = 0; i < 256; ++i) {
      const long x = i - 128;
      cr_r[i] = static_cast<int>((fix(1.40200) * x + 32768) >> 16);
      cb_b[i] = static_cast<int>((fix(1.77200) * x + 32768) >> 16);
      cr_g[i] = -fix(0.71414) * x;
      cb_g[i] = -fix(0.34414) * x + 32768;
    }
  }
};

std::uint8_t limit(long v) { return static_cast<std::uint8_t>(std::clamp<long>(v, 0, 255)); }

// Upsampled chroma at output pixel (x, y) of a 4:2:0 plane: jdsample.c's h2v2_fancy_upsample,
// with jdmainct.c's context rows (the edge row repeats beyond the plane).
int fancy(const Plane& c, int x, int y) {
  const int row = y / 2;
  const int other = y % 2 == 0 ? std::max(row - 1, 0) : std::min(row + 1, c.height - 1);
  const auto sum = [&](int col) { return 3 * c.at(col, row) + c.at(col, other); };
  const int col = x / 2;
  if (x % 2 == 0) {
    return col == 0 ? (sum(0) * 4 + 8) >> 4 : (sum(col) * 3 + sum(col - 1) + 8) >> 4;
  }
  return col == c.width - 1 ? (sum(col) * 4 + 7) >> 4 : (sum(col) * 3 + sum(col + 1) + 7) >> 4;
}

Bytes reference(const Plane& y, const Plane& cb, const Plane& cr, ChromaLayout layout) {
  static const Tables t;
  Bytes out(static_cast<std::size_t>(y.width) * y.height * 3);
  for (int row = 0; row < y.height; ++row) {
    for (int x = 0; x < y.width; ++x) {
      const int b = layout == ChromaLayout::k444 ? cb.at(x, row) : fancy(cb, x, row);
      const int r = layout == ChromaLayout::k444 ? cr.at(x, row) : fancy(cr, x, row);
      const int luma = y.at(x, row);
      std::uint8_t* px = out.data() + (static_cast<std::size_t>(row) * y.width + x) * 3;
      px[0] = limit(luma + t.cr_r[r]);
      px[1] = limit(luma + ((t.cb_g[b] + t.cr_g[r]) >> 16));
      px[2] = limit(luma + t.cb_b[b]);
    }
  }
  return out;
}

Bytes run(const Plane& y, const Plane& cb, const Plane& cr, ChromaLayout layout, YccLoops loops) {
  const int pad = 7;  // a strided output: the padding must stay untouched
  const int stride = y.width * 3 + pad;
  Bytes out(static_cast<std::size_t>(stride) * y.height, 0xA5);
  AlignedBuffer scratch;
  scratch.reserve(ycc_scratch_bytes(y.width));
  ycc_to_rgb(y.view(), cb.view(), cr.view(), layout, ImageView{out.data(), y.width, y.height, 3, stride},
             scratch.data(), loops);
  Bytes packed;
  for (int row = 0; row < y.height; ++row) {
    const auto* begin = out.data() + static_cast<std::size_t>(row) * stride;
    packed.insert(packed.end(), begin, begin + y.width * 3);
    for (int i = 0; i < pad; ++i) EXPECT_EQ(begin[y.width * 3 + i], 0xA5) << "row " << row << " padding";
  }
  return packed;
}

TEST(YccPlanes, EveryWidthAndHeightMatchesLibjpegsArithmeticInBothLoopSets) {
  std::mt19937 rng(2026);
  int cases = 0;
  for (int width = 1; width <= 70; ++width) {
    for (const int height : {1, 2, 3, 8, 17}) {
      for (const ChromaLayout layout : {ChromaLayout::k444, ChromaLayout::k420}) {
        const bool half = layout == ChromaLayout::k420;
        const int cw = half ? (width + 1) / 2 : width;
        const int ch = half ? (height + 1) / 2 : height;
        if (half && cw < 3) continue;  // libjpeg repeats instead of filtering: not this kernel's case
        const Plane y = random_plane(width, height, rng, width % 2);
        const Plane cb = random_plane(cw, ch, rng, width % 3);
        const Plane cr = random_plane(cw, ch, rng, width % 3);
        const Bytes want = reference(y, cb, cr, layout);
        const std::string what = std::to_string(width) + "x" + std::to_string(height) + (half ? " 4:2:0" : " 4:4:4");
        ASSERT_EQ(run(y, cb, cr, layout, YccLoops::kFastest), want) << what;
        ASSERT_EQ(run(y, cb, cr, layout, YccLoops::kPortable), want) << what;
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, 70 * 5 + 66 * 5);  // 4:2:0 needs chroma at least 3 wide: width >= 5
}

TEST(YccPlanes, LumaIsCopiedForGreyAndReplicatedForRgb) {
  std::mt19937 rng(7);
  const Plane y = random_plane(37, 5, rng, 0);
  Bytes grey(37 * 5), rgb(37 * 5 * 3);
  luma_to_output(y.view(), ImageView{grey.data(), 37, 5, 1, 37});
  luma_to_output(y.view(), ImageView{rgb.data(), 37, 5, 3, 37 * 3});
  for (int row = 0; row < 5; ++row) {
    for (int x = 0; x < 37; ++x) {
      const std::size_t i = static_cast<std::size_t>(row) * 37 + x;
      ASSERT_EQ(grey[i], y.at(x, row));
      ASSERT_EQ(rgb[3 * i], y.at(x, row));
      ASSERT_EQ(rgb[3 * i + 1], y.at(x, row));
      ASSERT_EQ(rgb[3 * i + 2], y.at(x, row));
    }
  }
}

}  // namespace
}  // namespace sluice::stages
