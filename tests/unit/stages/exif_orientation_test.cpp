// EXIF orientation (DecodeOptions::orientation kExif): the block parser on blocks made by hand and
// cut at every length, the turns' rectangle arithmetic, and whole samples through SampleProgram
// on the corpus of tests/reference/exif_orientation.py (JPEG and WebP with every orientation,
// and lying blocks), each held to Pillow's ImageOps.exif_transpose: the whole image, a region
// decode (a centre crop, equal to the whole-image decode's crop), a DCT-scaled resize (close to
// Pillow's resize of the upright image), and the default still as stored. Through whole
// pipelines: the same batches at 1 and 2 threads, the first image's upright size as the sample
// size, the JSON option.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "one_file_table.hpp"
#include "pipeline_support.hpp"
#include "sluice/pipeline/json_spec.hpp"
#include "sluice/sluice.hpp"
#include "stages/decode/exif.hpp"
#include "stages/image/orient.hpp"
#include "stages/program/sample_program.hpp"
#include "reference_script.hpp"
#include "test_support.hpp"

namespace sluice::stages {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

// ---------------------------------------------------------------- the block parser

// "Exif\0\0", a TIFF header in `order` ("II" or "MM"), one IFD holding `entries` (tag, type,
// count, 4 value bytes as the order writes a SHORT or LONG).
struct Entry {
  std::uint16_t tag, type;
  std::uint32_t count, value;
};
Bytes block(bool little, const std::vector<Entry>& entries) {
  Bytes b{'E', 'x', 'i', 'f', 0, 0};
  const auto put = [&](std::uint32_t v, int n) {
    for (int i = 0; i < n; ++i) b.push_back(static_cast<std::uint8_t>(v >> (8 * (little ? i : n - 1 - i))));
  };
  const std::uint8_t order = little ? 'I' : 'M';
  b.insert(b.end(), {order, order});
  put(42, 2);
  put(8, 4);
  put(static_cast<std::uint32_t>(entries.size()), 2);
  for (const Entry& e : entries) {
    put(e.tag, 2);
    put(e.type, 2);
    put(e.count, 4);
    if (e.type == 3) {
      put(e.value, 2);
      put(0, 2);
    } else {
      put(e.value, 4);
    }
  }
  put(0, 4);
  return b;
}

Bytes jpeg_with(const Bytes& exif) {
  Bytes f{0xFF, 0xD8, 0xFF, 0xE0, 0, 4, 'J', 'F', 0xFF, 0xE1};
  f.push_back(static_cast<std::uint8_t>((exif.size() + 2) >> 8));
  f.push_back(static_cast<std::uint8_t>(exif.size() + 2));
  f.insert(f.end(), exif.begin(), exif.end());
  f.insert(f.end(), {0xFF, 0xDA, 0, 2, 0xFF, 0xD9});
  return f;
}

TEST(ExifOrientation, ReadsTagOfEitherByteOrderAndIntegerType) {
  for (int o = 1; o <= 8; ++o) {
    EXPECT_EQ(exif_block_orientation(block(true, {{0x0112, 3, 1, static_cast<std::uint32_t>(o)}})), o);
    EXPECT_EQ(exif_block_orientation(block(false, {{0x010F, 2, 4, 0}, {0x0112, 3, 1, static_cast<std::uint32_t>(o)}})), o);
    EXPECT_EQ(exif_block_orientation(block(false, {{0x0112, 4, 1, static_cast<std::uint32_t>(o)}})), o);
    EXPECT_EQ(exif_orientation(jpeg_with(block(true, {{0x0112, 3, 1, static_cast<std::uint32_t>(o)}}))), o);
  }
  // No turn: none, 0, 9, text, a BYTE (Pillow 9.4 gives bytes); the last orientation entry counts.
  EXPECT_EQ(exif_block_orientation(block(true, {{0x010F, 2, 4, 0}})), 1);
  EXPECT_EQ(exif_block_orientation(block(true, {{0x0112, 3, 1, 0}})), 1);
  EXPECT_EQ(exif_block_orientation(block(true, {{0x0112, 3, 1, 9}})), 1);
  EXPECT_EQ(exif_block_orientation(block(true, {{0x0112, 2, 1, '6'}})), 1);
  EXPECT_EQ(exif_block_orientation(block(true, {{0x0112, 1, 1, 6}})), 1);
  EXPECT_EQ(exif_block_orientation(block(true, {{0x0112, 3, 1, 6}, {0x0112, 3, 1, 3}})), 3);
  // Not JPEG or WebP, or an APP1 that is not EXIF: as stored.
  EXPECT_EQ(exif_orientation(block(true, {{0x0112, 3, 1, 6}})), 1);
  Bytes xmp = jpeg_with(block(true, {{0x0112, 3, 1, 6}}));
  xmp[12] = 'X';
  EXPECT_EQ(exif_orientation(xmp), 1);
}

TEST(ExifOrientation, ACutFileGivesAnOrientationInRangeAndNeverReadsPastItsEnd) {
  // The orientation entry is whole from some length on; before it, 1. Each cut is a fresh
  // allocation of exactly its size, so AddressSanitizer sees a read past it.
  const Bytes whole = jpeg_with(block(false, {{0x010F, 2, 4, 0}, {0x0112, 3, 1, 6}}));
  int first_six = -1;
  for (std::size_t n = 0; n <= whole.size(); ++n) {
    const Bytes cut(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(n));
    const int o = exif_orientation(cut);
    ASSERT_TRUE(o == 1 || o == 6) << n;
    if (o == 6 && first_six < 0) first_six = static_cast<int>(n);
    if (first_six >= 0) {
      EXPECT_EQ(o, 6) << n;
    }
  }
  EXPECT_GT(first_six, 0);
  EXPECT_EQ(exif_orientation(whole), 6);
}

// ---------------------------------------------------------------- the turns

TEST(ExifTurn, RectanglesMapBothWaysAndARegionTurnsAsTheWholeDoes) {
  // Wider than a transpose tile (32) and odd, so both the word and the byte copies run, at the
  // rows' ends too.
  const Size2 stored{70, 37};
  Bytes image(static_cast<std::size_t>(stored.width) * stored.height * 3);
  for (std::size_t i = 0; i < image.size(); ++i) image[i] = static_cast<std::uint8_t>(i * 13 + 1);
  const ConstImageView whole(image.data(), stored.width, stored.height, 3, stored.width * 3);
  for (int o = 1; o <= 8; ++o) {
    SCOPED_TRACE(o);
    const Size2 up = upright_size(stored, o);
    EXPECT_EQ(up, (o >= 5 ? Size2{37, 70} : stored));
    Bytes turned(image.size());
    orient(whole, o, ImageView{turned.data(), up.width, up.height, 3, up.width * 3});
    // Turned whole, pixel by pixel: no two land on one place.
    std::vector<int> hits(image.size() / 3, 0);
    for (int y = 0; y < up.height; ++y) {
      for (int x = 0; x < up.width; ++x) {
        const Rect s = stored_rect(Rect{x, y, 1, 1}, stored, o);
        ASSERT_TRUE(s.x >= 0 && s.y >= 0 && s.x < stored.width && s.y < stored.height);
        ++hits[static_cast<std::size_t>(s.y * stored.width + s.x)];
        for (int c = 0; c < 3; ++c) {
          ASSERT_EQ(turned[static_cast<std::size_t>((y * up.width + x) * 3 + c)],
                    image[static_cast<std::size_t>((s.y * stored.width + s.x) * 3 + c)]);
        }
      }
    }
    for (const int h : hits) EXPECT_EQ(h, 1);
    // A stored region, turned alone, is the turned whole's region at upright_rect.
    const Rect region{3, 2, 41, 34};
    const Rect at = upright_rect(region, stored, o);
    EXPECT_EQ(stored_rect(at, stored, o), region);
    Bytes part(static_cast<std::size_t>(region.width) * region.height * 3);
    orient(ConstImageView(whole.row(region.y) + region.x * 3, region.width, region.height, 3, whole.stride), o,
           ImageView{part.data(), at.width, at.height, 3, at.width * 3});
    for (int y = 0; y < at.height; ++y) {
      for (int x = 0; x < at.width * 3; ++x) {
        ASSERT_EQ(part[static_cast<std::size_t>(y * at.width * 3 + x)],
                  turned[static_cast<std::size_t>((at.y + y) * up.width * 3 + at.x * 3 + x)]);
      }
    }
  }
}

// ---------------------------------------------------------------- the corpus

struct OrientedFile {
  std::string name;
  int width = 0;  // upright
  int height = 0;
  std::string expect;
};

class OrientationCorpus {
 public:
  static const OrientationCorpus& get() {
    static const OrientationCorpus corpus;
    return corpus;
  }
  const std::string& error() const { return error_; }
  const std::vector<OrientedFile>& files() const { return files_; }
  fs::path path(const std::string& name) const { return dir_.path() / name; }

