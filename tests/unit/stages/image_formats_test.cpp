// The decode stage's other formats (PNG, WebP, GIF, BMP, PNM, TIFF) against Pillow, on a corpus
// that tests/reference/image_corpus.py writes once for this test binary: every variant held to
// Pillow's Image.open(f).convert("RGB") and convert("L") pixels, or refused where Pillow refuses
// it (and where docs/reliability.md lists a refusal of ours); sniffing by first bytes; the
// max_image_pixels check from the header before any pixel is allocated; the workspace each
// decoder states against what it takes.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sluice/core/error.hpp"
#include "stages/decode/image_decoder.hpp"
#include "stages/decode/jpeg_decoder.hpp"
#include "stages/program/sample_program.hpp"
#include "one_file_table.hpp"
#include "image_corpus.hpp"
#include "test_support.hpp"

namespace sluice::stages {
namespace {

using Bytes = std::vector<std::uint8_t>;

using test::ImageCorpus;
using Variant = test::CorpusVariant;

struct Decoded {
  bool ok = false;
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
  ImageProbe probe;
  Bytes pixels;
};

Decoded decode_file(ImageDecoder& decoder, JpegDecoder& jpeg, const Bytes& bytes) {
  Decoded d;
  try {
    d.probe = probe_image(bytes, jpeg, decoder);
    d.pixels.resize(static_cast<std::size_t>(d.probe.width) * d.probe.height * decoder.channels());
    decoder.decode(bytes, d.probe,
                   ImageView{d.pixels.data(), d.probe.width, d.probe.height, decoder.channels(),
                             static_cast<std::ptrdiff_t>(d.probe.width) * decoder.channels()});
    d.ok = true;
  } catch (const Error& e) {
    d.code = e.code();
    d.message = e.cause();
  }
  return d;
}

void check_corpus(Color color) {
  const ImageCorpus& corpus = ImageCorpus::get();
  DecodeOptions options;
  options.color = color;
  ImageDecoder decoder(options);
  JpegDecoder jpeg(options);
  const char* suffix = color == Color::kGrey ? ".l" : ".rgb";
  int matched = 0;
  int refused = 0;
  for (const Variant& v : corpus.variants()) {
    SCOPED_TRACE(v.name);
    const Bytes bytes = test::read_bytes(corpus.path(v.name));
    const Decoded d = decode_file(decoder, jpeg, bytes);
    if (v.expect != "pixels") {
      EXPECT_FALSE(d.ok) << v.name << ": Pillow refuses it (or docs/reliability.md says sluice does); sluice decoded it";
      // Never an internal error or an argument error: the file's fault, named as such.
      EXPECT_TRUE(d.code == ErrorCode::kCorruptData || d.code == ErrorCode::kUnsupportedFormat ||
                  d.code == ErrorCode::kTooLarge)
          << d.message;
      ++refused;
      continue;
    }
    ASSERT_TRUE(d.ok) << v.name << ": " << d.message;
    ASSERT_EQ(d.probe.width, v.width);
    ASSERT_EQ(d.probe.height, v.height);
    const Bytes want = test::read_bytes(corpus.path(v.name + suffix));
    ASSERT_EQ(d.pixels.size(), want.size());
    int worst = 0;
    std::size_t differ = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      const int diff = std::abs(int{d.pixels[i]} - int{want[i]});
      worst = std::max(worst, diff);
      differ += diff > 0 ? 1 : 0;
    }
    EXPECT_LE(worst, v.tolerance) << v.name << ": " << differ << " of " << want.size() << " samples differ";
    ++matched;
  }
  EXPECT_GT(matched, 60);
  EXPECT_GT(refused, 15);
}

TEST(ImageFormats, EveryVariantEqualsPillowRgbOrIsRefused) {
  REQUIRE_CORPUS();
  check_corpus(Color::kRGB);
}

TEST(ImageFormats, EveryVariantEqualsPillowGreyOrIsRefused) {
  REQUIRE_CORPUS();
  check_corpus(Color::kGrey);
}

TEST(ImageFormats, SniffsByFirstBytesNotByName) {
  REQUIRE_CORPUS();
  EXPECT_EQ(sniff_format(test::read_bytes(corpus.path("png_rgb8.png"))), ImageFormat::kPng);
  EXPECT_EQ(sniff_format(test::read_bytes(corpus.path("webp_lossy.webp"))), ImageFormat::kWebp);
  EXPECT_EQ(sniff_format(test::read_bytes(corpus.path("gif_global.gif"))), ImageFormat::kGif);
  EXPECT_EQ(sniff_format(test::read_bytes(corpus.path("bmp_24.bmp"))), ImageFormat::kBmp);
  EXPECT_EQ(sniff_format(test::read_bytes(corpus.path("pnm_p1.pbm"))), ImageFormat::kPnm);
  EXPECT_EQ(sniff_format(test::read_bytes(corpus.path("tiff_rgb_raw.tif"))), ImageFormat::kTiff);
  const Bytes text{'h', 'e', 'l', 'l', 'o'};
  EXPECT_EQ(sniff_format(text), ImageFormat::kUnknown);
  EXPECT_FALSE(ImageDecoder::handles(text));  // to JpegDecoder, whose message names it
  EXPECT_EQ(format_of_extension("a/b.PNG"), ImageFormat::kPng);
  EXPECT_EQ(format_of_extension("x.TiF"), ImageFormat::kTiff);
  EXPECT_EQ(format_of_extension("x.jpeg"), ImageFormat::kJpeg);
  EXPECT_EQ(format_of_extension("dir.png/x"), ImageFormat::kUnknown);
}

TEST(ImageFormats, ProbeReportsDepthAlphaPaletteAnimation) {
  REQUIRE_CORPUS();
  ImageDecoder decoder(DecodeOptions{});
  const auto probe = [&](const char* name) { return decoder.probe(test::read_bytes(corpus.path(name))); };
  EXPECT_EQ(probe("png_rgb16.png").bit_depth, 16);
  EXPECT_TRUE(probe("png_rgba8.png").alpha);
  EXPECT_TRUE(probe("png_palette_trns.png").alpha);
  EXPECT_TRUE(probe("png_palette4.png").palette);
  EXPECT_TRUE(probe("png_apng.png").animated);
  EXPECT_TRUE(probe("png_adam7_rgb8.png").interlaced);
  EXPECT_TRUE(probe("webp_animated.webp").animated);
  EXPECT_TRUE(probe("webp_lossless_alpha.webp").alpha);
  EXPECT_TRUE(probe("gif_animated.gif").animated);
  EXPECT_FALSE(probe("gif_global.gif").animated);
  EXPECT_TRUE(probe("tiff_multipage.tif").animated);
  EXPECT_EQ(probe("tiff_grey16.tif").bit_depth, 16);
}

// max_image_pixels is checked from the header, before any pixel is allocated: a 100000x100000
// PNG, GIF screen and BMP are refused with kTooLarge naming the size, and the workspace has not
// grown.
TEST(ImageFormats, MaxImagePixelsRefusesABombFromItsHeader) {
  REQUIRE_CORPUS();
  DecodeOptions options;
  options.max_image_pixels = 1000;
  ImageDecoder small(options);
  for (const char* name : {"png_rgb8.png", "webp_lossy.webp", "gif_global.gif", "bmp_24.bmp", "pnm_p6.ppm",
                           "tiff_rgb_raw.tif"}) {
    SCOPED_TRACE(name);
    try {
      small.probe(test::read_bytes(corpus.path(name)));
      ADD_FAILURE() << "a 37x29 image passed max_image_pixels = 1000";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kTooLarge);
      EXPECT_NE(e.cause().find("37x29"), std::string::npos) << e.cause();
    }
  }
  ImageDecoder decoder(DecodeOptions{});
  try {
    decoder.probe(test::read_bytes(corpus.path("png_huge.png")));
    ADD_FAILURE() << "a 100000x100000 PNG header passed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTooLarge);
    EXPECT_NE(e.cause().find("100000x100000"), std::string::npos) << e.cause();
  }
}

