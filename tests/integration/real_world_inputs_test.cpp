// Whole pipelines on the damaged files users' data sets hold. A file libjpeg warns
// about but decodes every row of is decoded, as Pillow decodes it, and counted once in
// Stats::recovered with its path and the warning; DecodeOptions::strict fails it (kFail) or skips
// it (kSkip). A file whose rows are missing fails or is skipped either way. The sample size never
// depends on the first file: build() probes on past a damaged one under kSkip.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <set>

#include "jpeg_edits.hpp"
#include "pipeline_support.hpp"
#include "sluice/sluice.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

using test::TempDir;

// 40 coded items (24x16, pixels encode the label); items 5, 12, 23 and 31 rewritten with damage
// libjpeg warns about and works around, item 17 optionally cut mid-scan.
struct DamagedSet {
  enum class Truncated : std::uint8_t { kNo, kYes };

  explicit DamagedSet(Truncated truncated) {
    items = test::make_coded_items(dir.path(), 40);
    damage(5, [](const test::Bytes& b) { return test::with_junk_before_marker(b, 0xDB, 5); });
    // Enough junk that libjpeg cannot have read it ahead as scan data.
    damage(12, [](const test::Bytes& b) { return test::with_junk_before_marker(b, 0xD9, 16); });
    damage(23, [](const test::Bytes& b) { return test::without_eoi(b); });
    damage(31, [](const test::Bytes& b) { return test::with_cut_scan(b, 0, 0.5); });
    if (truncated == Truncated::kYes) {
      const auto& path = items[17].path;
      test::write_bytes(path, test::cut_in_scan(test::read_bytes(path), 0, 0.5));
    }
  }
  template <class Edit>
  void damage(int index, Edit edit) {
    const auto& path = items[static_cast<std::size_t>(index)].path;
    test::write_bytes(path, edit(test::read_bytes(path)));
    recovered.insert(path);
  }
  Loader build(int threads, OnError on_error, bool strict = false) const {
    return Pipeline::from_items(items)
        .read()
        .decode_jpeg({.strict = strict})
        .normalize({.mean = {}, .std = {}, .layout = Layout::kNHWC, .dtype = DType::kU8})
        .batch(8)
        .build({.threads = threads, .on_error = on_error});
  }

  TempDir dir;
  std::vector<Item> items;
  std::set<std::string> recovered;  // the paths of the files libjpeg warns about
};

TEST(RealWorldInputs, WarnedFilesDecodeAndAreCountedOnceWithTheirWarningAtOneAndTwoThreads) {
  const DamagedSet set(DamagedSet::Truncated::kNo);
  std::uint64_t checksum[2] = {};
  for (const int threads : {1, 2}) {
    Loader loader = set.build(threads, OnError::kFail);
    for (const std::int64_t epoch : {0, 1}) {
      int samples = 0;
      for (Batch& b : loader.epoch(epoch)) {
        const auto* pixels = static_cast<const std::uint8_t*>(b.data().data);
        for (int i = 0; i < b.size(); ++i) {
          const int label = b.labels()[static_cast<std::size_t>(i)];
          // The cut scan's lower rows are libjpeg's grey, as Pillow's; the others are exact.
          if (label != 31) {
            EXPECT_EQ(test::index_of_colour(pixels + i * 24 * 16 * 3), label);
          }
          ++samples;
        }
      }
      EXPECT_EQ(samples, 40);
    }
    const Stats s = loader.stats();
    EXPECT_EQ(s.recovered, 4) << "each file once, over two epochs";
    ASSERT_EQ(s.recovered_samples.size(), 4u);
    std::set<std::string> paths;
    for (const RecoveredSample& r : s.recovered_samples) {
      paths.insert(r.path);
      EXPECT_FALSE(r.warning.empty());
    }
    EXPECT_EQ(paths, set.recovered);
    const auto warning_of = [&s](const std::string& path) {
      for (const RecoveredSample& r : s.recovered_samples) {
        if (r.path == path) return r.warning;
      }
      return std::string();
    };
    EXPECT_EQ(warning_of(set.items[5].path), "Corrupt JPEG data: 5 extraneous bytes before marker 0xdb");
    EXPECT_EQ(warning_of(set.items[23].path), "Premature end of JPEG file");
    EXPECT_EQ(warning_of(set.items[31].path), "Corrupt JPEG data: premature end of data segment");
    EXPECT_TRUE(s.skipped_samples.empty());
    checksum[threads - 1] = test::epoch_checksum(loader, 2);
  }
  EXPECT_EQ(checksum[0], checksum[1]);
}