 private:
  OrientationCorpus() {
    const test::ScriptRun run = test::run_reference_script("exif_orientation.py", {dir_.path().string()}, {"-W", "ignore"});
    if (!run.ok()) {
      error_ = "the orientation corpus script failed (it needs python3-pil and python3-numpy): " + run.output;
      return;
    }
    std::ifstream manifest(dir_.path() / "orientation.txt");
    OrientedFile f;
    while (manifest >> f.name >> f.width >> f.height >> f.expect) files_.push_back(f);
  }
  test::TempDir dir_;
  std::string error_;
  std::vector<OrientedFile> files_;
};

#define REQUIRE_ORIENTATION_CORPUS()                                   \
  const OrientationCorpus& corpus = OrientationCorpus::get();          \
  if (!corpus.error().empty()) GTEST_SKIP() << corpus.error();         \
  ASSERT_EQ(corpus.files().size(), 63u)

Bytes run_sample(const fs::path& file, DecodeOptions decode, std::vector<GeometryStep> geometry, Size2 out) {
  SampleProgramConfig config;
  config.decode = decode;
  config.geometry = std::move(geometry);
  config.normalize = {.mean = {}, .std = {}, .layout = Layout::kNHWC, .dtype = DType::kU8};
  config.output = out;
  const SampleProgram program(config);
  auto ws = program.make_workspace();
  Bytes sample(program.sample_bytes());
  program.run(test::one_file(file.string()), 0, SampleKey{}, *ws, sample.data());
  return sample;
}

struct Difference {
  int worst = 0;
  double mean = 0;
};
Difference compare(const Bytes& got, const Bytes& want) {
  Difference d;
  if (got.size() != want.size()) return {999, 999};
  double sum = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const int diff = std::abs(int{got[i]} - int{want[i]});
    d.worst = std::max(d.worst, diff);
    sum += diff;
  }
  d.mean = got.empty() ? 0 : sum / static_cast<double>(got.size());
  return d;
}

