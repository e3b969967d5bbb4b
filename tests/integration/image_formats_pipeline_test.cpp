// The decode stage on every format through whole pipelines, on the corpus of
// tests/reference/image_corpus.py (written once for this binary): a folder mixing every format
// the corpus holds gives the same batches at 1 and 2 threads; a file decodes by its first bytes
// whatever its name (a PNG named .jpg, a JPEG named .png, no extension); each damaged variant is a
// skip under OnError::kSkip and an error naming its path and its format under OnError::kFail;
// JSON's "decode" is decode_jpeg's stage; a folder of PNGs alone builds (its first image fixes the
// sample size); tar members named .png, .webp, .bmp, .gif, .tif(f), .ppm and .pgm are images.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "pipeline_support.hpp"
#include "shard_support.hpp"
#include "sluice/pipeline/json_spec.hpp"
#include "sluice/sluice.hpp"
#include "image_corpus.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

namespace fs = std::filesystem;

using test::ImageCorpus;

// The good variants and two JPEGs, spread over two class folders.
fs::path mixed_folder(const ImageCorpus& corpus, const fs::path& root) {
  int i = 0;
  for (const fs::path& f : corpus.files(true)) {
    const fs::path dir = root / (i++ % 2 == 0 ? "a" : "b");
    fs::create_directories(dir);
    fs::copy_file(f, dir / f.filename());
  }
  const auto pixels = test::make_pattern(40, 30, 3, 7);
  test::write_bytes(root / "a" / "photo.JPG", test::encode_jpeg(pixels, 40, 30, 3));
  test::write_bytes(root / "b" / "photo.jpeg", test::encode_jpeg(pixels, 40, 30, 3, {.quality = 70}));
  return root;
}

TEST(ImageFormatsPipeline, MixedFolderSameChecksumAtOneAndTwoThreads) {
  REQUIRE_CORPUS();
  test::TempDir dir;
  const fs::path root = mixed_folder(corpus, dir.path());
  const auto pipeline = [&] { return Pipeline::from_folder(root.string()).read().decode().resize(24, 16).batch(8); };
  Loader one = pipeline().build({.threads = 1, .on_error = OnError::kFail});
  Loader two = pipeline().build({.threads = 2, .on_error = OnError::kFail});
  const std::uint64_t a = test::epoch_checksum(one, 0);
  EXPECT_EQ(a, test::epoch_checksum(two, 0));
  EXPECT_EQ(one.stats().samples, static_cast<std::int64_t>(corpus.files(true).size() + 2));
  EXPECT_EQ(one.stats().skipped, 0);
  // Grey output too, at 2 threads, twice.
  const auto grey = [&] {
    return Pipeline::from_folder(root.string()).read().decode({.color = Color::kGrey}).resize(24, 16).batch(8);
  };
  Loader g1 = grey().build({.threads = 1});
  Loader g2 = grey().build({.threads = 2});
  EXPECT_EQ(test::epoch_checksum(g1, 0), test::epoch_checksum(g2, 0));
}

TEST(ImageFormatsPipeline, DecodesByContentWhateverTheName) {
  REQUIRE_CORPUS();
  test::TempDir dir;
  const auto good = corpus.files(true);
  const fs::path png = *std::find_if(good.begin(), good.end(), [](const fs::path& p) { return p.filename() == "png_rgb8.png"; });
  const fs::path tif = *std::find_if(good.begin(), good.end(), [](const fs::path& p) { return p.filename() == "tiff_rgb_tiff_lzw.tif"; });
  const auto pixels = test::make_pattern(37, 29, 3, 3);
  const auto jpeg = test::encode_jpeg(pixels, 37, 29, 3);
  test::write_bytes(dir / "jpeg.jpg", jpeg);
  test::write_bytes(dir / "jpeg_named.png", jpeg);
  fs::copy_file(png, dir / "png.png");
  fs::copy_file(png, dir / "png_named.jpg");
  fs::copy_file(png, dir / "png_without_extension");
  fs::copy_file(tif, dir / "tiff_named.bmp");
  fs::copy_file(tif, dir / "tiff.tif");
  const auto batch_of = [&](std::vector<std::string> names) {
    std::vector<Item> items;
    for (const std::string& n : names) items.push_back(Item{(dir / n).string(), 0});
    Loader loader = Pipeline::from_items(items).read().decode().batch(static_cast<int>(items.size())).build({.threads = 1});
    std::vector<std::uint8_t> out;
    for (Batch& b : loader.epoch(0)) {
      const auto* p = static_cast<const std::uint8_t*>(b.data().data);
      out.assign(p, p + b.data().bytes());
    }
    return out;
  };
  EXPECT_EQ(batch_of({"png.png", "png.png"}), batch_of({"png_named.jpg", "png_without_extension"}));
  EXPECT_EQ(batch_of({"jpeg.jpg"}), batch_of({"jpeg_named.png"}));
  EXPECT_EQ(batch_of({"tiff.tif"}), batch_of({"tiff_named.bmp"}));
  EXPECT_NE(batch_of({"png.png"}), batch_of({"jpeg.jpg"}));
}