TEST(RealWorldInputs, StrictDecodeFailsOrSkipsWarnedFiles) {
  const DamagedSet set(DamagedSet::Truncated::kNo);
  Loader failing = set.build(2, OnError::kFail, /*strict=*/true);
  try {
    for (Batch& b : failing.epoch(0)) (void)b;
    FAIL() << "a strict decode took a file libjpeg warns about";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
    EXPECT_EQ(e.path(), set.items[5].path);  // the first in order
    EXPECT_NE(e.cause().find("DecodeOptions::strict"), std::string::npos) << e.cause();
  }
  for (const int threads : {1, 2}) {
    Loader skipping = set.build(threads, OnError::kSkip, /*strict=*/true);
    int samples = 0;
    for (Batch& b : skipping.epoch(0)) samples += b.size();
    EXPECT_EQ(samples, 40);
    const Stats s = skipping.stats();
    EXPECT_EQ(s.recovered, 0);
    std::set<std::string> skipped;
    for (const SkippedSample& k : s.skipped_samples) skipped.insert(k.path);
    EXPECT_EQ(skipped, set.recovered);
  }
}

TEST(RealWorldInputs, ATruncatedFileFailsOrIsSkippedBesideRecoveredOnes) {
  const DamagedSet set(DamagedSet::Truncated::kYes);
  Loader failing = set.build(2, OnError::kFail);
  try {
    for (Batch& b : failing.epoch(0)) (void)b;
    FAIL() << "the truncated file decoded";
  } catch (const Error& e) {
    EXPECT_EQ(e.path(), set.items[17].path);
    EXPECT_EQ(e.cause(), "truncated JPEG: the file ends before the last row to decode (Premature end of JPEG file)");
  }
  Loader skipping = set.build(2, OnError::kSkip);
  int samples = 0;
  for (Batch& b : skipping.epoch(0)) samples += b.size();
  EXPECT_EQ(samples, 40);
  const Stats s = skipping.stats();
  ASSERT_EQ(s.skipped_samples.size(), 1u);
  EXPECT_EQ(s.skipped_samples[0].path, set.items[17].path);
  // A replacement may draw a warned file twice; it is still one file.
  EXPECT_EQ(s.recovered, 4);
}

