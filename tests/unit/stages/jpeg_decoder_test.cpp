// JpegDecoder (the decode_jpeg kernel): byte-exact agreement with tjDecompress2 on the shared
// datasets, DCT scaling, region (ROI) decode against the whole image, colour conversions and row
// bands. Bad input, determinism and allocation: jpeg_decoder_errors_test.cpp.
#include "stages/decode/jpeg_decoder.hpp"

#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <random>
#include <thread>

#include "sluice/core/error.hpp"
#include "sluice/detail/memory/aligned_buffer.hpp"
#include "test_support.hpp"
#include "jpeg_decoder_test_util.hpp"

namespace sluice::stages {
namespace {

using namespace jpeg_test;  // NOLINT: the shared helpers of both JpegDecoder test files
using test::encode_jpeg;
using test::make_pattern;
using test::read_bytes;

// Decodes every file with RGB and grey output, with and without fast_dct, and compares each with
// tjDecompress2 given the same flags.
void expect_full_decodes_match_turbo(const std::vector<fs::path>& files, int denom) {
  for (const Color color : {Color::kRGB, Color::kGrey}) {
    for (const bool fast_dct : {false, true}) {
      JpegDecoder decoder(options(color, fast_dct));
      const int pf = color == Color::kRGB ? TJPF_RGB : TJPF_GRAY;
      for (const auto& path : files) {
        const Bytes jpeg = read_bytes(path);
        const Image ours = decode(decoder, jpeg, {denom, {}});
        const Image ref = turbo_decode(jpeg, denom, pf, fast_dct ? TJFLAG_FASTDCT : 0);
        const JpegHeader h = decoder.read_header(jpeg);
        ASSERT_EQ(JpegDecoder::scaled_size(h, denom), (Size2{ref.width, ref.height})) << path;
        ASSERT_TRUE(ours.pixels == ref.pixels)
            << path << " grey=" << (color == Color::kGrey) << " fast_dct=" << fast_dct << " 1/" << denom;
      }
    }
  }
}

TEST(JpegDecoderFull, WallpaperCropsMatchTjDecompress2RgbGreyFastDct) {
  SLUICE_REQUIRE_DATASET(dir, "wallpaper-crops");
  const Sample s = sample_of(dir, 10);
  ASSERT_GE(s.progressive, 50);  // 58 progressive (2 of them grey) and 26 greyscale files
  ASSERT_GE(s.grey, 20);
  expect_full_decodes_match_turbo(s.files, 1);
}

TEST(JpegDecoderFull, ImagenetteValIncludingGreyscaleMatchesTjDecompress2) {
  SLUICE_REQUIRE_DATASET(dir, "imagenette-val");
  const Sample s = sample_of(dir, 25);
  ASSERT_GE(s.grey, 60);
  expect_full_decodes_match_turbo(s.files, 1);
}

TEST(JpegDecoderFull, Cifar10TestMatchesTjDecompress2) {
  SLUICE_REQUIRE_DATASET(dir, "cifar10/test");
  expect_full_decodes_match_turbo(sample_of(dir, 50).files, 1);
}

TEST(JpegDecoderFull, FastUpsampleMatchesTjDecompress2WithFlag) {
  SLUICE_REQUIRE_DATASET(dir, "wallpaper-crops");
  JpegDecoder decoder(options(Color::kRGB, false, true));
  for (const auto& path : sample_of(dir, 40, 8).files) {
    const Bytes jpeg = read_bytes(path);
    ASSERT_TRUE(decode(decoder, jpeg).pixels == turbo_decode(jpeg, 1, TJPF_RGB, TJFLAG_FASTUPSAMPLE).pixels)
        << path;
  }
}

// Small whole images go through the component planes and ycc_planes.cpp instead of libjpeg's
// upsampler and colour converter: every subsampling, odd and even sizes on both sides of the
// 128x128 switch, baseline and progressive, both IDCTs and grey output, against tjDecompress2.
TEST(JpegDecoderFull, SmallImagesOfEverySubsamplingAndSizeMatchTjDecompress2) {
  const int sizes[][2] = {{1, 1},   {2, 3},   {3, 2},   {4, 4},   {5, 7},    {6, 6},    {7, 9},   {8, 8},
                          {9, 5},   {15, 17}, {16, 16}, {17, 15}, {28, 28},  {31, 33},  {32, 32}, {33, 31},
                          {40, 24}, {63, 65}, {96, 64}, {127, 129}, {128, 128}, {129, 127}, {130, 20}};
  int cases = 0;
  for (const auto& wh : sizes) {
    const int w = wh[0], h = wh[1];
    for (const int subsampling : {0, 1, 2, 3, 4, 5}) {  // TJSAMP_444 422 420 GRAY 440 411
      const int channels = subsampling == 3 ? 1 : 3;
      for (const bool progressive : {false, true}) {
        const Bytes jpeg = encode_jpeg(make_pattern(w, h, channels, static_cast<std::uint32_t>(w * 131 + h)), w, h,
                                       channels, {.quality = 90, .subsampling = subsampling, .progressive = progressive});
        for (const bool fast_dct : {false, true}) {
          const int flags = fast_dct ? TJFLAG_FASTDCT : 0;
          JpegDecoder rgb(options(Color::kRGB, fast_dct));
          JpegDecoder grey(options(Color::kGrey, fast_dct));
          const std::string what = std::to_string(w) + "x" + std::to_string(h) + " subsampling " +
                                   std::to_string(subsampling) + (progressive ? " progressive" : "") +
                                   (fast_dct ? " fast dct" : "");
          ASSERT_TRUE(decode(rgb, jpeg).pixels == turbo_decode(jpeg, 1, TJPF_RGB, flags).pixels) << what;
          ASSERT_TRUE(decode(grey, jpeg).pixels == turbo_decode(jpeg, 1, TJPF_GRAY, flags).pixels) << what;
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 23 * 6 * 2 * 2);
}

// The component planes of a small image are the decoder's own memory: planned by working_bytes(),
// reserved against an attached budget; when the budget cannot hold them the decode takes libjpeg's
// own path instead, with the same pixels.
TEST(JpegDecoderMemory, ComponentPlanesAreReservedAgainstTheAttachedBudget) {
  const Bytes small = encode_jpeg(make_pattern(32, 32, 3, 5), 32, 32, 3);
  const Bytes large = encode_jpeg(make_pattern(200, 150, 3, 5), 200, 150, 3);
  EXPECT_GT(JpegDecoder::working_bytes(32, 32), 3u * 32 * 32);
  EXPECT_EQ(JpegDecoder::working_bytes(200, 150), 0u);  // libjpeg-turbo's own path: nothing of ours

  MemoryBudget budget(1 << 20);
  JpegDecoder decoder(options(Color::kRGB, true));
  decoder.attach(budget, MemoryUse::kDecodeBuffers, {});
  (void)decode(decoder, large);
  EXPECT_EQ(budget.used(), 0u);
  (void)decode(decoder, small);
  EXPECT_GE(budget.used(MemoryUse::kDecodeBuffers), JpegDecoder::working_bytes(32, 32));
  EXPECT_LE(budget.used(), AlignedBuffer::rounded_capacity(JpegDecoder::working_bytes(32, 32)));

  MemoryBudget tiny(1024);
  JpegDecoder starved(options(Color::kRGB, true));
  starved.attach(tiny, MemoryUse::kDecodeBuffers, {});
  EXPECT_TRUE(decode(starved, small).pixels == turbo_decode(small, 1, TJPF_RGB, TJFLAG_FASTDCT).pixels);
  EXPECT_EQ(tiny.used(), 0u);
  EXPECT_TRUE(decode(decoder, small).pixels == turbo_decode(small, 1, TJPF_RGB, TJFLAG_FASTDCT).pixels);
}

// libjpeg's whole-image coefficient buffer of a progressive file (allocated at any DCT scale) is
// counted from the header, held from the share or the free budget while the decode runs, and a
// file that cannot have it fails with kTooLarge naming the bytes, not a deadline.
TEST(JpegDecoderMemory, ProgressiveCoefficientsAreAccountedBeforeLibjpegAllocatesThem) {
  const Bytes progressive =
      encode_jpeg(make_pattern(320, 240, 3, 5), 320, 240, 3, {.subsampling = 2, .progressive = true});
  const Bytes baseline = encode_jpeg(make_pattern(320, 240, 3, 5), 320, 240, 3, {.subsampling = 2});
  JpegDecoder probe({});
  // 4:2:0: luma 40x30 blocks, chroma 20x15 each (rounded to the sampling factors), 128 bytes a block.
  EXPECT_EQ(probe.read_header(progressive).coefficient_bytes, (40u * 30 + 2 * 20 * 15) * 128);
  EXPECT_EQ(probe.read_header(baseline).coefficient_bytes, 0u);
  const Image reference = decode(probe, progressive, {4, {}});

  MemoryBudget budget(300'000);
  JpegDecoder decoder({});
  decoder.attach(budget, MemoryUse::kDecodeBuffers, {.planes = 0, .coefficients = 100'000});
  EXPECT_EQ(budget.used(), 100'000u);
  EXPECT_TRUE(decode(decoder, progressive, {4, {}}).pixels == reference.pixels);
  EXPECT_EQ(budget.used(), 230'400u);  // grown to what the image needed, and kept
  auto rest = budget.try_reserve(budget.available(), MemoryUse::kBatches);
  EXPECT_TRUE(decode(decoder, progressive, {8, {}}).pixels.size() > 0);  // within what it holds

  MemoryBudget small(150'000);
  JpegDecoder starved({});
  starved.attach(small, MemoryUse::kDecodeBuffers, {.planes = 0, .coefficients = 100'000});
  try {
    (void)decode(starved, progressive, {8, {}});
    FAIL() << "decoded without room for the coefficients";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTooLarge);
    EXPECT_NE(e.cause().find("needs 225.00 KiB for libjpeg's coefficients at any scale"), std::string::npos)
        << e.cause();
  }
  EXPECT_EQ(small.used(), 100'000u);
  EXPECT_TRUE(decode(starved, baseline).pixels.size() > 0);  // the decoder is still usable
}

// The coefficient arrays of a file in several scans come from a buffer the decoder keeps between
// images (JpegCoefficientPool), re-zeroed where libjpeg asks: progressive images of other content
// and size, one after another at every scale and in a region, decode as tjDecompress2 does.
TEST(JpegDecoderMemory, ProgressiveCoefficientsComeFromTheBufferKeptBetweenImages) {
  const Bytes a = encode_jpeg(make_pattern(320, 240, 3, 5), 320, 240, 3, {.subsampling = 2, .progressive = true});
  const Bytes b = encode_jpeg(make_pattern(320, 240, 3, 9), 320, 240, 3, {.subsampling = 1, .progressive = true});
  const Bytes c = encode_jpeg(make_pattern(640, 480, 3, 7), 640, 480, 3, {.subsampling = 2, .progressive = true});
  const Bytes baseline = encode_jpeg(make_pattern(320, 240, 3, 5), 320, 240, 3, {.subsampling = 2});
  JpegDecoder decoder(options(Color::kRGB));
  std::uint64_t pooled = 0;
  for (const Bytes* jpeg : {&a, &b, &a, &c, &a, &baseline, &b}) {
    for (const int denom : {1, 2, 4, 8}) {
      const bool several_scans = jpeg != &baseline;
      EXPECT_TRUE(decode(decoder, *jpeg, {denom, {}}).pixels == turbo_decode(*jpeg, denom, TJPF_RGB, 0).pixels)
          << "1/" << denom;
      pooled += several_scans ? 1 : 0;
      EXPECT_EQ(decoder.pooled_coefficient_images(), pooled);
    }
  }
  const Image whole = decode(decoder, c);
  const Image region = decode(decoder, c, {1, {100, 200, 64, 48}});
  const Rect r = decoder.decoded_region(decoder.read_header(c), {1, {100, 200, 64, 48}});
  ASSERT_EQ(r.y, 200);
  for (int y = 0; y < 48; ++y) {  // the request's pixels (the decoded region may be wider)
    ASSERT_EQ(std::memcmp(region.at(100 - r.x, y), whole.at(100, 200 + y), 64 * 3), 0) << "row " << y;
  }
  EXPECT_EQ(decoder.pooled_coefficient_images(), pooled + 2);
}

// decode() with resume points (the crop spliced at one where it can): the decoded region and the
// points recorded.
struct PointsDecode {
  Image region;
  Rect r;
  std::vector<ResumePoint> points;
};
PointsDecode decode_with_points(JpegDecoder& decoder, const Bytes& jpeg, const JpegRequest& request) {
  const JpegHeader header = decoder.read_header(jpeg);
  PointsDecode d;
  d.r = decoder.decoded_region(header, request);
  d.region = Image{d.r.width, d.r.height, 3, std::vector<std::uint8_t>(static_cast<std::size_t>(d.r.width) * d.r.height * 3)};
  decoder.decode(jpeg, header, request, ImageView{d.region.pixels.data(), d.r.width, d.r.height, 3, d.r.width * 3}, d.points);
  return d;
}

// A file spliced at a resume point is copied into a buffer the decoder keeps: its first splice
// takes 2 MiB at once where the budget has it free (one huge page, not a power-of-two growth whose
// every step is faulted in again), and only what the file needs where it has not.
TEST(JpegDecoderMemory, TheSpliceBufferTakes2MiBAtOnceWhereTheBudgetHasIt) {
  const Bytes jpeg = encode_jpeg(make_pattern(640, 480, 3, 7), 640, 480, 3, {.subsampling = 2});
  ASSERT_LT(jpeg.size(), 1'000'000u);
  const JpegRequest request{1, {64, 320, 256, 128}};
  const Image whole = turbo_decode(jpeg, 1, TJPF_RGB, 0);
  for (const std::uint64_t limit : {std::uint64_t{64} << 20, std::uint64_t{1} << 20}) {
    MemoryBudget budget(limit);
    JpegDecoder decoder(options(Color::kRGB));
    decoder.attach(budget, MemoryUse::kDecodeBuffers, {.planes = 0, .coefficients = 0});
    const auto [region, r, points] = decode_with_points(decoder, jpeg, request);
    EXPECT_GT(points.size(), 1u) << "spliced";
    if (limit > (std::uint64_t{2} << 20)) {
      EXPECT_EQ(budget.used(), std::uint64_t{2} << 20);
    } else {
      // The spliced file's size (below the whole file's), rounded to a power of two: the splice ran.
      EXPECT_GT(budget.used(), 0u);
      EXPECT_LT(budget.used(), jpeg.size() * 2);
    }
    for (int y = 0; y < 128; ++y) {
      ASSERT_EQ(std::memcmp(region.at(64 - r.x, 320 - r.y + y), whole.at(64, 320 + y), 256 * 3), 0) << "row " << y;
    }
  }
}

// prefault (in set-up) takes what the first images would: the splice buffer's first 2 MiB where
// the budget has them free, and the coefficient buffer at the share attach() holds, so a crop
// spliced at a resume point and an image in several scans afterwards take no more memory (and
// fault nothing new in), with the same pixels. Without splices, no splice buffer.
TEST(JpegDecoderMemory, PrefaultTakesWhatTheFirstSpliceAndCoefficientsWould) {
  const Bytes jpeg = encode_jpeg(make_pattern(640, 480, 3, 7), 640, 480, 3, {.subsampling = 2});
  const Bytes progressive = encode_jpeg(make_pattern(800, 600, 3, 3), 800, 600, 3, {.subsampling = 2, .progressive = true});
  const JpegRequest request{1, {64, 320, 256, 128}};
  for (const bool splices : {true, false}) {
    MemoryBudget budget(64 << 20);
    JpegDecoder decoder(options(Color::kRGB));
    decoder.attach(budget, MemoryUse::kDecodeBuffers, {.planes = 0, .coefficients = std::uint64_t{2} << 20});
    decoder.prefault(splices, std::uint64_t{4} << 20);
    const std::uint64_t taken = (std::uint64_t{2} << 20) + (splices ? std::uint64_t{2} << 20 : 0);
    EXPECT_EQ(budget.used(), taken);
    if (!splices) continue;
    const auto [region, r, points] = decode_with_points(decoder, jpeg, request);
    EXPECT_GT(points.size(), 1u) << "spliced";
    const Image whole = turbo_decode(jpeg, 1, TJPF_RGB, 0);
    for (int y = 0; y < 128; ++y) {
      ASSERT_EQ(std::memcmp(region.at(64 - r.x, 320 - r.y + y), whole.at(64, 320 + y), 256 * 3), 0) << "row " << y;
    }
    EXPECT_TRUE(decode(decoder, progressive).pixels == turbo_decode(progressive, 1, TJPF_RGB, 0).pixels);
    EXPECT_EQ(decoder.pooled_coefficient_images(), 1u);
    EXPECT_EQ(budget.used(), taken);
  }
}

// The coefficient reservation a decoder keeps grows in whole 2 MiB where the budget has them free
// (the buffer it maps for them is then all huge pages), else by what the image needs; the plan's
// share (kept_coefficient_bytes) is rounded so only from 1 MiB on.
TEST(JpegDecoderMemory, TheKeptCoefficientReservationGrowsInWhole2MiB) {
  const Bytes jpeg = encode_jpeg(make_pattern(800, 600, 3, 3), 800, 600, 3, {.subsampling = 2, .progressive = true});
  const Image want = turbo_decode(jpeg, 1, TJPF_RGB, 0);
  EXPECT_EQ(JpegDecoder::kept_coefficient_bytes(1'000'000), 1'000'000u);
  EXPECT_EQ(JpegDecoder::kept_coefficient_bytes(1'100'000), 2u << 20);
  for (const std::uint64_t limit : {std::uint64_t{64} << 20, std::uint64_t{1'700'000}}) {
    MemoryBudget budget(limit);
    JpegDecoder decoder(options(Color::kRGB));
    decoder.attach(budget, MemoryUse::kDecodeBuffers, {.planes = 0, .coefficients = 0});
    const std::uint64_t needs = decoder.read_header(jpeg).coefficient_bytes;
    ASSERT_GT(needs, 1u << 20);
    ASSERT_LT(needs, 1'700'000u);
    EXPECT_TRUE(decode(decoder, jpeg).pixels == want.pixels);
    EXPECT_EQ(decoder.pooled_coefficient_images(), 1u);
    EXPECT_EQ(budget.used(), limit > (2u << 20) ? std::uint64_t{2} << 20 : needs);
  }
  // Below 1 MiB too: a worker whose share the plan could not size grows it once, not image by
  // image (each larger image a new buffer of 4 KiB pages).
  const Bytes small = encode_jpeg(make_pattern(320, 240, 3, 5), 320, 240, 3, {.subsampling = 2, .progressive = true});
  for (const std::uint64_t limit : {std::uint64_t{64} << 20, std::uint64_t{1'000'000}}) {
    MemoryBudget budget(limit);
    JpegDecoder decoder(options(Color::kRGB));
    decoder.attach(budget, MemoryUse::kDecodeBuffers, {.planes = 0, .coefficients = 0});
    const std::uint64_t needs = decoder.read_header(small).coefficient_bytes;
    ASSERT_GT(needs, 0u);
    ASSERT_LT(needs, 1'000'000u);
    EXPECT_TRUE(decode(decoder, small).pixels == turbo_decode(small, 1, TJPF_RGB, 0).pixels);
    EXPECT_EQ(decoder.pooled_coefficient_images(), 1u);
    EXPECT_EQ(budget.used(), limit > (2u << 20) ? std::uint64_t{2} << 20 : needs);
  }
}

// Attached to a budget, the buffer holds at most the reservation kept for the coefficients: it
// follows that reservation as it grows, and an image that needs a transient reservation beyond it
// takes libjpeg's own allocation, the buffer freed first, with the same pixels.
TEST(JpegDecoderMemory, TheCoefficientBufferStaysWithinTheKeptReservation) {
  const Bytes small = encode_jpeg(make_pattern(320, 240, 3, 5), 320, 240, 3, {.subsampling = 2, .progressive = true});
  const Bytes large = encode_jpeg(make_pattern(640, 480, 3, 7), 640, 480, 3, {.subsampling = 2, .progressive = true});
  MemoryBudget budget(1'000'000);
  JpegDecoder decoder(options(Color::kRGB));
  decoder.attach(budget, MemoryUse::kDecodeBuffers, {.planes = 0, .coefficients = 300'000});
  EXPECT_TRUE(decode(decoder, small).pixels == turbo_decode(small, 1, TJPF_RGB, 0).pixels);
  EXPECT_EQ(decoder.pooled_coefficient_images(), 1u);
  EXPECT_EQ(budget.used(), 300'000u);

  // 921,600 bytes: the kept 300,000 cannot grow while another holds 600,000, so the decode waits
  // for that transient reservation's release and takes a transient one of its own.
  std::optional<Reservation> other = budget.reserve_transient(600'000, MemoryUse::kDecodeBuffers);
  ASSERT_TRUE(other.has_value());
  std::thread release([&other] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    other.reset();
  });
  EXPECT_TRUE(decode(decoder, large).pixels == turbo_decode(large, 1, TJPF_RGB, 0).pixels);
  release.join();
  EXPECT_EQ(decoder.pooled_coefficient_images(), 1u);  // libjpeg's own allocation
  EXPECT_EQ(budget.used(), 300'000u);

  EXPECT_TRUE(decode(decoder, large).pixels == turbo_decode(large, 1, TJPF_RGB, 0).pixels);
  EXPECT_EQ(decoder.pooled_coefficient_images(), 2u);  // the kept reservation grew to it
  EXPECT_EQ(budget.used(), 921'600u);
  EXPECT_TRUE(decode(decoder, small).pixels == turbo_decode(small, 1, TJPF_RGB, 0).pixels);
  EXPECT_EQ(decoder.pooled_coefficient_images(), 3u);
}

TEST(JpegDecoderFull, StridedOutputMatchesPackedOutputAndLeavesPaddingAlone) {
  const Bytes jpeg = encode_jpeg(make_pattern(75, 50, 3, 1), 75, 50, 3);
  JpegDecoder decoder({});
  const JpegHeader h = decoder.read_header(jpeg);
  for (const JpegRequest request : {JpegRequest{1, {}}, JpegRequest{1, {20, 10, 30, 20}}}) {
    const Image packed = decode(decoder, jpeg, request);
    const Rect r = decoder.decoded_region(h, request);
    const std::ptrdiff_t stride = r.width * 3 + 13;
    Bytes buffer(static_cast<std::size_t>(stride) * r.height, 0xA5);
    decoder.decode(jpeg, h, request, ImageView{buffer.data(), r.width, r.height, 3, stride});
    for (int y = 0; y < r.height; ++y) {
      ASSERT_EQ(0, std::memcmp(buffer.data() + y * stride, packed.at(0, y), r.width * 3u));
      for (std::ptrdiff_t i = r.width * 3; i < stride; ++i) ASSERT_EQ(buffer[y * stride + i], 0xA5);
    }
  }
}

TEST(JpegDecoderScaled, HalfQuarterEighthMatchTjDecompress2AndScaledSize) {
  SLUICE_REQUIRE_DATASET(dir, "wallpaper-crops");
  const Sample s = sample_of(dir, 40, 8);
  ASSERT_EQ(s.progressive, 8);
  ASSERT_EQ(s.grey, 8);
  for (const int denom : {2, 4, 8}) expect_full_decodes_match_turbo(s.files, denom);
}

TEST(JpegDecoderScaled, TinyImageDecodesAtExactlyOneOverDenom) {
  // tjDecompress2 would pick 5/8 for a 3x3 image asked to fit 2x2; we must scale by 1/2 as the
  // region path does, so a row of the whole image equals the same row decoded as a region.
  const Bytes jpeg = encode_jpeg(make_pattern(3, 3, 3, 7), 3, 3, 3, {.subsampling = 0});
  JpegDecoder decoder({});
  const Image whole = decode(decoder, jpeg, {2, {}});
  ASSERT_EQ(whole.width, 2);
  const Image row = decode(decoder, jpeg, {2, {0, 0, 2, 1}});
  EXPECT_EQ(0, std::memcmp(row.pixels.data(), whole.pixels.data(), 6));
}

// Region decode against the whole image at the same scale: every requested pixel must be equal.
// Measured on all 1,000 wallpaper-crops x 20 random regions x {1,1/2,1/4,1/8} x {fancy, fast
// upsampling} x {RGB, grey}: exact everywhere inside the request. The extra columns decode() adds
// (decoded_region() minus the request) differ only in their outermost column at an interior edge,
// at full scale with fancy 4:2:0 upsampling, by at most 63.
void expect_region_matches(JpegDecoder& decoder, const Bytes& jpeg, const Image& full, int denom,
                           Rect request, const std::string& what) {
  const JpegHeader h = decoder.read_header(jpeg);
  const Rect r = decoder.decoded_region(h, {denom, request});
  const Image part = decode(decoder, jpeg, {denom, request});
  const int align = h.imcu_width / denom;
  ASSERT_TRUE(r.x == 0 || (align > 0 && r.x % align == 0)) << what;
  ASSERT_LE(r.x, request.x);
  ASSERT_GE(r.x + r.width, std::min(full.width, request.x + request.width));
  ASSERT_EQ(r.y, request.y);
  ASSERT_EQ(r.height, std::min(request.height, full.height - request.y));
  for (int y = 0; y < part.height; ++y) {
    for (int x = 0; x < part.width; ++x) {
      const bool requested = r.x + x >= request.x && r.x + x < request.x + request.width;
      const bool outer = (x == 0 && r.x > 0) || (x == part.width - 1 && r.x + r.width < full.width);
      for (int c = 0; c < part.channels; ++c) {
        const int diff = std::abs(part.at(x, y)[c] - full.at(r.x + x, r.y + y)[c]);
        if (diff > ((requested || !outer) ? 0 : 63)) {
          FAIL() << what << ": " << diff << " off at " << x << "," << y << " of " << r.width << "x"
                 << r.height << "+" << r.x << "+" << r.y << (requested ? " (requested)" : "");
        }
      }
    }
  }
}

TEST(JpegDecoderRegion, RandomRegionsOfWallpaperCropsEqualFullDecodeAtEveryScale) {
  SLUICE_REQUIRE_DATASET(dir, "wallpaper-crops");
  const std::vector<fs::path> files = sample_of(dir, 50, 6).files;
  std::mt19937 rng(42);
  for (const bool fast_upsample : {false, true}) {
    for (const Color color : {Color::kRGB, Color::kGrey}) {
      JpegDecoder decoder(options(color, false, fast_upsample));
      for (const auto& path : files) {
        const Bytes jpeg = read_bytes(path);
        for (const int denom : {1, 2, 4, 8}) {
          const Image full = decode(decoder, jpeg, {denom, {}});
          for (int k = 0; k < 4; ++k) {
            const int w = 1 + static_cast<int>(rng() % full.width);
            const int h = 1 + static_cast<int>(rng() % full.height);
            const Rect request{static_cast<int>(rng() % (full.width - w + 1)),
                               static_cast<int>(rng() % (full.height - h + 1)), w, h};
            expect_region_matches(decoder, jpeg, full, denom, request,
                                  path.filename().string() + " 1/" + std::to_string(denom));
          }
        }
      }
    }
  }
}

TEST(JpegDecoderRegion, EdgesOneByOnePixelsAndEverySubsamplingEqualFullDecode) {
  struct Case { int subsampling; bool progressive; };
  const Case cases[] = {{0, false}, {1, false}, {2, false}, {3, false}, {4, false}, {5, false},
                        {2, true}, {3, true}, {1, true}};
  for (const Case& c : cases) {
    const int channels = c.subsampling == 3 ? 1 : 3;
    const Bytes jpeg = encode_jpeg(make_pattern(97, 61, channels, 3), 97, 61, channels,
                                   {.quality = 85, .subsampling = c.subsampling, .progressive = c.progressive});
    for (const bool fast_upsample : {false, true}) {
      JpegDecoder decoder(options(Color::kRGB, false, fast_upsample));
      for (const int denom : {1, 2, 4, 8}) {
        const Image full = decode(decoder, jpeg, {denom, {}});
        const int w = full.width, h = full.height;
        const std::string what = "subsampling " + std::to_string(c.subsampling) +
                                 (c.progressive ? " progressive" : "") + " 1/" + std::to_string(denom);
        std::vector<Rect> regions = {{0, 0, 1, 1},         {w - 1, 0, 1, 1},     {0, h - 1, 1, 1},
                                     {w - 1, h - 1, 1, 1}, {w / 2, h / 2, 1, 1}, {0, 0, w, 1},
                                     {0, h - 1, w, 1},     {w - 1, 0, 1, h},     {1, 1, w - 2 > 0 ? w - 2 : 1, h - 1},
                                     {w / 3, 0, w - w / 3, h}};
        for (const int x : {7, 8, 9, 15, 16, 17, 31, 32, 33}) {
          if (x < w) regions.push_back({x, std::min(x, h - 1), std::min(5, w - x), 3});
        }
        for (const Rect& r : regions) {
          if (r.x + r.width > w || r.y + r.height > h) continue;
          expect_region_matches(decoder, jpeg, full, denom, r, what);
        }
      }
    }
  }
}

TEST(JpegDecoderRegion, DecodedRegionAlignsLeftEdgeToScaledImcuColumn) {
  JpegDecoder fast(options(Color::kRGB, false, true));
  JpegDecoder fancy({});
  const JpegHeader yuv420 = fast.read_header(encode_jpeg(make_pattern(100, 80, 3, 1), 100, 80, 3));
  const JpegHeader grey = fast.read_header(encode_jpeg(make_pattern(100, 80, 1, 1), 100, 80, 1));
  EXPECT_EQ(yuv420.imcu_width, 16);
  EXPECT_EQ(yuv420.imcu_height, 16);
  EXPECT_EQ(grey.imcu_width, 8);
  EXPECT_EQ(fast.decoded_region(yuv420, {1, {37, 5, 10, 10}}), (Rect{32, 5, 15, 10}));
  EXPECT_EQ(fast.decoded_region(yuv420, {2, {37, 5, 10, 10}}), (Rect{32, 5, 15, 10}));
  EXPECT_EQ(fast.decoded_region(yuv420, {8, {5, 1, 3, 3}}), (Rect{4, 1, 4, 3}));
  EXPECT_EQ(fast.decoded_region(grey, {1, {37, 5, 10, 10}}), (Rect{32, 5, 15, 10}));
  EXPECT_EQ(fast.decoded_region(grey, {4, {5, 5, 10, 10}}), (Rect{4, 5, 11, 10}));
  EXPECT_EQ(fast.decoded_region(yuv420, {1, {0, 3, 100, 2}}), (Rect{0, 3, 100, 2}));  // full width
  EXPECT_EQ(fast.decoded_region(yuv420, {1, {90, 70, 50, 50}}), (Rect{80, 70, 20, 10}));  // clamped
  // Fancy upsampling keeps the edge columns outside the request: one iMCU further left when the
  // request starts on one, two columns further right.
  EXPECT_EQ(fancy.decoded_region(yuv420, {1, {32, 5, 10, 10}}), (Rect{16, 5, 28, 10}));
  EXPECT_EQ(fancy.decoded_region(yuv420, {1, {37, 5, 10, 10}}), (Rect{32, 5, 17, 10}));
}

TEST(JpegDecoderRegion, StopsEarlyAboveTheDamageOfATruncatedFile) {
  const Bytes intact = encode_jpeg(make_pattern(640, 480, 3, 5), 640, 480, 3);
  const Bytes cut(intact.begin(), intact.begin() + static_cast<std::ptrdiff_t>(intact.size() / 2));
  for (const bool strict : {false, true}) {
    DecodeOptions o;
    o.strict = strict;
    JpegDecoder decoder(o);
    const Image full = decode(decoder, intact);
    // The top rows are still in the cut file: decoding stops before libjpeg reaches the cut.
    expect_region_matches(decoder, cut, full, 1, {100, 0, 200, 64}, "top of a file cut in half");
    EXPECT_EQ(decoder.warnings().count, 0);
    for (const JpegRequest below : {JpegRequest{1, {100, 400, 200, 64}}, JpegRequest{1, {}}}) {
      try {
        decode(decoder, cut, below);
        FAIL() << "rows below the cut decoded";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
        EXPECT_EQ(e.cause(), strict ? "truncated JPEG: the file ends before its EOI marker (Premature end of JPEG "
                                      "file); DecodeOptions::strict refuses it even when every row is there"
                                    : "truncated JPEG: the file ends before the last row to decode (Premature end "
                                      "of JPEG file)");
      }
    }
  }
}

TEST(JpegDecoderRegion, MissingEoiIsRecoveredAndStrictFailsOnlyDecodesThatReachTheLastImcuRow) {
  // libjpeg's bit reader reads ahead past the last MCU and warns when the EOI marker is missing.
  // Every row is there: by default the file decodes to the intact file's pixels, with the warning
  // reported. Strict fails any decode that reaches its last iMCU row (rows 48-63, which fancy 4:2:0
  // upsampling also decodes for the context of rows 46-47), and decodes above.
  const Bytes intact = encode_jpeg(make_pattern(64, 64, 3, 5), 64, 64, 3);
  const Bytes no_eoi(intact.begin(), intact.end() - 2);
  JpegDecoder decoder({});
  const Image full = decode(decoder, intact);
  EXPECT_EQ(decoder.warnings().count, 0);
  EXPECT_TRUE(decode(decoder, no_eoi).pixels == full.pixels);
  EXPECT_EQ(decoder.warnings().count, 1);
  EXPECT_EQ(decoder.warnings().first, "Premature end of JPEG file");
  expect_region_matches(decoder, no_eoi, full, 1, {0, 50, 64, 2}, "rows 50-51");

  DecodeOptions o;
  o.strict = true;
  JpegDecoder strict(o);
  expect_region_matches(strict, no_eoi, full, 1, {0, 0, 64, 32}, "rows 0-31");
  expect_region_matches(strict, no_eoi, full, 1, {8, 8, 40, 24}, "rows 8-31");
  expect_region_matches(strict, no_eoi, full, 1, {0, 40, 64, 2}, "rows 40-41");
  EXPECT_THROW(decode(strict, no_eoi, {1, {0, 50, 64, 2}}), Error);
  EXPECT_THROW(decode(strict, no_eoi), Error);
}

TEST(JpegDecoderColor, CmykDecodesToPillowRgbWithinJpegTolerance) {
  const int w = 64, h = 48;
  const Bytes cmyk = make_pattern(w, h, 4, 9);
  for (const int subsampling : {0, 2}) {
    const Bytes jpeg = encode_jpeg(cmyk, w, h, 4, {.quality = 95, .subsampling = subsampling, .cmyk = true});
    JpegDecoder rgb_decoder({});
    JpegDecoder grey_decoder(options(Color::kGrey));
    EXPECT_EQ(rgb_decoder.read_header(jpeg).components, 4);
    const Image rgb = decode(rgb_decoder, jpeg);
    const Image grey = decode(grey_decoder, jpeg);
    // Exact: TurboJPEG's CMYK decode, converted as Pillow converts Adobe CMYK.
    const Image ref = turbo_decode(jpeg, 1, TJPF_CMYK, 0);
    int worst = 0;
    long total = 0;
    for (int i = 0; i < w * h; ++i) {
      const auto mul = [](int a, int b) { const int t = a * b + 128; return (t + (t >> 8)) >> 8; };
      const std::uint8_t* q = &ref.pixels[4 * i];
      const int expect[3] = {mul(q[0], q[3]), mul(q[1], q[3]), mul(q[2], q[3])};
      for (int c = 0; c < 3; ++c) ASSERT_EQ(rgb.pixels[3 * i + c], expect[c]) << "pixel " << i;
      const int luma = (19595 * expect[0] + 38470 * expect[1] + 7471 * expect[2] + 32768) >> 16;
      ASSERT_EQ(grey.pixels[i], luma) << "pixel " << i;
      // Within JPEG tolerance of the source pixels converted the same way.
      const std::uint8_t* s = &cmyk[4 * i];
      for (int c = 0; c < 3; ++c) {
        const int diff = std::abs(rgb.pixels[3 * i + c] - mul(s[c], s[3]));
        worst = std::max(worst, diff);
        total += diff;
      }
    }
    // Measured at quality 95 on this noisy pattern: mean 1.95, worst 15 at 4:4:4; mean 2.80,
    // worst 50 at 4:2:0 (the pattern's per-pixel noise does not survive chroma subsampling).
    EXPECT_LE(total / (3.0 * w * h), subsampling == 0 ? 2.5 : 3.5) << "subsampling " << subsampling;
    EXPECT_LE(worst, subsampling == 0 ? 16 : 56) << "subsampling " << subsampling;
    // Regions and DCT scaling take the same conversion.
    for (const int denom : {1, 2}) {
      const Image full = decode(rgb_decoder, jpeg, {denom, {}});
      expect_region_matches(rgb_decoder, jpeg, full, denom, {9 / denom, 5, 17 / denom, 11 / denom}, "cmyk");
    }
  }
}

TEST(JpegDecoderColor, GreyJpegToRgbReplicatesTheGreyDecode) {
  const Bytes jpeg = encode_jpeg(make_pattern(50, 40, 1, 4), 50, 40, 1);
  JpegDecoder rgb({}), grey(options(Color::kGrey));
  for (const JpegRequest request : {JpegRequest{1, {}}, JpegRequest{1, {10, 3, 20, 30}}, JpegRequest{2, {}}}) {
    const Image c = decode(rgb, jpeg, request), g = decode(grey, jpeg, request);
    ASSERT_EQ(c.width * c.height, g.width * g.height);
    for (int i = 0; i < g.width * g.height; ++i) {
      for (int k = 0; k < 3; ++k) ASSERT_EQ(c.pixels[3 * i + k], g.pixels[i]);
    }
  }
}

TEST(JpegDecoderColor, RgbColourspaceJpegToGreyIsLibjpegLuma) {
  // A JPEG whose components are R, G, B (ids 'R' 'G' 'B', no JFIF marker): libjpeg converts it to
  // grey with its luma weights instead of taking the Y channel.
  Bytes jpeg = encode_jpeg(make_pattern(40, 24, 3, 2), 40, 24, 3, {.subsampling = 0});
  ASSERT_EQ(jpeg[2], 0xFF);
  ASSERT_EQ(jpeg[3], 0xE0);  // drop the JFIF APP0 segment
  jpeg.erase(jpeg.begin() + 2, jpeg.begin() + 4 + (jpeg[4] << 8 | jpeg[5]));
  for (std::size_t i = 2; i + 1 < jpeg.size(); ++i) {
    if (jpeg[i] != 0xFF) continue;
    if (jpeg[i + 1] == 0xC0) { for (int c = 0; c < 3; ++c) jpeg[i + 10 + 3 * c] = "RGB"[c]; }
    if (jpeg[i + 1] == 0xDA) { for (int c = 0; c < 3; ++c) jpeg[i + 5 + 2 * c] = "RGB"[c]; break; }
  }
  JpegDecoder rgb({}), grey(options(Color::kGrey));
  for (const JpegRequest request : {JpegRequest{1, {}}, JpegRequest{1, {9, 2, 20, 10}}}) {
    const Image c = decode(rgb, jpeg, request), g = decode(grey, jpeg, request);
    for (int i = 0; i < g.width * g.height; ++i) {
      const std::uint8_t* p = &c.pixels[3 * i];
      ASSERT_EQ(g.pixels[i], (19595 * p[0] + 38470 * p[1] + 7471 * p[2] + 32768) >> 16) << i;
    }
  }
}

// Row bands (begin_rows / read_rows / end_rows), the decoder's way through an image larger than the
// memory at hand: any band height gives decode()'s pixels, for every subsampling, CMYK, progressive
// files, at every scale, whole and for regions.
Image decode_in_bands(JpegDecoder& decoder, const Bytes& jpeg, JpegRequest request, int band) {
  const JpegHeader h = decoder.read_header(jpeg);
  const Rect r = decoder.begin_rows(jpeg, h, request);
  EXPECT_EQ(r, decoder.decoded_region(h, request));
  Image image{r.width, r.height, decoder.channels(), {}};
  image.pixels.resize(static_cast<std::size_t>(r.width) * r.height * image.channels);
  const std::ptrdiff_t stride = static_cast<std::ptrdiff_t>(r.width) * image.channels;
  for (int y = 0; y < r.height; y += band) {
    const int rows = std::min(band, r.height - y);
    decoder.read_rows(ImageView{image.pixels.data() + y * stride, r.width, rows, image.channels, stride});
  }
  decoder.end_rows();
  return image;
}

TEST(JpegDecoderBands, RowBandsOfAnyHeightEqualTheWholeDecode) {
  struct Case { int subsampling; bool progressive; int channels; };
  const Case cases[] = {{0, false, 3}, {1, false, 3}, {2, false, 3}, {3, false, 1}, {4, false, 3}, {5, false, 3},
                        {2, true, 3}, {0, true, 3}, {2, false, 4}};
  int checked = 0;
  for (const Case& c : cases) {
    const Bytes jpeg = encode_jpeg(make_pattern(157, 93, c.channels, 4), 157, 93, c.channels,
                                   {.quality = 85, .subsampling = c.subsampling, .progressive = c.progressive,
                                    .cmyk = c.channels == 4});
    for (const Color color : {Color::kRGB, Color::kGrey}) {
      JpegDecoder decoder(options(color));
      for (const int denom : {1, 2, 8}) {
        for (const Rect region : {Rect{}, Rect{13, 9, 60, 40}}) {
          const JpegRequest request{denom, denom == 8 && region.width > 0 ? Rect{1, 1, 10, 6} : region};
          const Image whole = decode(decoder, jpeg, request);
          for (const int band : {1, 7, 16, 1000}) {
            ASSERT_TRUE(decode_in_bands(decoder, jpeg, request, band).pixels == whole.pixels)
                << "subsampling " << c.subsampling << (c.progressive ? " progressive" : "") << " channels "
                << c.channels << " 1/" << denom << " band " << band;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 9 * 2 * 3 * 2 * 4);
}

TEST(JpegDecoderBands, AbandonedTruncatedAndWarnedBandDecodesBehaveAsDecodeDoes) {
  const Bytes jpeg = encode_jpeg(make_pattern(320, 240, 3, 2), 320, 240, 3);
  JpegDecoder decoder({});
  const Image whole = decode(decoder, jpeg);
  // Abandoned half-way: the next call starts clean.
  const JpegHeader h = decoder.read_header(jpeg);
  const Rect r = decoder.begin_rows(jpeg, h, {});
  Bytes rows(static_cast<std::size_t>(r.width) * 3 * 50);
  decoder.read_rows(ImageView{rows.data(), r.width, 50, 3, r.width * 3});
  EXPECT_TRUE(decode(decoder, jpeg).pixels == whole.pixels);
  EXPECT_THROW(decoder.read_rows(ImageView{rows.data(), r.width, 1, 3, r.width * 3}), Error);
  EXPECT_THROW(decoder.end_rows(), Error);
  // Truncated: the band that reaches the cut fails as decode() would; the decoder stays usable.
  const Bytes cut(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(jpeg.size() / 2));
  try {
    (void)decode_in_bands(decoder, cut, {}, 16);
    FAIL() << "the cut file decoded";
  } catch (const Error& e) {
    EXPECT_EQ(e.cause(), "truncated JPEG: the file ends before the last row to decode (Premature end of JPEG file)");
  }
  EXPECT_TRUE(decode_in_bands(decoder, jpeg, {}, 16).pixels == whole.pixels);
  // Warned: decoded, and the warning reported.
  const Bytes no_eoi(jpeg.begin(), jpeg.end() - 2);
  EXPECT_TRUE(decode_in_bands(decoder, no_eoi, {}, 5).pixels == whole.pixels);
  EXPECT_EQ(decoder.warnings().first, "Premature end of JPEG file");
  // More rows than are left is a caller's error.
  (void)decoder.begin_rows(jpeg, decoder.read_header(jpeg), {1, {0, 230, 320, 10}});
  Bytes too_many(static_cast<std::size_t>(320) * 3 * 11);
  EXPECT_THROW(decoder.read_rows(ImageView{too_many.data(), 320, 11, 3, 320 * 3}), Error);
}

}  // namespace
}  // namespace sluice::stages