bool is_jpeg(const std::string& name) { return name.ends_with(".jpg"); }

constexpr DecodeOptions kExif{.orientation = Orientation::kExif};

TEST(ExifOrientationCorpus, WholeImageEqualsPillowsExifTransposeAndTheDefaultStaysAsStored) {
  REQUIRE_ORIENTATION_CORPUS();
  int turned = 0;
  for (const OrientedFile& f : corpus.files()) {
    SCOPED_TRACE(f.name);
    const Bytes up = run_sample(corpus.path(f.name), kExif, {}, {f.width, f.height});
    const Difference d = compare(up, test::read_bytes(corpus.path(f.name + ".up")));
    EXPECT_EQ(d.worst, 0) << "mean " << d.mean;
    const bool swapped = f.width == 96;
    const Size2 stored = swapped ? Size2{f.height, f.width} : Size2{f.width, f.height};
    const Bytes as_stored = run_sample(corpus.path(f.name), {}, {}, stored);
    EXPECT_EQ(compare(as_stored, test::read_bytes(corpus.path(f.name + ".stored"))).worst, 0);
    turned += up != as_stored ? 1 : 0;
  }
  EXPECT_GE(turned, 5 * 7 + 9 + 4);  // every orientation but 1 in each format, the blocks and PNGs that turn
}

