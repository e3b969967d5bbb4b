// decode_jpeg on the JPEGs users' data sets hold, each generated here: the encodings
// TurboJPEG does not write (arithmetic coding, restart markers, 4:1:1, 4:4:0 and 4:2:2
// subsampling, progressive; written by Debian's cjpeg and jpegtran), CMYK and YCCK (libjpeg's
// API), and the damage found in the wild (junk between markers, junk after EOI, a cut scan, a
// missing EOI, zeroed scan bytes, a missing DC scan, truncations), made by byte edits. Each file is
// decoded by sluice (default and strict) and by Pillow, the decoder behind torchvision's
// ImageFolder, and held to Pillow's pixels (exact: both run libjpeg-turbo's accurate IDCT) or to
// Pillow's refusal. The one deliberate difference: a Huffman-coded file that lacks only its EOI
// marker, which Pillow refuses, decodes to the intact file's pixels. Each case prints a row of the table in
// docs/reliability.md.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <turbojpeg.h>

#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "jpeg_edits.hpp"
#include "sluice/core/error.hpp"
#include "stages/decode/jpeg_decoder.hpp"
#include "test_support.hpp"

namespace sluice::stages {
namespace {

using test::Bytes;

// What one decoder made of one file.
struct Outcome {
  bool decoded = false;
  int warnings = 0;
  std::string message;  // the first warning, or the error's cause
  int width = 0, height = 0;
  Bytes pixels;         // RGB
};

Outcome sluice_decode(JpegDecoder& decoder, const Bytes& jpeg) {
  Outcome o;
  try {
    const JpegHeader h = decoder.read_header(jpeg);
    const Rect r = decoder.decoded_region(h, {});
    o.pixels.resize(static_cast<std::size_t>(r.width) * r.height * 3);
    decoder.decode(jpeg, h, {}, ImageView{o.pixels.data(), r.width, r.height, 3, static_cast<std::ptrdiff_t>(r.width) * 3});
    o.decoded = true;
    o.width = r.width;
    o.height = r.height;
    o.warnings = decoder.warnings().count;
    o.message = std::string(decoder.warnings().first);
  } catch (const Error& e) {
    o.message = e.cause();
  }
  return o;
}

Outcome sluice_decode(const Bytes& jpeg, bool strict) {
  DecodeOptions options;
  options.strict = strict;
  JpegDecoder decoder(options);
  return sluice_decode(decoder, jpeg);
}

// Pillow's Image.open(f).convert("RGB") on every file, through tests/reference/pillow_decode.py.
// Empty with `error` set when the reference cannot run.
std::vector<Outcome> pillow_decode(const std::vector<Bytes>& files, std::string& error) {
  test::TempDir dir;
  std::string command = std::string("'").append(SLUICE_SYSTEM_PYTHON).append("' '").append(SLUICE_SOURCE_DIR);
  command.append("/tests/reference/pillow_decode.py' '").append(dir.path().string()).append("' RGB");
  for (std::size_t i = 0; i < files.size(); ++i) {
    const auto path = dir / (std::to_string(i) + ".jpg");
    test::write_bytes(path, files[i]);
    command += " '" + path.string() + "'";
  }
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    error = "cannot start " + std::string(SLUICE_SYSTEM_PYTHON);
    return {};
  }
  std::string said;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) said += buf;
  const int status = pclose(pipe);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    error = "Pillow reference failed (install python3-pil for " + std::string(SLUICE_SYSTEM_PYTHON) + "): " + said;
    return {};
  }
  std::vector<Outcome> out(files.size());
  std::istringstream lines(said);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::size_t index = 0;
    std::string verdict;
    words >> index >> verdict;
    if (index >= out.size()) continue;
    Outcome& o = out[index];
    if (verdict == "ok") {
      words >> o.width >> o.height;
      o.decoded = true;
      o.pixels = test::read_bytes(dir / (std::to_string(index) + ".raw"));
    } else {
      std::getline(words, o.message);
      if (!o.message.empty() && o.message[0] == ' ') o.message.erase(0, 1);
    }
  }
  return out;
}

// One file of the corpus and what sluice must make of it by default.
enum class Expect : std::uint8_t {
  kDecoded,    // no warning; strict decodes it too
  kRecovered,  // decoded in spite of warnings (Stats::recovered); strict fails it
  kFailed,     // rows or scans missing: fails strict or not
};

struct Case {
  std::string name;
  Bytes jpeg;
  Expect expect = Expect::kDecoded;
  std::string warning;  // a substring of libjpeg's first warning, for kRecovered and kFailed
  // Set when Pillow refuses the file and sluice decodes it: the intact file, whose pixels sluice's
  // must equal (every row is real).
  Bytes intact;
};