// Each decoder takes no more workspace than it states for the image, and the workspace is what
// a budget sees: decoding every variant with the workspace attached to a budget leaves it holding
// no more than the largest statement, rounded as AlignedBuffer rounds.
TEST(ImageFormats, WorkspaceStaysWithinWhatTheDecoderStates) {
  REQUIRE_CORPUS();
  for (const Color color : {Color::kRGB, Color::kGrey}) {
    DecodeOptions options;
    options.color = color;
    MemoryBudget budget(64u << 20);  // declared first: it outlives the workspace it accounts
    ImageDecoder decoder(options);
    decoder.attach(budget, MemoryUse::kDecodeBuffers, 0);
    JpegDecoder jpeg(options);
    std::uint64_t stated = 0;
    for (const Variant& v : corpus.variants()) {
      if (v.expect != "pixels") continue;
      const Bytes bytes = test::read_bytes(corpus.path(v.name));
      const Decoded d = decode_file(decoder, jpeg, bytes);
      ASSERT_TRUE(d.ok) << v.name << ": " << d.message;
      stated = std::max(stated, decoder.workspace_requirements(d.probe));
      EXPECT_LE(budget.used(), AlignedBuffer::rounded_capacity(static_cast<std::size_t>(stated))) << v.name;
    }
    EXPECT_GT(budget.used(), 0u);
  }
}