// build() fixes the sample size from the first image the pipeline reads that gives a header, when
// no op fixes it; a damaged first file is skipped or fails by the policy, never decides the size.
TEST(RealWorldInputs, ADamagedFirstFileNeverFixesTheSampleSize) {
  TempDir dir;
  std::vector<Item> items = test::make_coded_items(dir.path(), 20);  // all 24x16
  const test::Bytes other = test::encode_jpeg(test::make_pattern(50, 40, 3, 1), 50, 40, 3);
  const auto first = dir / "first.jpg";
  test::write_bytes(first, test::cut_at(other, 100));  // ends inside its header: no size at all
  items.insert(items.begin(), Item{first.string(), 0});
  const auto pipeline = [&items] { return Pipeline::from_items(items).read().decode_jpeg().batch(7); };

  try {
    (void)pipeline().build({.threads = 2, .on_error = OnError::kFail});
    FAIL() << "build() took a first file without a header under kFail";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
    EXPECT_EQ(e.path(), first.string());
    EXPECT_NE(e.cause().find("inside its header"), std::string::npos) << e.cause();
    EXPECT_NE(e.cause().find("OnError::kSkip"), std::string::npos) << e.cause();
  }
  for (const int threads : {1, 2}) {
    Loader loader = pipeline().build({.threads = threads, .on_error = OnError::kSkip});
    EXPECT_EQ(loader.batch_shape(), (Shape{7, 16, 24, 3}));  // from the second file
    int samples = 0;
    for (Batch& b : loader.epoch(0)) samples += b.size();
    EXPECT_EQ(samples, 21);
    ASSERT_EQ(loader.stats().skipped_samples.size(), 1u);
    EXPECT_EQ(loader.stats().skipped_samples[0].path, first.string());
  }

  // A first file with header damage libjpeg works around fixes the size by default; strict treats
  // it as bad input.
  test::write_bytes(first, test::with_junk_before_marker(test::read_bytes(items[1].path), 0xDB, 2));
  EXPECT_EQ(pipeline().build({.threads = 1}).batch_shape(), (Shape{7, 16, 24, 3}));
  const auto strict = [&items] { return Pipeline::from_items(items).read().decode_jpeg({.strict = true}).batch(7); };
  EXPECT_THROW((void)strict().build({.threads = 1, .on_error = OnError::kFail}), Error);
  EXPECT_EQ(strict().build({.threads = 1, .on_error = OnError::kSkip}).batch_shape(), (Shape{7, 16, 24, 3}));

  // Nothing but bad files: build() says so under kSkip too, naming the last one probed.
  std::vector<Item> bad(3, Item{first.string(), 0});
  test::write_bytes(first, test::cut_at(other, 100));
  try {
    (void)Pipeline::from_items(bad).read().decode_jpeg().batch(2).build({.threads = 1, .on_error = OnError::kSkip});
    FAIL() << "build() without a single header";
  } catch (const Error& e) {
    EXPECT_NE(e.cause().find("none of the first 3 images"), std::string::npos) << e.cause();
  }
}

// from_folder: the class list comes from the folders, whatever the first file holds.
TEST(RealWorldInputs, ClassListAndMemoryPlanDoNotDependOnTheFirstFile) {
  TempDir dir;
  for (const char* cls : {"apple", "banana", "cherry"}) {
    std::filesystem::create_directories(dir / cls);
    for (int i = 0; i < 4; ++i) {
      test::write_bytes(dir / cls / ("img" + std::to_string(i) + ".jpg"),
                        test::encode_jpeg(test::make_pattern(32, 24, 3, static_cast<std::uint32_t>(i)), 32, 24, 3));
    }
  }
  const test::Bytes intact = test::read_bytes(dir / "apple" / "img0.jpg");
  test::write_bytes(dir / "apple" / "img0.jpg", test::cut_at(intact, 60));
  // The smallest budget the pipeline accepts, found the way a user would: from the error.
  std::uint64_t minimum = 0;
  try {
    (void)Pipeline::from_folder(dir.path().string()).read().decode_jpeg().batch(4).build(
        {.memory_budget = 1024, .threads = 1, .on_error = OnError::kSkip});
  } catch (const Error& e) {
    ASSERT_EQ(e.code(), ErrorCode::kOutOfBudget) << e.what();
    std::smatch m;
    const std::string what = e.what();
    ASSERT_TRUE(std::regex_search(what, m, std::regex("raise the budget to .* \\(([0-9]+) bytes\\)"))) << what;
    minimum = std::stoull(m[1].str());
  }
  ASSERT_GT(minimum, 0u);
  Loader loader = Pipeline::from_folder(dir.path().string()).read().decode_jpeg().batch(4).build(
      {.memory_budget = minimum, .threads = 1, .on_error = OnError::kSkip});
  std::multiset<int> labels;
  for (Batch& b : loader.epoch(0)) {
    for (const std::int32_t label : b.labels()) labels.insert(label);
  }
  EXPECT_EQ(labels.size(), 12u);
  EXPECT_EQ(labels.count(1), 4u);
  EXPECT_EQ(labels.count(2), 4u);
  EXPECT_EQ(loader.stats().skipped_samples.size(), 1u);
  EXPECT_LE(loader.stats().memory_peak, minimum);
}

}  // namespace
}  // namespace sluice