TEST(ExifOrientationCorpus, ARegionDecodeGivesTheWholeDecodesCrop) {
  REQUIRE_ORIENTATION_CORPUS();
  // A 60x50 centre crop of the upright image: a plain copy, so the decoder decodes only the
  // stored rectangle under it (roi); the same with roi off, and Pillow's crop.
  for (const OrientedFile& f : corpus.files()) {
    SCOPED_TRACE(f.name);
    const std::vector<GeometryStep> crop{{spec::CenterCrop{60, 50}, 1}};
    DecodeOptions whole = kExif;
    whole.roi = false;
    const Bytes region = run_sample(corpus.path(f.name), kExif, crop, {60, 50});
    EXPECT_EQ(region, run_sample(corpus.path(f.name), whole, crop, {60, 50}));
    // torchvision's offsets: round((side - crop) / 2).
    const Bytes up = test::read_bytes(corpus.path(f.name + ".up"));
    const int left = static_cast<int>(std::lround((f.width - 60) / 2.0));
    const int top = static_cast<int>(std::lround((f.height - 50) / 2.0));
    Bytes want;
    for (int y = top; y < top + 50; ++y) {
      const auto row = up.begin() + (static_cast<std::ptrdiff_t>(y) * f.width + left) * 3;
      want.insert(want.end(), row, row + 60 * 3);
    }
    EXPECT_EQ(compare(region, want).worst, 0);
  }
}

// The format of a corpus file name ("o6.jpg" -> "jpg", "o3.lossy.webp" -> "lossy.webp").
std::string format_of(const std::string& name) {
  const std::string rest = name.substr(name.find('.') + 1);
  return rest.find('.') != std::string::npos && !rest.starts_with("lossless") && !rest.starts_with("lossy")
             ? rest.substr(rest.find('.') + 1)
             : rest;
}

TEST(ExifOrientationCorpus, AResizeIsPillowsAtFullScaleAndTheUnturnedFilesTurnedAtDctScale) {
  REQUIRE_ORIENTATION_CORPUS();
  for (const OrientedFile& f : corpus.files()) {
    SCOPED_TRACE(f.name);
    const Size2 small{f.width / 4, f.height / 4};
    const std::vector<GeometryStep> resize{{spec::Resize{small.width, small.height, {}}, 1}};
    // At full scale: Pillow's resize of the upright image, within the resampler's rounding.
    DecodeOptions full = kExif;
    full.dct_scaling = false;
    EXPECT_LE(compare(run_sample(corpus.path(f.name), full, resize, small),
                      test::read_bytes(corpus.path(f.name + ".small"))).worst, 1);
    // At 1/4 (JPEG; the others as above): the DCT-scaled decode differs from Pillow's resize as
    // much as it does for a file without an orientation (sample_dct_scale_test.cpp), so it is held
    // to the sample of the same picture stored upright (o1, encoded alike), turned.
    const int o = exif_orientation(test::read_bytes(corpus.path(f.name)));
    const Size2 stored = upright_size(small, o);
    const std::vector<GeometryStep> resize_stored{{spec::Resize{stored.width, stored.height, {}}, 1}};
    const Bytes upright_one = run_sample(corpus.path("o1." + format_of(f.name)), kExif, resize_stored, stored);
    Bytes want(upright_one.size());
    orient(ConstImageView(upright_one.data(), stored.width, stored.height, 3, stored.width * 3), o,
           ImageView{want.data(), small.width, small.height, 3, small.width * 3});
    const Difference d = compare(run_sample(corpus.path(f.name), kExif, resize, small), want);
    EXPECT_LE(d.worst, is_jpeg(f.name) ? 0 : 1) << "mean " << d.mean;
  }
}