// A budget too small for the stated workspace: the decode fails with a budget error before the
// library runs, never allocating past it.
TEST(ImageFormats, WorkspacePastTheBudgetIsRefused) {
  REQUIRE_CORPUS();
  DecodeOptions options;
  options.color = Color::kGrey;  // WebP's grey output needs the whole RGB image
  MemoryBudget budget(1024);  // below the 37x29x3 bytes it states; declared first: it outlives the workspace
  ImageDecoder decoder(options);
  decoder.attach(budget, MemoryUse::kDecodeBuffers, 0);
  JpegDecoder jpeg(options);
  const Bytes bytes = test::read_bytes(corpus.path("webp_lossy.webp"));
  EXPECT_EQ(decoder.workspace_requirements(decoder.probe(bytes)), 37u * 29u * 3u);
  const Decoded d = decode_file(decoder, jpeg, bytes);
  EXPECT_FALSE(d.ok);
  EXPECT_TRUE(d.code == ErrorCode::kTooLarge || d.code == ErrorCode::kOutOfBudget) << d.message;
  EXPECT_EQ(budget.used(), 0u);
}

// A PNG and a TIFF (strips) larger than their worker's share with nothing else free: decoded in row
// bands and resampled
// as they come, the same samples as the whole-image path byte for byte (RGB and grey, resize and
// crop, random resized crop with flip, a padded crop), the decoded buffer within its share.
TEST(ImageFormats, LargePngAndTiffDecodeInRowBandsWithTheWholeImageSamples) {
  REQUIRE_CORPUS();
  test::TempDir dir;
  const int w = 803, h = 605;
  const std::string raw = (dir / "big.rgb").string();
  test::write_bytes(raw, test::make_pattern(w, h, 3, 5));
  const std::string png = (dir / "big.png").string();
  const std::string tif = (dir / "big.tif").string();  // LZW, 16-row strips
  const std::string command = std::string("'") + SLUICE_SYSTEM_PYTHON +
                              "' -c 'import sys; from PIL import Image; "
                              "im = Image.frombytes(\"RGB\", (803, 605), open(sys.argv[1], \"rb\").read()); "
                              "im.save(sys.argv[2]); im.save(sys.argv[3], compression=\"tiff_lzw\", tiffinfo={278: 16})' '" +
                              raw + "' '" + png + "' '" + tif + "'";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const std::vector<std::pair<std::vector<GeometryStep>, Size2>> chains = {
      {{{spec::ResizeShorter{256, {}}, 1}, {spec::CenterCrop{224, 224}, 2}}, {224, 224}},
      {{{spec::RandomResizedCrop{160, 160, {}}, 3}, {spec::FlipHorizontal{0.5, {}}, 4}}, {160, 160}},
      {{{spec::RandomCrop{240, 240, {.padding = 40, .fill = 7}}, 6}}, {240, 240}},
  };
  int banded = 0;
  for (const Color color : {Color::kRGB, Color::kGrey}) {
    for (const auto& [steps, size] : chains) {
      SampleProgramConfig config;
      config.decode.color = color;
      config.geometry = steps;
      config.normalize = {.mean = {}, .std = {}, .layout = Layout::kNHWC, .dtype = DType::kU8};
      config.output = size;
      const SampleProgram program(config);
      auto whole = program.make_workspace();
      MemoryBudget budget(64 << 20);
      // The formats' workspace gets what the memory plan would give (a TIFF band of 16 rows).
      auto tight = program.make_workspace(budget, WorkspaceShare{.file = 8 << 20, .decoded = 64 << 10, .resized = 1 << 20,
                                                                 .scratch = 1 << 20, .decoder = {}, .formats = 256 << 10});
      auto rest = budget.try_reserve(budget.available(), MemoryUse::kBatches);
      ASSERT_TRUE(rest);
      for (const std::string& file : {png, tif}) {
        for (const std::int64_t epoch : {1}) {
          std::vector<std::uint8_t> want(program.sample_bytes()), got(program.sample_bytes());
          program.run(test::one_file(file), 0, SampleKey{epoch, 3, 0}, *whole, want.data());
          program.run(test::one_file(file), 0, SampleKey{epoch, 3, 0}, *tight, got.data());
          ASSERT_TRUE(got == want) << file << ", epoch " << epoch;
          EXPECT_LE(tight->decoded.capacity(), std::size_t{64} << 10);
          banded += whole->decoded.capacity() > tight->decoded.capacity();
        }
      }
    }
  }
  EXPECT_EQ(banded, 2 * 3 * 2);
}

}  // namespace
}  // namespace sluice::stages