const char* name_of(Expect e) {
  switch (e) {
    case Expect::kDecoded: return "decoded";
    case Expect::kRecovered: return "decoded, counted as recovered";
    case Expect::kFailed: return "error (kCorruptData)";
  }
  return "?";
}

// Decodes every case both ways and with Pillow, checks each against its expectation and Pillow,
// and prints its table row.
void check_corpus(const std::vector<Case>& cases) {
  std::vector<Bytes> files;
  for (const Case& c : cases) files.push_back(c.jpeg);
  std::string error;
  const std::vector<Outcome> pillow = pillow_decode(files, error);
  if (!error.empty()) GTEST_SKIP() << error;
  JpegDecoder reused({});  // one decoder through the whole corpus, as a worker goes through files
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const Outcome ours = sluice_decode(c.jpeg, false);
    const Outcome after_others = sluice_decode(reused, c.jpeg);
    EXPECT_EQ(after_others.decoded, ours.decoded) << c.name << ": " << after_others.message;
    if (ours.decoded) {
      EXPECT_TRUE(after_others.pixels == ours.pixels) << c.name << ": depends on the files decoded before it";
    }
    const Outcome strict = sluice_decode(c.jpeg, true);
    const Outcome& theirs = pillow[i];
    std::string pillow_says = "decodes";
    if (!theirs.decoded) pillow_says = std::string("refuses: ").append(theirs.message);
    std::printf("[ corpus ] %-40s | %-60s | %-30s | strict: %-7s | Pillow: %s\n", c.name.c_str(),
                ours.message.substr(0, 60).c_str(), name_of(c.expect), strict.decoded ? "decoded" : "error",
                pillow_says.c_str());
    SCOPED_TRACE(c.name);
    switch (c.expect) {
      case Expect::kDecoded:
        ASSERT_TRUE(ours.decoded) << ours.message;
        EXPECT_EQ(ours.warnings, 0) << ours.message;
        EXPECT_TRUE(strict.decoded) << strict.message;
        break;
      case Expect::kRecovered:
        ASSERT_TRUE(ours.decoded) << ours.message;
        EXPECT_GT(ours.warnings, 0);
        EXPECT_NE(ours.message.find(c.warning), std::string::npos) << ours.message;
        EXPECT_FALSE(strict.decoded);
        break;
      case Expect::kFailed:
        EXPECT_FALSE(ours.decoded);
        EXPECT_NE(ours.message.find(c.warning), std::string::npos) << ours.message;
        EXPECT_FALSE(strict.decoded);
        break;
    }
    if (ours.decoded && theirs.decoded) {
      ASSERT_EQ(ours.width, theirs.width);
      ASSERT_EQ(ours.height, theirs.height);
      EXPECT_TRUE(ours.pixels == theirs.pixels) << "pixels differ from Pillow's";
    } else if (ours.decoded) {
      ASSERT_FALSE(c.intact.empty()) << "Pillow refuses a file sluice decodes (" << theirs.message << ")";
      const Outcome intact = sluice_decode(c.intact, true);
      EXPECT_TRUE(ours.pixels == intact.pixels) << "not the intact file's pixels";
    } else {
      EXPECT_FALSE(theirs.decoded) << "Pillow decodes a file sluice refuses: " << ours.message;
    }
    if (strict.decoded) {
      EXPECT_TRUE(strict.pixels == ours.pixels);
    }
  }
}

constexpr int kWidth = 203;  // neither side a multiple of an iMCU; above 128x128, so libjpeg's
constexpr int kHeight = 141;  // upsampler runs (the component-plane path has its own cases)

Bytes pattern(int width = kWidth, int height = kHeight, int channels = 3) {
  return test::make_pattern(width, height, channels, 14);
}

