// The whole-image PNG path (src/stages/decode/png_fast.hpp) and its defilter: every filter on every
// pixel size against a plain reference of the PNG spec (first row, in place and not); every PNG of
// the corpus the path takes (8 and 16 bits) decoded by it, not by libspng behind it, to Pillow's pixels; the damaged
// image data Pillow refuses handed back to libspng, which refuses it; a budget without room for the
// path's workspace sending the file to libspng's row path, which decodes it.
#include <gtest/gtest.h>
#include <libdeflate.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/memory/budget.hpp"
#include "stages/decode/image_decoder.hpp"
#include "stages/decode/png_defilter.hpp"
#include "stages/decode/png_fast.hpp"
#include "image_corpus.hpp"
#include "test_support.hpp"

namespace sluice::stages {
namespace {

using Bytes = std::vector<std::uint8_t>;

// The PNG spec's section 9, a byte at a time.
Bytes reference_defilter(int filter, const Bytes& in, const Bytes* prior, int bpp) {
  Bytes out(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    const int a = i >= static_cast<std::size_t>(bpp) ? out[i - bpp] : 0;
    const int b = prior != nullptr ? (*prior)[i] : 0;
    const int c = prior != nullptr && i >= static_cast<std::size_t>(bpp) ? (*prior)[i - bpp] : 0;
    int predicted = 0;
    switch (filter) {
      case 1: predicted = a; break;
      case 2: predicted = b; break;
      case 3: predicted = (a + b) / 2; break;
      case 4: {
        const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
        predicted = pa <= pb && pa <= pc ? a : (pb <= pc ? b : c);
        break;
      }
      default: break;
    }
    out[i] = static_cast<std::uint8_t>(in[i] + predicted);
  }
  return out;
}

TEST(PngDefilter, EveryFilterAndPixelSizeEqualsTheSpec) {
  std::mt19937 rng(28);
  for (const int bpp : {1, 2, 3, 4, 6, 8}) {
    for (const std::size_t pixels : {std::size_t{1}, std::size_t{2}, std::size_t{37}, std::size_t{300}}) {
      const std::size_t n = pixels * static_cast<std::size_t>(bpp);
      Bytes in(n), prior(n);
      for (auto& v : in) v = static_cast<std::uint8_t>(rng());
      for (auto& v : prior) v = static_cast<std::uint8_t>(rng());
      for (int filter = 0; filter <= 4; ++filter) {
        SCOPED_TRACE("bpp " + std::to_string(bpp) + ", " + std::to_string(pixels) + " pixels, filter " +
                     std::to_string(filter));
        for (const bool first : {true, false}) {
          const Bytes want = reference_defilter(filter, in, first ? nullptr : &prior, bpp);
          Bytes out(n);
          ASSERT_TRUE(png::defilter_row(filter, in.data(), first ? nullptr : prior.data(), out.data(), n, bpp));
          EXPECT_EQ(out, want) << (first ? "first row" : "a later row");
          Bytes in_place = in;
          ASSERT_TRUE(png::defilter_row(filter, in_place.data(), first ? nullptr : prior.data(), in_place.data(), n, bpp));
          EXPECT_EQ(in_place, want) << "in place";
        }
      }
    }
  }
  Bytes row(12);
  EXPECT_FALSE(png::defilter_row(5, row.data(), nullptr, row.data(), row.size(), 3)) << "filter type 5";
  EXPECT_FALSE(png::defilter_row(1, row.data(), nullptr, row.data(), row.size(), 5)) << "5 bytes a pixel";
}

struct Inflater {
  libdeflate_decompressor* d = libdeflate_alloc_decompressor();
  ~Inflater() { libdeflate_free_decompressor(d); }
};

// The whole-image path alone on `bytes`: whether it took the file, and what it wrote.
bool decode_whole(const Bytes& bytes, Color color, Bytes& pixels, AlignedBuffer& scratch) {
  DecodeOptions options;
  options.color = color;
  ImageDecoder decoder(options);
  const ImageProbe probe = decoder.probe(bytes);
  if (!png::takes(probe)) return false;
  const int channels = decoder.channels();
  pixels.assign(static_cast<std::size_t>(probe.width) * probe.height * channels, 0);
  Inflater inflater;
  return png::decode_whole(bytes, probe,
                           ImageView{pixels.data(), probe.width, probe.height, channels,
                                     static_cast<std::ptrdiff_t>(probe.width) * channels},
                           scratch, *inflater.d);
}

TEST(PngWholeImagePath, TakesEveryNonInterlacedPngWithoutAPaletteWithPillowsPixels) {
  const test::ImageCorpus& corpus = test::ImageCorpus::get();
  if (!corpus.error().empty()) GTEST_SKIP() << corpus.error();
  int taken = 0;
  for (const test::CorpusVariant& v : corpus.variants()) {
    if (v.expect != "pixels" || v.name.rfind("png_", 0) != 0) continue;
    SCOPED_TRACE(v.name);
    const Bytes bytes = test::read_bytes(corpus.path(v.name));
    for (const Color color : {Color::kRGB, Color::kGrey}) {
      Bytes pixels;
      AlignedBuffer scratch;
      if (!decode_whole(bytes, color, pixels, scratch)) continue;
      const Bytes want = test::read_bytes(corpus.path(v.name + (color == Color::kGrey ? ".l" : ".rgb")));
      ASSERT_EQ(pixels.size(), want.size());
      int worst = 0;
      for (std::size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(pixels[i] - want[i]));
      EXPECT_LE(worst, v.tolerance);  // 0, but 1 for 16 bits (scaled where Pillow truncates or clips)
      ++taken;
    }
  }
  // The 22 filter variants (8 and 16 bits), the two chunked ones, Pillow's RGB, RGBA, grey,
  // grey+alpha and RGB with tRNS, and the 16-bit grey, RGB and RGBA ones, in RGB and in grey.
  EXPECT_GE(taken, 2 * 32);
}

TEST(PngWholeImagePath, DamagedImageDataGoesBackToLibspngWhichRefusesIt) {
  const test::ImageCorpus& corpus = test::ImageCorpus::get();
  if (!corpus.error().empty()) GTEST_SKIP() << corpus.error();
  for (const char* name : {"png_bad_adler.png", "png_bad_filter.png", "png_short_stream.png", "png_idat_crc.png"}) {
    SCOPED_TRACE(name);
    const Bytes bytes = test::read_bytes(corpus.path(name));
    Bytes pixels;
    AlignedBuffer scratch;
    EXPECT_FALSE(decode_whole(bytes, Color::kRGB, pixels, scratch));
    ImageDecoder decoder(DecodeOptions{});
    const ImageProbe probe = decoder.probe(bytes);
    EXPECT_TRUE(png::takes(probe));
    try {
      decoder.decode(bytes, probe, ImageView{pixels.data(), probe.width, probe.height, 3, probe.width * 3});
      ADD_FAILURE() << "decoded";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kCorruptData) << e.cause();
    }
  }
}

// With no room in the budget for the path's workspace, the file goes to libspng's rows (one row of
// workspace, none for RGB) and decodes the same.
TEST(PngWholeImagePath, NoRoomForItsWorkspaceFallsBackToRows) {
  const test::ImageCorpus& corpus = test::ImageCorpus::get();
  if (!corpus.error().empty()) GTEST_SKIP() << corpus.error();
  const Bytes bytes = test::read_bytes(corpus.path("png_idat_chunks.png"));
  const Bytes want = test::read_bytes(corpus.path("png_idat_chunks.png.rgb"));
  MemoryBudget budget(1024);  // below the 29 x (37 x 3 + 1) bytes of its rows; outlives the workspace
  ImageDecoder decoder(DecodeOptions{});
  decoder.attach(budget, MemoryUse::kDecodeBuffers, 0);
  const ImageProbe probe = decoder.probe(bytes);
  ASSERT_TRUE(png::takes(probe));
  EXPECT_EQ(decoder.workspace_requirements(probe), 29u * (37u * 3u + 1u) + probe.coded_bytes);
  EXPECT_GT(probe.coded_bytes, 0u);
  Bytes pixels(want.size());
  decoder.decode(bytes, probe, ImageView{pixels.data(), probe.width, probe.height, 3, probe.width * 3});
  EXPECT_EQ(pixels, want);
  EXPECT_EQ(budget.used(), 0u);
}

}  // namespace
}  // namespace sluice::stages
