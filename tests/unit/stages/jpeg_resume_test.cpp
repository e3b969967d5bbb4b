// The resume-point scanner and splicer (stages/decode/jpeg_resume.hpp): a file spliced at an MCU
// row decodes, through JpegDecoder, to exactly the rows today's decode of the whole file gives
// there, on every baseline file of imagenet-photos and on generated files of each subsampling;
// layouts it does not handle are refused; damaged data never crashes it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "stages/decode/jpeg_decoder.hpp"
#include "stages/decode/jpeg_huffman.hpp"
#include "stages/decode/jpeg_resume.hpp"
#include "stages/program/sample_program.hpp"
#include "one_file_table.hpp"
#include "test_support.hpp"

namespace sluice::stages {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

Bytes spliced_file(const Bytes& jpeg, const Splice& s) {
  Bytes out = s.head;
  out.insert(out.end(), jpeg.begin() + s.tail_offset, jpeg.end());
  return out;
}

// Rows [y, y + rows) of the image, full width, as JpegDecoder decodes a region.
Bytes decode_rows(JpegDecoder& decoder, const Bytes& jpeg, int y, int rows) {
  const JpegHeader h = decoder.read_header(jpeg);
  JpegRequest request;
  request.region = {0, y, h.width, std::min(rows, h.height - y)};
  const Rect r = decoder.decoded_region(h, request);
  Bytes out(static_cast<std::size_t>(r.width) * r.height * 3);
  decoder.decode(jpeg, h, request, ImageView{out.data(), r.width, r.height, 3, static_cast<std::ptrdiff_t>(r.width) * 3});
  return out;
}

// The same rows as decode_rows, decoded through resume points as the loader decodes a crop;
// `points` (cleared first) comes back with the points the decode found.
Bytes decode_rows_through_points(JpegDecoder& decoder, const Bytes& jpeg, int y, int rows,
                                 std::vector<ResumePoint>& points) {
  const JpegHeader h = decoder.read_header(jpeg);
  JpegRequest request;
  request.region = {0, y, h.width, std::min(rows, h.height - y)};
  const Rect r = decoder.decoded_region(h, request);
  Bytes out(static_cast<std::size_t>(r.width) * r.height * 3);
  points.clear();
  decoder.decode(jpeg, h, request, ImageView{out.data(), r.width, r.height, 3, static_cast<std::ptrdiff_t>(r.width) * 3},
                 points);
  return out;
}

// Splices `jpeg` at `row` and checks the rows from the splice (from one MCU row further where
// chroma is subsampled vertically and upsampled the fancy way, which reads the chroma row above)
// against the original's. Returns false where splice_at refused the row.
bool check_splice(JpegDecoder& decoder, bool fancy, const Bytes& jpeg, const ScanLayout& layout,
                  const std::vector<ResumePoint>& points, int row, int rows_to_check, const std::string& what) {
  Splice s;
  if (!splice_at(jpeg, layout, row, points[static_cast<std::size_t>(row)], s)) return false;
  const Bytes cut = spliced_file(jpeg, s);
  const int margin = fancy && layout.mcu_height > 8 ? layout.mcu_height : 0;
  const int y = s.first_row + margin;
  if (y >= layout.height) return true;
  const Bytes want = decode_rows(decoder, jpeg, y, rows_to_check);
  const Bytes got = decode_rows(decoder, cut, margin, rows_to_check);
  EXPECT_EQ(want, got) << what << " row " << row;
  return true;
}

TEST(JpegResume, SplicedImagenetPhotosDecodeToTheSameRows) {
  const fs::path dir = fs::path(SLUICE_DATASETS_DIR) / "imagenet-photos";
  if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), 1000u);
  std::mt19937 rng(29);
  int refused_layout = 0, spliced = 0, refused_row = 0;
  DecodeOptions fast;
  fast.fast_upsample = true;
  JpegDecoder fancy_decoder{DecodeOptions{}}, fast_decoder{fast};
  for (std::size_t i = 0; i < files.size(); ++i) {
    // Fancy and merged (fast) upsampling on alternate files.
    const fs::path& path = files[i];
    const bool fancy = i % 2 == 0;
    JpegDecoder& decoder = fancy ? fancy_decoder : fast_decoder;
    {
      const Bytes jpeg = test::read_bytes(path);
      ScanLayout layout;
      if (!parse_scan_layout(jpeg, layout)) {
        ++refused_layout;
        continue;
      }
      std::vector<ResumePoint> points;
      ASSERT_EQ(scan_resume_points(jpeg, layout, layout.mcu_rows - 1, points), layout.mcu_rows) << path;
      // The second row, a random one and the last; a few rows each (the last: to the end).
      const int random_row = 1 + static_cast<int>(rng() % static_cast<unsigned>(layout.mcu_rows - 1));
      for (int row : {1, random_row, layout.mcu_rows - 1}) {
        if (check_splice(decoder, fancy, jpeg, layout, points, row, 3 * layout.mcu_height, path.filename().string())) {
          ++spliced;
        } else {
          ++refused_row;
        }
      }
      if (HasFailure()) return;
    }
  }
  // 22 progressive files and 34 with restart intervals; of the rest's rows, a few lack room for
  // the padding or a code in an optimised table and keep libjpeg's skip.
  std::printf("%d files refused (layout), rows spliced %d, refused %d\n", refused_layout, spliced, refused_row);
  EXPECT_EQ(refused_layout, 56);
  EXPECT_LT(refused_row * 50, spliced) << refused_row << " rows refused, " << spliced << " spliced";
}