// The damage of the wild, on a baseline 4:2:0 file and a progressive one of `width` x `height`.
std::vector<Case> damaged_cases(int width, int height) {
  const std::string size = std::string(" ").append(std::to_string(width)).append("x").append(std::to_string(height));
  const Bytes base = test::encode_jpeg(pattern(width, height), width, height, 3, {.quality = 90});
  const Bytes progressive =
      test::encode_jpeg(pattern(width, height), width, height, 3, {.quality = 90, .progressive = true});
  const auto data_size = [](const Bytes& jpeg) {
    for (const auto& s : test::jpeg_segments(jpeg)) {
      if (s.marker == 0) return s.offset + s.length / 2;
    }
    return jpeg.size() / 2;
  };
  return {
      {"baseline" + size, base, Expect::kDecoded, "", {}},
      {"junk between header markers" + size, test::with_junk_before_marker(base, 0xDB, 5), Expect::kRecovered,
       "5 extraneous bytes before marker 0xdb", {}},
      {"junk before the first scan" + size, test::with_junk_before_marker(base, 0xDA, 3), Expect::kRecovered,
       "3 extraneous bytes before marker 0xda", {}},
      {"junk before EOI" + size, test::with_junk_before_marker(base, 0xD9, 7), Expect::kRecovered,
       "extraneous bytes before marker 0xd9", {}},
      {"junk after EOI" + size, test::with_junk_after_eoi(base), Expect::kDecoded, "", {}},
      // Motion-JPEG frames leave out their Huffman tables: libjpeg-turbo's standard ones stand in.
      {"no Huffman tables (DHT)" + size, test::without_segments(base, 0xC4), Expect::kDecoded, "", {}},
      {"no quantisation tables (DQT)" + size, test::without_segments(base, 0xDB), Expect::kFailed,
       "Quantization table 0x00 was not defined", {}},
      {"missing EOI" + size, test::without_eoi(base), Expect::kRecovered, "Premature end of JPEG file", base},
      {"cut scan, EOI kept" + size, test::with_cut_scan(base, 0, 0.5), Expect::kRecovered,
       "premature end of data segment", {}},
      // Zeros are valid Huffman codes: in the larger file libjpeg decodes them as data and never
      // notices (nor can Pillow: same wrong pixels, no warning); in the smaller one they run past
      // the scan's end and libjpeg warns.
      {"zeroed scan bytes" + size, test::with_zeroed_scan_bytes(base, 0, 0.4, 48),
       width > 128 ? Expect::kDecoded : Expect::kRecovered, "Corrupt JPEG data", {}},
      {"truncated mid-scan" + size, test::cut_at(base, data_size(base)), Expect::kFailed, "Premature end of JPEG file", {}},
      {"truncated 10 bytes before EOI" + size, test::cut_at(base, base.size() - 10), Expect::kFailed,
       "Premature end of JPEG file", {}},
      {"truncated in the header" + size, test::cut_at(base, 100), Expect::kFailed, "inside its header", {}},
      {"progressive" + size, progressive, Expect::kDecoded, "", {}},
      {"progressive, DC scan missing" + size, test::without_scan(progressive, 0), Expect::kRecovered,
       "Inconsistent progression sequence", {}},
      {"progressive, missing EOI" + size, test::without_eoi(progressive), Expect::kRecovered,
       "Premature end of JPEG file", progressive},
      {"progressive, cut between scans" + size, test::cut_before_scan(progressive, 3), Expect::kFailed,
       "before the last scan", {}},
      {"progressive, cut mid-scan" + size, test::with_cut_scan(test::cut_before_scan(progressive, 4), 2, 0.5),
       Expect::kFailed, "Premature end of JPEG file", {}},
  };
}

TEST(JpegCorpus, DamagedFilesDecodeAsPillowDecodesThem) {
  std::vector<Case> cases = damaged_cases(kWidth, kHeight);
  for (Case& c : damaged_cases(61, 45)) cases.push_back(std::move(c));  // the component-plane path
  check_corpus(cases);
}