TEST(ImageFormatsPipeline, DamagedFilesSkipOrFailNamingPathAndFormat) {
  REQUIRE_CORPUS();
  test::TempDir dir;
  const std::vector<Item> good = test::make_coded_items(dir.path(), 6);
  const auto bad = corpus.files(false);
  ASSERT_GT(bad.size(), 15u);
  std::vector<Item> items = good;
  for (const fs::path& f : bad) items.push_back(Item{f.string(), 1});
  // Skip: every damaged file replaced and counted, once each.
  Loader skip = Pipeline::from_items(items).read().decode().resize(24, 16).batch(4).build({.threads = 2, .on_error = OnError::kSkip});
  for (Batch& b : skip.epoch(0)) (void)b;
  const Stats stats = skip.stats();
  EXPECT_EQ(stats.skipped, static_cast<std::int64_t>(bad.size()));
  std::set<std::string> skipped;
  for (const SkippedSample& s : stats.skipped_samples) skipped.insert(s.path);
  for (const fs::path& f : bad) EXPECT_TRUE(skipped.count(f.string())) << f;
  // Fail: each one alone after a good file fails the epoch naming it and its format.
  for (const fs::path& f : bad) {
    SCOPED_TRACE(f.filename().string());
    std::vector<Item> two{good[0], Item{f.string(), 1}};
    Loader fail = Pipeline::from_items(two).read().decode().resize(24, 16).batch(2).build({.threads = 1, .on_error = OnError::kFail});
    try {
      for (Batch& b : fail.epoch(0)) (void)b;
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.path(), f.string());
      EXPECT_TRUE(e.code() == ErrorCode::kCorruptData || e.code() == ErrorCode::kTooLarge ||
                  e.code() == ErrorCode::kUnsupportedFormat)
          << e.what();
      if (f.filename() != "empty.png") {
        const std::string ext = f.extension().string();
        const std::string format = ext == ".png" ? "PNG" : ext == ".webp" ? "WebP" : ext == ".gif" ? "GIF"
                                   : ext == ".bmp" ? "BMP" : ext == ".tif" ? "TIFF" : "PNM";
        EXPECT_NE(e.cause().find(format), std::string::npos) << e.cause();
      }
    }
  }
}

TEST(ImageFormatsPipeline, FolderOfPngsBuildsFromItsFirstImage) {
  REQUIRE_CORPUS();
  test::TempDir dir;
  fs::create_directories(dir / "only");
  const auto good = corpus.files(true);
  int n = 0;
  for (const fs::path& f : good) {
    if (f.extension() == ".png" && n < 4) fs::copy_file(f, dir / "only" / ("x" + std::to_string(n++) + ".PNG"));
  }
  Loader loader = Pipeline::from_folder(dir.path().string()).read().decode().batch(2).build({.threads = 1});
  EXPECT_EQ(loader.batch_shape(), (Shape{2, 29, 37, 3}));
  for (Batch& b : loader.epoch(0)) (void)b;
  EXPECT_EQ(loader.stats().samples, 4);
}

TEST(ImageFormatsPipeline, TarMembersOfEveryFormatAreImages) {
  REQUIRE_CORPUS();
  const auto good = corpus.files(true);
  const auto file = [&](const char* name) {
    return test::read_bytes(*std::find_if(good.begin(), good.end(), [&](const fs::path& p) { return p.filename() == name; }));
  };
  const std::vector<std::pair<std::string, std::string>> members{
      {"a.png", "png_rgb8.png"}, {"b.webp", "webp_lossy.webp"}, {"c.bmp", "bmp_24.bmp"}, {"d.gif", "gif_global.gif"},
      {"e.tif", "tiff_rgb_tiff_lzw.tif"}, {"f.tiff", "tiff_palette.tif"}, {"g.ppm", "pnm_p6.ppm"},
      {"h.pgm", "pnm_p5.pgm"}, {"i.PNG", "png_grey8.png"}};
  std::vector<test::TarMember> tar;
  for (std::size_t i = 0; i < members.size(); ++i) {
    tar.push_back({members[i].first, file(members[i].second.c_str())});
    const std::string key = members[i].first.substr(0, members[i].first.find('.'));
    tar.push_back({key + ".cls", test::text_bytes(std::to_string(i))});
  }
  test::TempDir dir;
  test::write_bytes(dir / "formats-000000.tar", test::make_tar(tar).bytes);
  Loader loader = Pipeline::from_shards((dir / "formats-000000.tar").string(), {.index = ShardIndex::kMemoryOnly})
                      .read().decode().resize(24, 16).batch(3)
                      .build({.threads = 2, .on_error = OnError::kFail});
  std::set<std::int32_t> labels;
  for (Batch& b : loader.epoch(0)) {
    for (const std::int32_t l : b.labels()) labels.insert(l);
  }
  EXPECT_EQ(labels.size(), members.size());
  EXPECT_EQ(loader.stats().skipped, 0);
}

TEST(ImageFormatsPipeline, JsonDecodeIsDecodeJpegsStage) {
  REQUIRE_CORPUS();
  test::TempDir dir;
  mixed_folder(corpus, dir.path());
  const std::string spec = R"({"source": {"folder": ")" + dir.path().string() +
                           R"("}, "stages": ["read", {"decode": {"color": "grey"}}, {"resize": {"width": 24, "height": 16}}, {"batch": {"size": 8}}]})";
  const PipelineDocument doc = parse_pipeline_json(spec);
  Loader a = Pipeline(doc.spec).build({.threads = 2});
  Loader b = Pipeline::from_folder(dir.path().string()).read().decode_jpeg({.color = Color::kGrey}).resize(24, 16).batch(8).build({.threads = 2});
  EXPECT_EQ(test::epoch_checksum(a, 0), test::epoch_checksum(b, 0));
}

}  // namespace
}  // namespace sluice