// The product path on real photographs: a crop decoded through resume points (splice, sluice's
// entropy decoder on the spliced file, its first block's appended code) equals decode() of the
// crop without points, in pixels and warnings, and sluice's decoder gives up on none of them (a
// give-up would decode the original again: the same pixels at twice the cost).
TEST(JpegResume, CropsOfImagenetPhotosThroughPointsEqualDecodesWithout) {
  const fs::path dir = fs::path(SLUICE_DATASETS_DIR) / "imagenet-photos";
  if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::mt19937 rng(31);
  DecodeOptions fast;
  fast.fast_upsample = true;
  JpegDecoder fancy_decoder{DecodeOptions{}}, fast_decoder{fast};
  const OwnHuffmanCounts before = own_huffman_counts();
  int crops = 0, spliced = 0;
  for (std::size_t i = 0; i < files.size(); ++i) {
    JpegDecoder& decoder = i % 2 == 0 ? fancy_decoder : fast_decoder;
    const Bytes jpeg = test::read_bytes(files[i]);
    const JpegHeader header = decoder.read_header(jpeg);
    // A train-like crop: rows from a random place, a random width from the left.
    JpegRequest request;
    const int y = 1 + static_cast<int>(rng() % static_cast<unsigned>(header.height - 1));
    const int height = 1 + static_cast<int>(rng() % static_cast<unsigned>(header.height - y));
    const int x = static_cast<int>(rng() % static_cast<unsigned>(header.width / 2));
    request.region = {x, y, header.width / 2, height};
    const Rect r = decoder.decoded_region(header, request);
    const auto row_bytes = static_cast<std::ptrdiff_t>(r.width) * 3;
    Bytes want(static_cast<std::size_t>(row_bytes) * r.height), got(want.size());
    decoder.decode(jpeg, header, request, ImageView{want.data(), r.width, r.height, 3, row_bytes});
    const int warnings = decoder.warnings().count;
    std::vector<ResumePoint> points;
    decoder.decode(jpeg, decoder.read_header(jpeg), request, ImageView{got.data(), r.width, r.height, 3, row_bytes},
                   points);
    ASSERT_EQ(want, got) << files[i];
    ASSERT_EQ(decoder.warnings().count, warnings) << files[i];
    ++crops;
    spliced += points.size() > 1 ? 1 : 0;
  }
  const OwnHuffmanCounts after = own_huffman_counts();
  std::printf("%d crops, %d through points\n", crops, spliced);
  EXPECT_GT(spliced * 10, crops * 8) << "most crops start below a file's first MCU row";
  EXPECT_EQ(after.gave_up, before.gave_up) << "sluice's decoder gave up on sound files";
  EXPECT_GT(after.installed, before.installed);
}

