// JpegDecoder on bad input (the error code and a cause that says what is wrong), its determinism
// across reuse, header hand-over and threads, and no heap allocation per image after warm-up.
#include "stages/decode/jpeg_decoder.hpp"

#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <new>
#include <random>
#include <thread>

#include "sluice/core/error.hpp"
#include "sluice/detail/memory/aligned_buffer.hpp"
#include "test_support.hpp"
#include "counting_new.hpp"
#include "jpeg_decoder_test_util.hpp"

namespace sluice::stages {
namespace {

using namespace jpeg_test;  // NOLINT: the shared helpers of both JpegDecoder test files
using test::encode_jpeg;
using test::make_pattern;
using test::read_bytes;

// Bad input: the code, and a cause that says what is wrong.
Error error_of(const Bytes& jpeg, DecodeOptions o = {}, JpegRequest request = {}) {
  JpegDecoder decoder(o);
  try {
    decode(decoder, jpeg, request);
  } catch (const Error& e) {
    EXPECT_TRUE(e.path().empty()) << "the caller adds the path";
    return e;
  }
  ADD_FAILURE() << "decoded without an error";
  return Error(ErrorCode::kInternal, "no error");
}

TEST(JpegDecoderErrors, EmptyInputIsCorruptData) {
  const Error e = error_of({});
  EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
  EXPECT_EQ(e.cause(), "empty file");
}

TEST(JpegDecoderErrors, OtherFormatsAreUnsupportedAndNamed) {
  const std::pair<std::string, std::string> cases[] = {
      {std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16), "PNG image, not a JPEG"},
      {"GIF89a\x10\0\x10\0", "GIF image, not a JPEG"},
      {"BM6\0\0\0\0\0", "BMP image, not a JPEG"},
      {std::string("RIFF\x24\0\0\0WEBPVP8 ", 16), "WebP image, not a JPEG"}};
  for (const auto& [bytes, cause] : cases) {
    const Error e = error_of(Bytes(bytes.begin(), bytes.end()));
    EXPECT_EQ(e.code(), ErrorCode::kUnsupportedFormat);
    EXPECT_EQ(e.cause(), cause);
  }
}

TEST(JpegDecoderErrors, RandomBytesAreNotAJpegAndRandomBytesAfterSoiAreCorrupt) {
  std::mt19937 rng(3);
  Bytes noise(4096);
  for (auto& b : noise) b = static_cast<std::uint8_t>(rng());
  noise[0] = 0x12;
  Error e = error_of(noise);
  EXPECT_EQ(e.code(), ErrorCode::kUnsupportedFormat);
  EXPECT_NE(e.cause().find("does not start with the SOI marker FF D8"), std::string::npos) << e.cause();
  // The file's bytes are never quoted (a secret named .jpg would reach the skip log).
  EXPECT_EQ(e.cause().find("12"), std::string::npos) << e.cause();
  const std::string secret = "password=hunter2 and more text";
  e = error_of(Bytes(secret.begin(), secret.end()));
  EXPECT_EQ(e.cause().find("pass"), std::string::npos) << e.cause();
  EXPECT_EQ(e.cause().find("70 61"), std::string::npos) << e.cause();
  noise[0] = 0xFF;
  noise[1] = 0xD8;
  e = error_of(noise);
  EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
  EXPECT_NE(e.cause().find("damaged JPEG header"), std::string::npos) << e.cause();
}

TEST(JpegDecoderErrors, DatasetTruncatedJpegIsCorruptData) {
  SLUICE_REQUIRE_DATASET(path, "corrupt/truncated.jpg");
  const Bytes jpeg = read_bytes(path);
  for (const bool strict : {false, true}) {
    DecodeOptions o;
    o.strict = strict;
    // Cut inside its third Huffman table, before any scan: no option can decode it.
    const Error e = error_of(jpeg, o);
    EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
    EXPECT_EQ(e.cause(), strict ? "truncated JPEG: the file ends inside its header (Premature end of JPEG file)"
                                : "truncated JPEG: the file ends inside its header (Premature end of JPEG "
                                  "file, then: Bogus Huffman table definition)");
  }
}

// A file cut anywhere fails, strict or not, with a cause that says where it ends; only a file that
// lacks nothing but its EOI marker decodes (by default), to the intact file's pixels.
TEST(JpegDecoderErrors, TruncationsAtEveryStageAreCorruptData) {
  const Bytes jpeg = encode_jpeg(make_pattern(256, 192, 3, 8), 256, 192, 3);
  std::size_t sos = 0;
  while (!(jpeg[sos] == 0xFF && jpeg[sos + 1] == 0xDA)) ++sos;
  const std::size_t data = sos + 2 + (jpeg[sos + 2] << 8 | jpeg[sos + 3]);
  JpegDecoder reference({});
  const Image intact = decode(reference, jpeg);
  for (const std::size_t cut : {std::size_t{2}, std::size_t{11}, std::size_t{100}, sos - 20,
                                sos + 5, data, data + 40, (data + jpeg.size()) / 2, jpeg.size() - 40,
                                jpeg.size() - 4, jpeg.size() - 2}) {
    for (const bool strict : {false, true}) {
      DecodeOptions o;
      o.strict = strict;
      const Bytes part(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(cut));
      if (!strict && cut == jpeg.size() - 2) {  // only the EOI marker is missing
        JpegDecoder decoder(o);
        EXPECT_TRUE(decode(decoder, part).pixels == intact.pixels);
        EXPECT_EQ(decoder.warnings().first, "Premature end of JPEG file");
        continue;
      }
      const Error e = error_of(part, o);
      EXPECT_EQ(e.code(), ErrorCode::kCorruptData) << "cut at " << cut << ": " << e.cause();
      const char* expected = cut < data ? "truncated JPEG: the file ends inside its header"
                             : strict   ? "truncated JPEG: the file ends before its EOI marker"
                                        : "truncated JPEG: the file ends before the last row";
      EXPECT_EQ(e.cause().rfind(expected, 0), 0u) << "cut at " << cut << ": " << e.cause();
    }
  }
}

TEST(JpegDecoderErrors, TruncatedScanDataIsNeverMadeUp) {
  // libjpeg (and tjDecompress2, which returns -1 with an image) fills the rows past the cut with
  // grey; a training sample of made-up rows is worse than a skipped one, so sluice refuses it.
  const Bytes intact = encode_jpeg(make_pattern(256, 192, 3, 8), 256, 192, 3);
  const Bytes cut(intact.begin(), intact.begin() + static_cast<std::ptrdiff_t>(intact.size() * 3 / 4));
  int rc = 0;
  (void)turbo_decode(cut, 1, TJPF_RGB, 0, &rc);
  EXPECT_EQ(rc, -1);
  for (const bool strict : {false, true}) {
    DecodeOptions o;
    o.strict = strict;
    const Error e = error_of(cut, o);
    EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
    EXPECT_NE(e.cause().find("(Premature end of JPEG file)"), std::string::npos) << e.cause();
  }
}

TEST(JpegDecoderErrors, HeaderClaiming60000x60000IsTooLargeBeforeDecoding) {
  Bytes jpeg = encode_jpeg(make_pattern(16, 16, 3, 1), 16, 16, 3);
  std::size_t sof = 2;
  while (!(jpeg[sof] == 0xFF && jpeg[sof + 1] == 0xC0)) ++sof;
  jpeg[sof + 5] = jpeg[sof + 7] = 60000 >> 8;    // height, width
  jpeg[sof + 6] = jpeg[sof + 8] = 60000 & 0xFF;
  const Error e = error_of(jpeg);
  EXPECT_EQ(e.code(), ErrorCode::kTooLarge);
  EXPECT_EQ(e.cause(), "image is 60000x60000 (3600.0 MP), above max_image_pixels (128.0 MP)");
}

TEST(JpegDecoderErrors, BadRequestsAndOutputsAreInvalidArgument) {
  const Bytes jpeg = encode_jpeg(make_pattern(40, 30, 3, 1), 40, 30, 3);
  const Bytes other = encode_jpeg(make_pattern(30, 40, 3, 1), 30, 40, 3);
  JpegDecoder decoder({});
  const JpegHeader h = decoder.read_header(jpeg);
  Bytes buffer(40 * 30 * 3);
  const auto code_of = [&](const std::function<void()>& f) {
    try { f(); } catch (const Error& e) { return e.code(); }
    return ErrorCode::kInternal;
  };
  EXPECT_EQ(code_of([&] { decoder.decoded_region(h, {3, {}}); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { decoder.decoded_region(h, {1, {50, 0, 5, 5}}); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { decoder.decoded_region(h, {1, {0, 0, 5, 0}}); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { decoder.decode(jpeg, h, {}, ImageView{buffer.data(), 39, 30, 3, 120}); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { decoder.decode(jpeg, h, {}, ImageView{buffer.data(), 40, 30, 3, 119}); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { decoder.decode(jpeg, h, {}, ImageView{buffer.data(), 40, 30, 1, 120}); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { decoder.decode(other, h, {1, {0, 0, 5, 5}}, ImageView{buffer.data(), 5, 5, 3, 15}); }),
            ErrorCode::kInvalidArgument);
}

// libjpeg keeps quantisation and Huffman tables in its permanent pool from one image to the next
// (JPEG allows "abbreviated" files that rely on tables sent before). A worker's decoder sees
// images in an order that depends on thread timing, so a damaged file lacking a table must not
// borrow the previous image's: it decodes (or fails) as on a fresh decoder, as in Pillow, whatever
// came before it.
Bytes without_marker(const Bytes& jpeg, std::uint8_t marker) {
  Bytes out(jpeg.begin(), jpeg.begin() + 2);
  std::size_t i = 2;
  while (i + 3 < jpeg.size() && jpeg[i] == 0xFF && jpeg[i + 1] != 0xDA) {
    const std::size_t length = 2 + (static_cast<std::size_t>(jpeg[i + 2]) << 8 | jpeg[i + 3]);
    if (jpeg[i + 1] != marker) out.insert(out.end(), jpeg.begin() + static_cast<std::ptrdiff_t>(i),
                                          jpeg.begin() + static_cast<std::ptrdiff_t>(i + length));
    i += length;
  }
  out.insert(out.end(), jpeg.begin() + static_cast<std::ptrdiff_t>(i), jpeg.end());
  return out;
}

TEST(JpegDecoderDeterminism, NoTableCarriesOverFromThePreviousImage) {
  const Bytes plain = encode_jpeg(make_pattern(150, 100, 3, 4), 150, 100, 3, {.quality = 90});
  const Bytes coarse = encode_jpeg(make_pattern(150, 100, 3, 5), 150, 100, 3, {.quality = 20});
  const Bytes small = encode_jpeg(make_pattern(40, 30, 3, 6), 40, 30, 3, {.quality = 20});
  // TurboJPEG writes libjpeg's standard Huffman tables; progressive files get optimised ones.
  const Bytes optimised = encode_jpeg(make_pattern(150, 100, 3, 7), 150, 100, 3, {.quality = 50, .progressive = true});
  const Bytes no_dqt = without_marker(plain, 0xDB);
  const Bytes no_dht = without_marker(plain, 0xC4);
  JpegDecoder fresh({});
  const Error missing = error_of(no_dqt);
  EXPECT_EQ(missing.cause(), "corrupt JPEG data: Quantization table 0x00 was not defined");
  const Image no_dht_fresh = decode(fresh, no_dht);  // libjpeg-turbo's standard tables, as in Pillow
  EXPECT_TRUE(no_dht_fresh.pixels == decode(fresh, plain).pixels);
  for (const Bytes* before : {&coarse, &optimised, &small, &plain}) {
    for (const JpegRequest request : {JpegRequest{1, {}}, JpegRequest{2, {10, 10, 40, 30}}}) {
      JpegDecoder reused({});
      (void)decode(reused, *before, {1, {}});
      try {
        (void)decode(reused, no_dqt, request);
        ADD_FAILURE() << "decoded with the previous image's quantisation tables";
      } catch (const Error& e) {
        EXPECT_EQ(e.cause(), "corrupt JPEG data: Quantization table 0x00 was not defined");
      }
      (void)decode(reused, *before, {1, {}});
      JpegDecoder other({});
      EXPECT_TRUE(decode(reused, no_dht, request).pixels == decode(other, no_dht, request).pixels)
          << "decoded with the previous image's Huffman tables";
    }
  }
}

// A mixed workload: whole, scaled and region decodes of greyscale, 4:4:4, 4:2:2, 4:2:0,
// progressive and CMYK inputs. Interleaving greyscale and 4:2:0 region decodes with fast
// upsampling on one decoder is what made libjpeg-turbo 2.1.5 write through a freed pointer.
struct Job {
  Bytes jpeg;
  JpegRequest request;
};
std::vector<Job> mixed_jobs(int count) {
  std::vector<Job> jobs;
  for (int i = 0; i < count; ++i) {
    const int w = 120 + 13 * i, h = 90 + 7 * i;
    const int kind = i % 5;
    const int channels = kind == 1 ? 1 : (kind == 2 ? 4 : 3);
    Job job;
    job.jpeg = encode_jpeg(make_pattern(w, h, channels, static_cast<std::uint32_t>(i)), w, h, channels,
                           {.quality = 80, .subsampling = i % 3, .progressive = kind == 3, .cmyk = kind == 2});
    if (i % 3 != 0) job.request = {1 << (i % 4), {i % 17, 3 + i % 11, 40 + i % 23, 30 + i % 19}};
    jobs.push_back(std::move(job));
  }
  // Small whole images, which go through the component planes: 4:2:0 baseline, 4:4:4 progressive.
  for (const bool progressive : {false, true}) {
    Job job;
    job.jpeg = encode_jpeg(make_pattern(33, 31, 3, 9), 33, 31, 3,
                           {.quality = 85, .subsampling = progressive ? 0 : 2, .progressive = progressive});
    jobs.push_back(std::move(job));
  }
  return jobs;
}

const DecodeOptions kOptionSets[] = {options(Color::kRGB), options(Color::kRGB, false, true),
                                     options(Color::kGrey, true, true), options(Color::kGrey)};

TEST(JpegDecoderDeterminism, OneDecoderReusedAcross50ImagesMatchesFreshDecoders) {
  const std::vector<Job> jobs = mixed_jobs(50);
  for (const DecodeOptions& o : kOptionSets) {
    JpegDecoder reused(o);
    for (int round = 0; round < 2; ++round) {
      for (std::size_t i = 0; i < jobs.size(); ++i) {
        JpegDecoder fresh(o);
        ASSERT_TRUE(decode(reused, jobs[i].jpeg, jobs[i].request).pixels ==
                    decode(fresh, jobs[i].jpeg, jobs[i].request).pixels)
            << "job " << i << " round " << round << " grey " << (o.color == Color::kGrey)
            << " fast_upsample " << o.fast_upsample;
      }
    }
  }
}

// read_header() leaves the parsed header for the decode() of the same bytes; any other order
// (a hand-made header, another header read in between, a second decode with the same header)
// parses again and must give the same pixels.
TEST(JpegDecoderDeterminism, HeaderHandOverAndEveryOtherOrderDecodeTheSame) {
  SLUICE_REQUIRE_DATASET(dir, "cifar10/test");
  const auto files = sample_of(dir, 500).files;
  ASSERT_GE(files.size(), 2u);
  const Bytes a = read_bytes(files[0]);
  const Bytes b = read_bytes(files[1]);
  const Image ref_a = turbo_decode(a, 1, TJPF_RGB, TJFLAG_FASTDCT);
  const Image ref_b = turbo_decode(b, 1, TJPF_RGB, TJFLAG_FASTDCT);
  JpegDecoder decoder(options(Color::kRGB, true));
  const auto into = [&](const Bytes& jpeg, const JpegHeader& h) {
    Image out{h.width, h.height, 3, Bytes(static_cast<std::size_t>(h.width) * h.height * 3)};
    decoder.decode(jpeg, h, {}, ImageView{out.pixels.data(), h.width, h.height, 3, h.width * 3});
    return out.pixels;
  };
  const JpegHeader ha = decoder.read_header(a);
  EXPECT_NE(ha.token, 0u);
  EXPECT_EQ(into(a, ha), ref_a.pixels);  // handed over
  EXPECT_EQ(into(a, ha), ref_a.pixels);  // the same header again: parsed again
  const JpegHeader ha2 = decoder.read_header(a);
  const JpegHeader hb = decoder.read_header(b);
  EXPECT_NE(ha2.token, hb.token);
  EXPECT_EQ(into(a, ha2), ref_a.pixels);  // b's header is the one kept: a is parsed again
  EXPECT_EQ(into(b, hb), ref_b.pixels);
  JpegHeader by_hand = ha;
  by_hand.token = 0;
  (void)decoder.read_header(a);
  EXPECT_EQ(into(a, by_hand), ref_a.pixels);  // token 0 never takes the kept header
  const Bytes copy = a;                       // the same bytes elsewhere: parsed again
  const JpegHeader hc = decoder.read_header(a);
  EXPECT_EQ(into(copy, hc), ref_a.pixels);
  // A header read and never decoded does not disturb the next image, nor a failing one.
  (void)decoder.read_header(a);
  EXPECT_THROW(decoder.read_header(Bytes{0xFF, 0xD8, 0xFF}), Error);
  EXPECT_EQ(into(b, decoder.read_header(b)), ref_b.pixels);
}

TEST(JpegDecoderDeterminism, TwoThreadsAtOnceDecodeIdenticallyToOneThread) {
  const std::vector<Job> jobs = mixed_jobs(30);
  std::vector<Bytes> expected;
  for (const DecodeOptions& o : kOptionSets) {
    JpegDecoder d(o);
    for (const Job& job : jobs) expected.push_back(decode(d, job.jpeg, job.request).pixels);
  }
  std::atomic<int> mismatches{0};
  const auto worker = [&](std::size_t first) {
    for (std::size_t set = 0; set < std::size(kOptionSets); ++set) {
      JpegDecoder decoder(kOptionSets[set]);
      for (int round = 0; round < 2; ++round) {
        for (std::size_t k = 0; k < jobs.size(); ++k) {
          const std::size_t i = (k + first) % jobs.size();
          if (decode(decoder, jobs[i].jpeg, jobs[i].request).pixels != expected[set * jobs.size() + i]) {
            ++mismatches;
          }
        }
      }
    }
  };
  std::thread a(worker, 0), b(worker, 15);
  a.join();
  b.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(JpegDecoderAllocation, NoHeapAllocationPerImageAfterWarmUp) {
  if (!SLUICE_COUNTING_NEW) GTEST_SKIP() << "a sanitizer replaces operator new: nothing to count";
  const std::vector<Job> jobs = mixed_jobs(20);
  for (const DecodeOptions& o : kOptionSets) {
    JpegDecoder decoder(o);
    std::vector<Bytes> outputs;
    for (const Job& job : jobs) {
      const Rect r = decoder.decoded_region(decoder.read_header(job.jpeg), job.request);
      outputs.emplace_back(static_cast<std::size_t>(r.width) * r.height * decoder.channels());
    }
    long warm_up = 0;
    for (int pass = 0; pass < 2; ++pass) {  // pass 0 warms up: the CMYK scratch grows once
      const long before = test::new_calls();
      for (std::size_t i = 0; i < jobs.size(); ++i) {
        const JpegHeader h = decoder.read_header(jobs[i].jpeg);
        const Rect r = decoder.decoded_region(h, jobs[i].request);
        decoder.decode(jobs[i].jpeg, h, jobs[i].request,
                       ImageView{outputs[i].data(), r.width, r.height, decoder.channels(),
                                 static_cast<std::ptrdiff_t>(r.width) * decoder.channels()});
      }
      const long calls = test::new_calls() - before;
      if (pass == 0) warm_up = calls;
      if (pass == 1) {
        EXPECT_EQ(calls, 0) << "grey " << (o.color == Color::kGrey);
      }
    }
    EXPECT_GT(warm_up, 0) << "the counter must see libsluice's own allocations";
  }
}

}  // namespace
}  // namespace sluice::stages
