// sluice's entropy decoder in libjpeg-turbo's place (stages/decode/jpeg_huffman.hpp): every decode
// gives what libjpeg-turbo's own decoder gives, to the byte, with the same errors and warnings:
// the shared datasets' files (whole, a region, DCT-scaled, grey, rows skipped by
// jpeg_skip_scanlines, fast upsampling), generated files of each chroma layout with restart
// intervals, and damaged ones (cut at every byte, bytes changed, markers put in the data).
#include <gtest/gtest.h>

#include <csetjmp>
#include <cstdio>
#include <optional>
#include <random>
#include <string>

#include <jpeglib.h>

#include "jpeg_decoder_test_util.hpp"
#include "sluice/core/error.hpp"
#include "stages/decode/jpeg_huffman.hpp"

namespace sluice::stages {
namespace {

using jpeg_test::Bytes;
namespace fs = std::filesystem;

// What one decode gave: the pixels, or the error; the warnings either way.
struct Outcome {
  bool ok = false;
  std::string error;
  Bytes pixels;
  int warnings = 0;
  std::string first_warning;
};

Outcome run(const Bytes& jpeg, const DecodeOptions& options, const JpegRequest& request, bool own) {
  set_own_huffman(own);
  Outcome o;
  JpegDecoder decoder(options);
  try {
    const jpeg_test::Image image = jpeg_test::decode(decoder, jpeg, request);
    o.ok = true;
    o.pixels = image.pixels;
  } catch (const Error& e) {
    o.error = e.cause();
  }
  const JpegWarnings w = decoder.warnings();
  o.warnings = w.count;
  o.first_warning = std::string(w.first);
  set_own_huffman(true);
  return o;
}

// Own decoder and libjpeg's agree; returns whether the decode succeeded.
bool same(const Bytes& jpeg, const DecodeOptions& options, const JpegRequest& request, const std::string& what) {
  const Outcome a = run(jpeg, options, request, true);
  const Outcome b = run(jpeg, options, request, false);
  EXPECT_EQ(a.ok, b.ok) << what << ": " << a.error << " / " << b.error;
  EXPECT_EQ(a.error, b.error) << what;
  EXPECT_EQ(a.warnings, b.warnings) << what;
  EXPECT_EQ(a.first_warning, b.first_warning) << what;
  EXPECT_TRUE(a.pixels == b.pixels) << what << ": pixels differ";
  return b.ok;
}

// The decodes each file is held to: whole, a region low in the image (rows above skipped), the
// same at 1/2 scale, grey, and a region with fast upsampling.
void same_every_way(const Bytes& jpeg, const std::string& what, bool all = true) {
  JpegDecoder probe({});
  JpegHeader h;
  try {
    h = probe.read_header(jpeg);
  } catch (const Error&) {
    return;
  }
  const Rect lower{h.width / 5, h.height / 3, h.width / 2, h.height / 2};
  same(jpeg, jpeg_test::options(Color::kRGB), {}, what + " whole");
  if (lower.width > 0 && lower.height > 0) same(jpeg, jpeg_test::options(Color::kRGB), {1, lower}, what + " region");
  if (!all) return;
  if (lower.width > 1 && lower.height > 1) {
    same(jpeg, jpeg_test::options(Color::kRGB), {2, {lower.x / 2, lower.y / 2, lower.width / 2, lower.height / 2}},
         what + " region 1/2");
  }
  same(jpeg, jpeg_test::options(Color::kGrey), {}, what + " grey");
  same(jpeg, jpeg_test::options(Color::kRGB), {8, {}}, what + " 1/8");
  if (lower.width > 0 && lower.height > 0) {
    same(jpeg, jpeg_test::options(Color::kRGB, false, true), {1, lower}, what + " region fast upsampling");
  }
}

// Returns how many decodes the own decoder gave up.
std::uint64_t same_on_folder(const fs::path& dir, int step, bool all) {
  const std::uint64_t before = own_huffman_counts().installed;
  const std::uint64_t gave_up = own_huffman_counts().gave_up;
  const auto files = jpeg_test::jpegs_under(dir);
  EXPECT_FALSE(files.empty());
  for (std::size_t i = 0; i < files.size(); i += static_cast<std::size_t>(step)) {
    same_every_way(jpeg_test::read_bytes(files[i]), files[i].filename().string(), all);
    if (::testing::Test::HasFailure()) return 0;
  }
  EXPECT_GT(own_huffman_counts().installed, before + files.size() / static_cast<std::size_t>(step));
  return own_huffman_counts().gave_up - gave_up;
}

TEST(JpegOwnHuffman, ImagenetPhotosDecodeAsLibjpegDecodes) {
  SLUICE_REQUIRE_DATASET(dir, "imagenet-photos");
  // Sound photographs never send it back to libjpeg's decoder.
  EXPECT_EQ(same_on_folder(dir, 1, false), 0u);
  EXPECT_EQ(same_on_folder(dir, 7, true), 0u);
}

TEST(JpegOwnHuffman, OtherDatasetsDecodeAsLibjpegDecodes) {
  SLUICE_REQUIRE_DATASET(wallpaper, "wallpaper-crops");
  same_on_folder(wallpaper, 5, true);
  SLUICE_REQUIRE_DATASET(imagenette, "imagenette-val");
  same_on_folder(imagenette, 20, true);
  SLUICE_REQUIRE_DATASET(cifar, "cifar10/test");
  same_on_folder(cifar, 200, true);
  SLUICE_REQUIRE_DATASET(truncated, "corrupt/truncated.jpg");
  same_every_way(jpeg_test::read_bytes(truncated), "truncated.jpg");
}

[[noreturn]] void jump_out(j_common_ptr cinfo) { std::longjmp(*static_cast<std::jmp_buf*>(cinfo->client_data), 1); }

// Noisy pixels encoded with libjpeg at a chroma layout (h x v luma factors, 0 for grey) and a
// restart interval in MCUs.
Bytes encode(int width, int height, int h, int v, int restart, int quality, unsigned seed) {
  const int channels = h == 0 ? 1 : 3;
  Bytes pixels = test::make_pattern(width, height, channels, seed);
  std::mt19937 rng(seed);
  for (auto& p : pixels) p = static_cast<std::uint8_t>(p + rng() % 24);
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  std::jmp_buf jump;
  c.err = jpeg_std_error(&err);
  err.error_exit = jump_out;
  c.client_data = &jump;
  unsigned char* out = nullptr;
  unsigned long size = 0;
  if (setjmp(jump) != 0) {
    jpeg_destroy_compress(&c);
    ADD_FAILURE() << "encode failed";
    return {};
  }
  jpeg_create_compress(&c);
  jpeg_mem_dest(&c, &out, &size);
  c.image_width = static_cast<JDIMENSION>(width);
  c.image_height = static_cast<JDIMENSION>(height);
  c.input_components = channels;
  c.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, quality, TRUE);
  if (channels == 3) {
    c.comp_info[0].h_samp_factor = h;
    c.comp_info[0].v_samp_factor = v;
  }
  c.restart_interval = static_cast<unsigned>(restart);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = pixels.data() + static_cast<std::size_t>(c.next_scanline) * width * channels;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  Bytes jpeg(out, out + size);
  jpeg_destroy_compress(&c);
  std::free(out);
  return jpeg;
}

TEST(JpegOwnHuffman, ChromaLayoutsAndRestartIntervalsDecodeAsLibjpegDecodes) {
  const std::uint64_t before = own_huffman_counts().installed;
  const int layouts[][2] = {{1, 1}, {2, 1}, {2, 2}, {0, 0}, {1, 2}};
  unsigned seed = 1;
  for (const auto& l : layouts) {
    for (int restart : {0, 1, 3, 7}) {
      for (int quality : {50, 100}) {
        const Bytes jpeg = encode(97, 75, l[0], l[1], restart, quality, seed++);
        same_every_way(jpeg, "layout " + std::to_string(l[0]) + "x" + std::to_string(l[1]) + " restart " +
                                 std::to_string(restart) + " quality " + std::to_string(quality));
        if (HasFailure()) return;
      }
    }
  }
  EXPECT_GE(own_huffman_counts().installed, before + 5 * 4 * 2 * 6);
}

// A small file with restarts cut at every byte, and with bytes changed and markers put in its
// data: the same pixels, errors and warnings as libjpeg's decoder, with and without strict.
TEST(JpegOwnHuffman, DamagedFilesGiveWhatLibjpegGives) {
  const std::uint64_t gave_up = own_huffman_counts().gave_up;
  const Bytes jpeg = encode(40, 32, 2, 2, 2, 90, 11);
  DecodeOptions strict = jpeg_test::options(Color::kRGB);
  strict.strict = true;
  const JpegRequest region{1, {8, 16, 24, 16}};
  for (std::size_t cut = 1; cut < jpeg.size(); ++cut) {
    const Bytes part(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(cut));
    const std::string what = "cut at " + std::to_string(cut);
    same(part, jpeg_test::options(Color::kRGB), {}, what);
    same(part, jpeg_test::options(Color::kRGB), region, what + " region");
    same(part, strict, {}, what + " strict");
    if (HasFailure()) return;
  }
  std::mt19937 rng(3);
  std::size_t scan = 2;  // the first byte of entropy-coded data: after the SOS segment
  while (scan + 4 < jpeg.size() && !(jpeg[scan] == 0xFF && jpeg[scan + 1] == 0xDA)) ++scan;
  scan += 2 + (jpeg[scan + 2] << 8 | jpeg[scan + 3]);
  ASSERT_LT(scan + 100, jpeg.size());
  for (int i = 0; i < 1500; ++i) {
    Bytes bad = jpeg;
    const std::size_t at = scan + rng() % (jpeg.size() - 2 - scan);
    switch (i % 5) {
      case 0: bad[at] = static_cast<std::uint8_t>(rng()); break;
      case 1: bad[at] ^= static_cast<std::uint8_t>(1u << (rng() % 8)); break;
      case 2: bad[at] = 0xFF; bad[at + 1] = static_cast<std::uint8_t>(0xD0 + rng() % 8); break;
      case 3: bad[at] = 0xFF; bad[at + 1] = 0xD9; break;
      default: bad.insert(bad.begin() + static_cast<std::ptrdiff_t>(at), static_cast<std::uint8_t>(rng())); break;
    }
    const std::string what = "change " + std::to_string(i) + " at " + std::to_string(at);
    same(bad, jpeg_test::options(Color::kRGB), {}, what);
    same(bad, jpeg_test::options(Color::kRGB), region, what + " region");
    same(bad, strict, {}, what + " strict");
    if (HasFailure()) return;
  }
  EXPECT_GT(own_huffman_counts().gave_up, gave_up + 100) << "the fallback never ran";
}

TEST(JpegOwnHuffman, SwitchTurnsItOff) {
  const Bytes jpeg = encode(64, 48, 2, 2, 0, 80, 5);
  const std::uint64_t before = own_huffman_counts().installed;
  run(jpeg, jpeg_test::options(Color::kRGB), {}, false);
  EXPECT_EQ(own_huffman_counts().installed, before);
  run(jpeg, jpeg_test::options(Color::kRGB), {}, true);
  EXPECT_EQ(own_huffman_counts().installed, before + 1);
}

}  // namespace
}  // namespace sluice::stages