TEST(JpegResume, GeneratedFilesOfEachSubsamplingSpliceAtEveryRow) {
  DecodeOptions fast;
  fast.fast_upsample = true;
  JpegDecoder fancy_decoder{DecodeOptions{}}, fast_decoder{fast};
  for (int subsampling : {0, 1, 2, 3}) {
    for (int quality : {40, 95}) {
      const int w = 203, h = 157;  // neither a multiple of the MCU
      const int channels = subsampling == 3 ? 1 : 3;
      const Bytes jpeg = test::encode_jpeg(test::make_pattern(w, h, channels, 7), w, h, channels,
                                           {.quality = quality, .subsampling = subsampling});
      ScanLayout layout;
      ASSERT_TRUE(parse_scan_layout(jpeg, layout)) << subsampling;
      std::vector<ResumePoint> points;
      ASSERT_EQ(scan_resume_points(jpeg, layout, layout.mcu_rows - 1, points), layout.mcu_rows);
      int spliced = 0;
      for (int row = 1; row < layout.mcu_rows; ++row) {
        const std::string what = "subsampling " + std::to_string(subsampling) + " quality " + std::to_string(quality);
        spliced += check_splice(fancy_decoder, true, jpeg, layout, points, row, h, what) ? 1 : 0;
        check_splice(fast_decoder, false, jpeg, layout, points, row, h, what + " fast upsampling");
        if (HasFailure()) return;
      }
      // The standard tables TurboJPEG writes leave one remainder modulo 8 that the first DC code
      // cannot take (see jpeg_resume.hpp): a dense block then leaves a row to the skip.
      EXPECT_GE(spliced + 1, layout.mcu_rows - 1) << "subsampling " << subsampling << " quality " << quality;
    }
  }
}

TEST(JpegResume, PointsFoundInStepsEqualPointsFoundAtOnce) {
  const Bytes jpeg = test::encode_jpeg(test::make_pattern(120, 200, 3, 9), 120, 200, 3, {.quality = 85, .subsampling = 2});
  ScanLayout layout;
  ASSERT_TRUE(parse_scan_layout(jpeg, layout));
  std::vector<ResumePoint> all, steps;
  ASSERT_EQ(scan_resume_points(jpeg, layout, layout.mcu_rows - 1, all), layout.mcu_rows);
  for (int rows : {0, 2, 3, 7, layout.mcu_rows - 1}) ASSERT_EQ(scan_resume_points(jpeg, layout, rows, steps), rows + 1);
  ASSERT_EQ(all.size(), steps.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].byte, steps[i].byte);
    EXPECT_EQ(all[i].bit, steps[i].bit);
    EXPECT_EQ(all[i].dc[0], steps[i].dc[0]);
    EXPECT_EQ(all[i].dc[2], steps[i].dc[2]);
  }
}