// Encodings TurboJPEG 2.1 does not write, from Debian's cjpeg and jpegtran (libjpeg-turbo-progs,
// installed by scripts/setup), with damage where the coding changes what damage does.
TEST(JpegCorpus, CjpegAndJpegtranEncodingsEqualPillow) {
  test::TempDir dir;
  const Bytes rgb = pattern();
  const auto cjpeg = [&](const std::string& args) { return test::run_cjpeg(rgb, kWidth, kHeight, args, dir.path()); };
  const std::optional<Bytes> base = cjpeg("-quality 90");
  if (!base) GTEST_SKIP() << "cjpeg not found: install libjpeg-turbo-progs (scripts/setup does)";
  const std::optional<Bytes> arith_progressive = test::run_jpegtran(*base, "-arithmetic -progressive", dir.path());
  if (!arith_progressive) GTEST_SKIP() << "jpegtran not found: install libjpeg-turbo-progs (scripts/setup does)";
  const Bytes arithmetic = *cjpeg("-quality 90 -arithmetic");
  const Bytes restarts = *cjpeg("-quality 90 -restart 1");
  const Bytes restarts_each_mcu = *cjpeg("-quality 90 -restart 1B");
  std::vector<Case> cases = {
      {"cjpeg 4:2:0", *base, Expect::kDecoded, "", {}},
      {"cjpeg 4:4:4", *cjpeg("-quality 90 -sample 1x1"), Expect::kDecoded, "", {}},
      {"cjpeg 4:2:2", *cjpeg("-quality 90 -sample 2x1"), Expect::kDecoded, "", {}},
      {"cjpeg 4:4:0", *cjpeg("-quality 90 -sample 1x2"), Expect::kDecoded, "", {}},
      {"cjpeg 4:1:1", *cjpeg("-quality 90 -sample 4x1"), Expect::kDecoded, "", {}},
      {"cjpeg greyscale", *cjpeg("-quality 90 -grayscale"), Expect::kDecoded, "", {}},
      {"cjpeg progressive", *cjpeg("-quality 90 -progressive"), Expect::kDecoded, "", {}},
      {"cjpeg optimised Huffman tables", *cjpeg("-quality 90 -optimize"), Expect::kDecoded, "", {}},
      {"cjpeg arithmetic", arithmetic, Expect::kDecoded, "", {}},
      {"jpegtran arithmetic progressive", *arith_progressive, Expect::kDecoded, "", {}},
      {"cjpeg restart every MCU row", restarts, Expect::kDecoded, "", {}},
      {"cjpeg restart every MCU", restarts_each_mcu, Expect::kDecoded, "", {}},
      // Its decoder reads zeros past every scan's end, legitimately: a missing EOI cannot be told
      // from a cut in the last row (which changes its pixels), so both fail, as in Pillow.
      {"arithmetic, missing EOI", test::without_eoi(arithmetic), Expect::kFailed, "Premature end of JPEG file", {}},
      {"arithmetic, cut 3 bytes before its end", test::cut_at(arithmetic, arithmetic.size() - 3), Expect::kFailed,
       "Premature end of JPEG file", {}},
      {"arithmetic, truncated mid-scan", test::cut_at(arithmetic, arithmetic.size() / 2), Expect::kFailed,
       "Premature end of JPEG file", {}},
      {"restarts, zeroed scan bytes", test::with_zeroed_scan_bytes(restarts, 0, 0.5, 30), Expect::kRecovered,
       "Corrupt JPEG data", {}},
      {"restarts, cut scan", test::with_cut_scan(restarts, 0, 0.5), Expect::kRecovered, "Corrupt JPEG data", {}},
  };
  check_corpus(cases);
  // Why a cut in an arithmetic file's last row must fail: what libjpeg makes of it (TurboJPEG
  // decodes it with a warning) differs from the intact file, where a missing EOI alone does not.
  const auto libjpeg_pixels = [](const Bytes& jpeg) {
    tjhandle tj = tjInitDecompress();
    Bytes rgb(static_cast<std::size_t>(kWidth) * kHeight * 3);
    (void)tjDecompress2(tj, jpeg.data(), jpeg.size(), rgb.data(), kWidth, 0, kHeight, TJPF_RGB, 0);
    tjDestroy(tj);
    return rgb;
  };
  EXPECT_TRUE(libjpeg_pixels(test::without_eoi(arithmetic)) == libjpeg_pixels(arithmetic));
  EXPECT_FALSE(libjpeg_pixels(test::cut_at(arithmetic, arithmetic.size() - 3)) == libjpeg_pixels(arithmetic));
}

// CMYK and YCCK as Adobe applications write them (inverted, with an Adobe marker), through
// libjpeg's API; Pillow converts them to RGB as R = C * K / 255 on the stored values.
TEST(JpegCorpus, CmykAndYcckFromLibjpegEqualPillow) {
  const Bytes cmyk = pattern(kWidth, kHeight, 4);
  const Bytes plain = test::encode_cmyk_libjpeg(cmyk, kWidth, kHeight, test::InkSpace::kCmyk);
  const Bytes ycck = test::encode_cmyk_libjpeg(cmyk, kWidth, kHeight, test::InkSpace::kYcck);
  check_corpus({
      {"libjpeg CMYK (Adobe)", plain, Expect::kDecoded, "", {}},
      {"libjpeg YCCK (Adobe)", ycck, Expect::kDecoded, "", {}},
      {"YCCK, junk between markers", test::with_junk_before_marker(ycck, 0xDB, 4), Expect::kRecovered,
       "4 extraneous bytes before marker 0xdb", {}},
      {"CMYK, missing EOI", test::without_eoi(plain), Expect::kRecovered, "Premature end of JPEG file", plain},
  });
}

}  // namespace
}  // namespace sluice::stages