TEST(ExifOrientationCorpus, TheWorkspacePlansTheStoredCopyOnlyWhenOrientationIsApplied) {
  SampleProgramConfig config;
  config.output = {24, 24};
  WorkspaceProbes probes;
  probes.largest_image = 160 * 96 * 3;
  const WorkspaceShare as_stored = SampleProgram::workspace_requirements(config, probes);
  EXPECT_EQ(as_stored.stored, 0u);
  config.decode.orientation = Orientation::kExif;
  const WorkspaceShare exif = SampleProgram::workspace_requirements(config, probes);
  EXPECT_EQ(exif.stored, exif.decoded);
  EXPECT_EQ(exif.total(), as_stored.total() + exif.decoded);
  // A decoded-image cache holds upright images: its entries are not the as-stored ones.
  config.cache_point = CachePoint::kDecoded;
  SampleProgramConfig plain = config;
  plain.decode.orientation = Orientation::kAsStored;
  EXPECT_NE(SampleProgram::cache_fingerprint(config), SampleProgram::cache_fingerprint(plain));
}

TEST(ExifOrientationPipeline, SameBatchesAtOneAndTwoThreadsAndTheFirstImageSizesTheSampleUpright) {
  REQUIRE_ORIENTATION_CORPUS();
  test::TempDir dir;
  int i = 0;
  for (const OrientedFile& f : corpus.files()) {
    const fs::path into = dir.path() / (i++ % 2 == 0 ? "a" : "b");
    fs::create_directories(into);
    fs::copy_file(corpus.path(f.name), into / f.name);
  }
  const auto pipeline = [&] {
    return Pipeline::from_folder(dir.path().string()).shuffle_files(3).read().decode(kExif).random_resized_crop(32)
        .flip_horizontal().batch(7);
  };
  Loader one = pipeline().build({.threads = 1, .on_error = OnError::kFail, .seed = 5});
  Loader two = pipeline().build({.threads = 2, .on_error = OnError::kFail, .seed = 5});
  EXPECT_EQ(test::epoch_checksum(one, 0), test::epoch_checksum(two, 0));
  EXPECT_EQ(test::epoch_checksum(one, 1), test::epoch_checksum(two, 1));
  EXPECT_EQ(one.stats().samples, 2 * static_cast<std::int64_t>(corpus.files().size()));
  // Stats name the stage as JSON does: "decode".
  std::vector<std::string> stages;
  for (const StageStats& s : one.stats().stages) stages.push_back(s.name);
  EXPECT_EQ(stages, (std::vector<std::string>{"read", "decode", "transform", "normalize"}));

  // No op fixes the size: the first image does, upright (96 wide, 160 high), from the JSON spec.
  const std::string file = corpus.path("o6.jpg").string();
  const PipelineDocument doc = parse_pipeline_json(
      R"({"source": {"items": [{"path": ")" + file + R"(", "label": 0}]}, "stages": ["read", )"
      R"({"decode": {"orientation": "exif"}}, {"normalize": {"layout": "nhwc", "dtype": "u8"}}, {"batch": {"size": 1}}]})");
  Loader loader = Pipeline(doc.spec).build({.threads = 1});
  for (Batch& b : loader.epoch(0)) {
    EXPECT_EQ(b.data().shape, (Shape{1, 160, 96, 3}));
    const auto* p = static_cast<const std::uint8_t*>(b.data().data);
    EXPECT_EQ(Bytes(p, p + b.data().bytes()), test::read_bytes(corpus.path("o6.jpg.up")));
  }
}

}  // namespace
}  // namespace sluice::stages