// The sample program keeps each file's points from one epoch to the next: its samples, first
// read or spliced at a point, equal those of a program that has never seen the file.
TEST(JpegResume, SampleProgramSplicesInLaterEpochsWithTheSamePixels) {
  test::TempDir dir;
  const auto file = dir.path() / "photo.jpg";
  test::write_bytes(file, test::encode_jpeg(test::make_pattern(375, 500, 3, 4), 375, 500, 3, {.subsampling = 2}));
  for (const bool train : {false, true}) {
    for (const bool fast : {false, true}) {
      SampleProgramConfig config;
      if (train) {
        config.geometry = {{spec::RandomResizedCrop{96, 96, {}}, 1}};
      } else {
        config.geometry = {{spec::ResizeShorter{128, {}}, 1}, {spec::CenterCrop{112, 112}, 2}};
      }
      config.decode.fast_upsample_when_shrunk = fast;
      config.normalize = {.mean = {}, .std = {}, .layout = Layout::kNHWC, .dtype = DType::kU8};
      config.output = train ? Size2{96, 96} : Size2{112, 112};
      const SampleProgram kept(config);
      auto ws = kept.make_workspace();
      const auto items = test::one_file(file.string());
      for (std::int64_t epoch = 0; epoch < 6; ++epoch) {
        const SampleKey key{epoch, 0, 0};
        Bytes with(kept.sample_bytes()), without(kept.sample_bytes());
        kept.run(items, 0, key, *ws, with.data());
        const SampleProgram fresh(config);
        auto fresh_ws = fresh.make_workspace();
        fresh.run(items, 0, key, *fresh_ws, without.data());
        ASSERT_EQ(with, without) << "train " << train << " fast " << fast << " epoch " << epoch;
      }
    }
  }
}

// The memory plan reserves the store's bound only for programs that decode crops of files (the
// one place a region can start below a file's top): a resize alone, or a decoded-image cache
// (whole images decoded for the cache), keeps no points.
TEST(JpegResume, OnlyProgramsThatDecodeCropsKeepPoints) {
  SampleProgramConfig config;
  config.geometry = {{spec::Resize{64, 64, {}}, 1}};
  EXPECT_FALSE(SampleProgram::keeps_resume_points(config));
  config.geometry.push_back({spec::CenterCrop{32, 32}, 2});
  EXPECT_TRUE(SampleProgram::keeps_resume_points(config));
  config.cache_point = CachePoint::kDecoded;
  EXPECT_FALSE(SampleProgram::keeps_resume_points(config));
  config.cache_point = CachePoint::kEncoded;
  for (const GeometryOp& crop : {GeometryOp{spec::RandomResizedCrop{32, 32, {}}}, GeometryOp{spec::RandomCrop{32, 32, {}}}}) {
    config.geometry = {{crop, 1}};
    EXPECT_TRUE(SampleProgram::keeps_resume_points(config));
  }
}

TEST(JpegResume, StoreGivesPointsOnlyForTheBytesTheyWereFoundIn) {
  const Bytes jpeg = test::encode_jpeg(test::make_pattern(64, 160, 3, 2), 64, 160, 3, {.quality = 85, .subsampling = 0});
  ScanLayout layout;
  ASSERT_TRUE(parse_scan_layout(jpeg, layout));
  std::vector<ResumePoint> points, got;
  ASSERT_EQ(scan_resume_points(jpeg, layout, 6, points), 7);
  ResumeStore store;
  store.put(3, jpeg, points);
  store.get(3, jpeg, got);
  EXPECT_EQ(got.size(), 7u);
  store.get(4, jpeg, got);
  EXPECT_TRUE(got.empty());
  Bytes changed = jpeg;
  changed[points[6].byte - 1] ^= 1;  // in the scan above the last point
  store.get(3, changed, got);
  EXPECT_TRUE(got.empty());
  changed = jpeg;
  changed[points[6].byte + 40] ^= 1;  // below it: the points still hold
  store.get(3, changed, got);
  EXPECT_EQ(got.size(), 7u);
  EXPECT_EQ(store.bytes(), ResumeStore::capacity_bytes(1));
}

// `jpeg` with the entropy-coded bits from `at` on replaced by `bits` ('0' and '1'): the scan's
// bytes unstuffed, changed, and stuffed again.
Bytes overwrite_scan_bits(const Bytes& jpeg, const ScanLayout& layout, const ResumePoint& at, const std::string& bits) {
  Bytes data;
  std::size_t first_bit = 0;
  std::size_t i = layout.scan_offset;
  for (; i < jpeg.size() && !(jpeg[i] == 0xFF && i + 1 < jpeg.size() && jpeg[i + 1] != 0x00); ++i) {
    if (i == at.byte) first_bit = data.size() * 8 + at.bit;
    data.push_back(jpeg[i]);
    if (jpeg[i] == 0xFF) ++i;  // the stuffed 0x00
  }
  for (std::size_t k = 0; k < bits.size(); ++k) {
    const std::size_t bit = first_bit + k;
    const auto mask = static_cast<std::uint8_t>(0x80 >> (bit % 8));
    data[bit / 8] = static_cast<std::uint8_t>(bits[k] == '1' ? data[bit / 8] | mask : data[bit / 8] & ~mask);
  }
  Bytes out(jpeg.begin(), jpeg.begin() + layout.scan_offset);
  for (const std::uint8_t byte : data) {
    out.push_back(byte);
    if (byte == 0xFF) out.push_back(0x00);
  }
  out.insert(out.end(), jpeg.begin() + static_cast<std::ptrdiff_t>(i), jpeg.end());
  return out;
}

// Found by jpeg_resume_fuzzer. A splice that appends a DC code gives bits that no code of the
// original file has a meaning: in damaged data below the splice, libjpeg decodes them in the
// original as a difference of 0 (17 bits taken) and in the spliced file as the new code. The
// decode through resume points must still give the original's pixels.
TEST(JpegResume, DamageBelowASpliceWithAnAppendedDcCodeDecodesAsTheOriginal) {
  const int w = 96, h = 120;
  const Bytes good = test::encode_jpeg(test::make_pattern(w, h, 3, 11), w, h, 3, {.quality = 90, .subsampling = 0});
  ScanLayout layout;
  ASSERT_TRUE(parse_scan_layout(good, layout));
  std::vector<ResumePoint> points;
  ASSERT_EQ(scan_resume_points(good, layout, layout.mcu_rows - 1, points), layout.mcu_rows);
  int row = 1;
  Splice splice;
  while (row + 1 < layout.mcu_rows && !(splice_at(good, layout, row, points[static_cast<std::size_t>(row)], splice) &&
                                        splice.appended.any())) {
    ++row;
  }
  ASSERT_LT(row + 1, layout.mcu_rows) << "no splice appended a DC code";
  // Row row + 1 starts with 9 ones, the code TurboJPEG's luminance DC table leaves free, then the
  // zeros that make the appended code: damage libjpeg-turbo's fast path decodes without a warning.
  const Bytes bad = overwrite_scan_bits(good, layout, points[static_cast<std::size_t>(row) + 1], "1111111110000000");
  ScanLayout bad_layout;
  ASSERT_TRUE(parse_scan_layout(bad, bad_layout));
  Splice cut;
  ASSERT_TRUE(splice_at(bad, bad_layout, row, points[static_cast<std::size_t>(row)], cut));
  ASSERT_TRUE(cut.appended.any());
  JpegDecoder decoder{DecodeOptions{}};
  const int y = (row + 1) * layout.mcu_height;
  const Bytes want = decode_rows(decoder, bad, y, h - y);
  const int warnings = decoder.warnings().count;
  // The spliced file alone decodes the damaged row otherwise: what the decoder must not hand out.
  ASSERT_NE(want, decode_rows(decoder, spliced_file(bad, cut), layout.mcu_height, h - y));

  std::vector<ResumePoint> found;
  EXPECT_EQ(want, decode_rows_through_points(decoder, bad, y, h - y, found));
  EXPECT_EQ(decoder.warnings().count, warnings);
  EXPECT_GT(found.size(), static_cast<std::size_t>(row)) << "the decode found the points to splice at";
  // Without sluice's entropy decoder no file is spliced (SplicedScan, jpeg_huffman.hpp).
  set_own_huffman(false);
  const Bytes libjpeg = decode_rows_through_points(decoder, bad, y, h - y, found);
  set_own_huffman(true);
  EXPECT_EQ(want, libjpeg) << "libjpeg's entropy decoder";
  EXPECT_TRUE(found.empty()) << "libjpeg's entropy decoder";
}

// Found by jpeg_resume_fuzzer: bytes between the scan's end and the EOI marker, which a whole
// decode reports and a region decode that starts below the top never reads (it stops after the
// region's last row). The decode through points must not report them either: its spliced file's
// region is whole, from its first row to the bottom.
TEST(JpegResume, GarbageBeforeEoiIsNotReportedByARegionDecodeThroughPoints) {
  const int w = 64, h = 96;
  Bytes jpeg = test::encode_jpeg(test::make_pattern(w, h, 3, 5), w, h, 3, {.quality = 85, .subsampling = 0});
  ASSERT_GE(jpeg.size(), 2u);
  jpeg.insert(jpeg.end() - 2, 24, 0x5A);
  JpegDecoder decoder{DecodeOptions{}};
  const int y = 48;
  const Bytes want = decode_rows(decoder, jpeg, y, h - y);
  ASSERT_EQ(decoder.warnings().count, 0);
  decode_rows(decoder, jpeg, 0, h);
  ASSERT_EQ(decoder.warnings().count, 1) << "a whole decode reports the bytes";

  std::vector<ResumePoint> points;
  EXPECT_EQ(want, decode_rows_through_points(decoder, jpeg, y, h - y, points));
  EXPECT_EQ(decoder.warnings().count, 0) << decoder.warnings().first;
  EXPECT_GE(points.size(), 2u) << "the decode went through points";
}

// Found by jpeg_resume_fuzzer: where the data ends without a marker, libjpeg warns when its
// read-ahead reaches the end, which depends on all the bits before; a spliced file would warn
// where the original does not. Such files decode through points as without (no splice, no scan).
TEST(JpegResume, AFileWithoutEoiIsNotSpliced) {
  const int w = 64, h = 96;
  Bytes jpeg = test::encode_jpeg(test::make_pattern(w, h, 3, 6), w, h, 3, {.quality = 85, .subsampling = 1});
  jpeg.resize(jpeg.size() - 2);  // the EOI marker
  JpegDecoder decoder{DecodeOptions{}};
  const int y = 40;
  const Bytes want = decode_rows(decoder, jpeg, y, h - y);
  const int warnings = decoder.warnings().count;
  std::vector<ResumePoint> points;
  EXPECT_EQ(want, decode_rows_through_points(decoder, jpeg, y, h - y, points));
  EXPECT_EQ(decoder.warnings().count, warnings);
  EXPECT_TRUE(points.empty()) << "no points found for a file that is never spliced";
}

TEST(JpegResume, RefusesProgressiveFiles) {
  const Bytes jpeg = test::encode_jpeg(test::make_pattern(64, 48, 3, 3), 64, 48, 3, {.progressive = true});
  ScanLayout layout;
  EXPECT_FALSE(parse_scan_layout(jpeg, layout));
}

TEST(JpegResume, DamagedDataNeverCrashesAndNeverSplicesPastTheData) {
  const Bytes good = test::encode_jpeg(test::make_pattern(96, 80, 3, 5), 96, 80, 3, {.quality = 80, .subsampling = 2});
  std::mt19937 rng(1);
  for (int round = 0; round < 3000; ++round) {
    Bytes bad = good;
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits; ++e) bad[rng() % bad.size()] = static_cast<std::uint8_t>(rng());
    if (round % 3 == 0) bad.resize(rng() % bad.size());
    ScanLayout layout;
    if (!parse_scan_layout(bad, layout)) continue;
    std::vector<ResumePoint> points;
    const int valid = scan_resume_points(bad, layout, layout.mcu_rows - 1, points);
    ASSERT_LE(valid, layout.mcu_rows);
    for (int row = 1; row < valid; ++row) {
      Splice s;
      if (!splice_at(bad, layout, row, points[static_cast<std::size_t>(row)], s)) continue;
      ASSERT_LE(s.tail_offset, bad.size());
      ASSERT_GE(s.head.size(), layout.scan_offset);
    }
  }
}

}  // namespace
}  // namespace sluice::stages
