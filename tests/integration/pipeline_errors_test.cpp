// Bad input and bad configuration. Each bad file under policy fail raises sluice::Error on the
// consumer's thread naming the path and the cause, and the pipeline shuts down cleanly; under
// policy skip the sample is replaced, batches stay full and the skip is counted with its path.
// Bad configurations fail at build() saying what to change.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pipeline_support.hpp"
#include "sluice/sluice.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

using test::TempDir;

struct BadFile {
  std::string name;
  std::filesystem::path (*make)(const std::filesystem::path&);
  ErrorCode code;
  std::string cause_fragment;
};

std::filesystem::path shared_truncated(const std::filesystem::path&) {
  return test::datasets_dir() / "corrupt/truncated.jpg";
}
std::filesystem::path missing_file(const std::filesystem::path& dir) { return dir / "does-not-exist.jpg"; }

void PrintTo(const BadFile& f, std::ostream* os) { *os << f.name; }

const std::vector<BadFile>& bad_files() {
  static const std::vector<BadFile> files{
      {"SharedTruncated", shared_truncated, ErrorCode::kCorruptData, ""},
      {"OwnTruncated", test::write_truncated_jpeg, ErrorCode::kCorruptData, ""},
      {"Empty", test::write_empty_jpeg, ErrorCode::kCorruptData, "empty"},
      {"CutPngNamedJpg", test::write_png_named_jpg, ErrorCode::kCorruptData, "PNG"},  // decoded by content: a cut PNG
      {"RandomBytes", test::write_random_bytes_jpg, ErrorCode::kUnsupportedFormat, ""},
      {"Missing", missing_file, ErrorCode::kNotFound, "no such file"},
      {"HugeHeader", test::write_huge_header_jpeg, ErrorCode::kTooLarge, "max_image_pixels"},
  };
  return files;
}

class BadInput : public ::testing::TestWithParam<BadFile> {
 protected:
  void SetUp() override {
    if (GetParam().make == shared_truncated && !std::filesystem::exists(shared_truncated({}))) {
      GTEST_SKIP() << "datasets not found";
    }
    items_ = test::make_coded_items(dir_.path(), 40);
    bad_ = GetParam().make(dir_.path());
    items_.insert(items_.begin() + 17, Item{bad_.string(), 17});
  }
  Pipeline pipeline() const { return Pipeline::from_items(items_).read().decode_jpeg().resize(24, 16).batch(8); }

  TempDir dir_;
  std::vector<Item> items_;
  std::filesystem::path bad_;
};

TEST_P(BadInput, FailPolicyThrowsOnTheConsumerNamingPathAndCause) {
  for (int threads : {1, 2}) {
    Loader loader = pipeline().build({.threads = threads, .on_error = OnError::kFail});
    int batches_before_error = 0;
    try {
      for (Batch& b : loader.epoch(0)) {
        (void)b;
        ++batches_before_error;
      }
      FAIL() << "no error for " << GetParam().name;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), GetParam().code) << e.what();
      EXPECT_EQ(e.path(), bad_.string());
      EXPECT_NE(std::string(e.what()).find(bad_.string()), std::string::npos);
      EXPECT_NE(e.cause().find(GetParam().cause_fragment), std::string::npos) << e.cause();
      EXPECT_FALSE(e.cause().empty());
    }
    EXPECT_EQ(batches_before_error, 2);  // the bad file is sample 17, in batch 2
    // The loader is still usable afterwards (and destroys cleanly).
    std::int64_t n = 0;
    try {
      for (Batch& b : loader.epoch(1)) n += b.size();
    } catch (const Error&) {
    }
    EXPECT_GE(n, 16);
  }
}

TEST_P(BadInput, SkipPolicyReplacesTheSampleAndCountsIt) {
  for (int threads : {1, 2}) {
    Loader loader = pipeline().build({.threads = threads, .on_error = OnError::kSkip});
    std::int64_t n = 0;
    std::vector<int> labels;
    for (Batch& b : loader.epoch(0)) {
      EXPECT_TRUE(b.size() == 8 || b.index() == 5);
      n += b.size();
      for (int l : b.labels()) labels.push_back(l);
    }
    EXPECT_EQ(n, 41);
    // The replacement is another sample of the epoch, so its label is a valid one.
    EXPECT_NE(labels[17], 17);
    const Stats s = loader.stats();
    EXPECT_EQ(s.skipped, 1);
    ASSERT_EQ(s.skipped_samples.size(), 1u);
    EXPECT_EQ(s.skipped_samples[0].path, bad_.string());
    EXPECT_FALSE(s.skipped_samples[0].cause.empty());
  }
}

TEST_P(BadInput, SkipPolicyIsDeterministic) {
  std::set<std::uint64_t> sums;
  for (int threads : {1, 2, 4}) {
    Loader loader = pipeline().build({.threads = threads, .on_error = OnError::kSkip, .seed = 3});
    sums.insert(test::epoch_checksum(loader, 0));
  }
  EXPECT_EQ(sums.size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(EachKind, BadInput, ::testing::ValuesIn(bad_files()),
                         [](const auto& info) { return info.param.name; });

// Skip accounting: Stats::skipped counts bad files, skipped_samples lists each once,
// and skip_events counts every replacement: a file bad in two epochs, a file at two positions, a
// replacement that is bad too.
class SkipAccounting : public ::testing::Test {
 protected:
  void SetUp() override { good_ = test::make_coded_items(dir_.path(), 12); }
  static Stats run(const std::vector<Item>& items, int threads, int epochs) {
    Loader loader = Pipeline::from_items(items).read().decode_jpeg().resize(24, 16).batch(4).build(
        {.threads = threads, .on_error = OnError::kSkip, .seed = 9});
    for (int e = 0; e < epochs; ++e) {
      std::int64_t n = 0;
      for (Batch& b : loader.epoch(e)) n += b.size();
      EXPECT_EQ(n, static_cast<std::int64_t>(items.size()));
    }
    return loader.stats();
  }
  std::string missing(int i) const { return (dir_.path() / ("missing-" + std::to_string(i) + ".jpg")).string(); }

  TempDir dir_;
  std::vector<Item> good_;
};

TEST_F(SkipAccounting, AFileBadInTwoEpochsIsOneFileAndTwoEvents) {
  std::vector<Item> items = good_;
  items.insert(items.begin() + 5, Item{missing(0), 5});
  for (int threads : {1, 2}) {
    const Stats s = run(items, threads, 2);
    EXPECT_EQ(s.skipped, 1);
    EXPECT_EQ(s.skip_events, 2);  // every replacement is a good file: one event per epoch
    ASSERT_EQ(s.skipped_samples.size(), 1u);
    EXPECT_EQ(s.skipped_samples[0].path, missing(0));
  }
}

TEST_F(SkipAccounting, AFileAtTwoPositionsIsOneFileAndAtLeastTwoEvents) {
  std::vector<Item> items = good_;
  items.insert(items.begin() + 2, Item{missing(0), 2});
  items.insert(items.begin() + 9, Item{missing(0), 9});
  const Stats s = run(items, 2, 1);
  EXPECT_EQ(s.skipped, 1);
  EXPECT_GE(s.skip_events, 2);
  EXPECT_EQ(s.skipped_samples.size(), 1u);
}

TEST_F(SkipAccounting, ReplacementsThatAreBadTooAreEventsNotFiles) {
  // As many bad files as good ones: about half of the first replacements are bad again (the
  // chance that none of 12 is: (12/23)^12, 4e-4), so the events outnumber the files; the count
  // is the seed's, the same at any thread count.
  std::vector<Item> items;
  for (int i = 0; i < 12; ++i) {
    items.push_back(good_[static_cast<std::size_t>(i)]);
    items.push_back(Item{missing(i), 100 + i});
  }
  const Stats one = run(items, 1, 1);
  const Stats two = run(items, 2, 1);
  EXPECT_EQ(one.skipped, 12);
  EXPECT_EQ(one.skipped_samples.size(), 12u);
  EXPECT_GT(one.skip_events, 12);
  EXPECT_EQ(two.skipped, 12);
  EXPECT_EQ(two.skip_events, one.skip_events);
}

TEST(BadInput, PermissionDeniedIsReportedAsSuch) {
  // Root reads any file, so as root the check runs in a child that gives up its privileges.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  TempDir dir;
  auto items = test::make_coded_items(dir.path(), 4);
  chmod(items[2].path.c_str(), 0);
  chmod(dir.path().c_str(), 0755);
  EXPECT_EXIT(
      {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(3);
        try {
          Loader loader = Pipeline::from_items(items).read().decode_jpeg().batch(2).build({.threads = 2});
          for (Batch& b : loader.epoch(0)) (void)b;
          _exit(4);
        } catch (const Error& e) {
          _exit(e.code() == ErrorCode::kPermissionDenied && e.path() == items[2].path ? 0 : 5);
        }
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(BadInput, AllBadDataSetFailsEvenUnderSkip) {
  TempDir dir;
  std::vector<Item> items;
  for (int i = 0; i < 5; ++i) {
    test::write_bytes(dir / ("bad" + std::to_string(i) + ".jpg"), {1, 2, 3});
    items.push_back(Item{(dir / ("bad" + std::to_string(i) + ".jpg")).string(), 0});
  }
  Loader loader = Pipeline::from_items(items).read().decode_jpeg().resize(8, 8).batch(2).build({.on_error = OnError::kSkip});
  EXPECT_THROW(for (Batch& b : loader.epoch(0)) (void)b, Error);
}

std::string build_error(const Pipeline& p, BuildOptions options = {}) {
  try {
    p.build(options);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "build() accepted a bad pipeline";
  return {};
}

TEST(BadConfiguration, FailsAtBuildSayingWhatToChange) {
  TempDir dir;
  const auto items = test::make_coded_items(dir.path(), 4);
  const auto base = [&] { return Pipeline::from_items(items).read().decode_jpeg(); };
  EXPECT_NE(build_error(base().batch(0)).find("batch size must be at least 1"), std::string::npos);
  EXPECT_NE(build_error(base().resize_shorter(100).center_crop(224).batch(2)).find("center_crop"), std::string::npos);
  EXPECT_NE(build_error(base().resize(32, 32).random_crop(48, {.padding = 4}).batch(2)).find("random_crop"), std::string::npos);
  EXPECT_NE(build_error(Pipeline::from_items(items).read().batch(2)).find("decode()"), std::string::npos);
  EXPECT_NE(build_error(base().resize(8, 8)).find("batch"), std::string::npos);
  EXPECT_NE(build_error(base().normalize({{0.5f}, {0.5f}, Layout::kNCHW, DType::kU8}).batch(2)).find("u8"), std::string::npos);
  EXPECT_NE(build_error(base().resize(8, 8).normalize().resize(4, 4).batch(2)).find("before normalize"), std::string::npos);
  EXPECT_NE(build_error(base().resize(0, 8).batch(2)).find("positive"), std::string::npos);
  EXPECT_NE(build_error(base().random_resized_crop(8, {.scale_min = 0.5, .scale_max = 0.2}).batch(2)).find("scale"), std::string::npos);
  EXPECT_NE(build_error(base().flip_horizontal(1.5).batch(2)).find("probability"), std::string::npos);
  EXPECT_NE(build_error(base().batch(2).prefetch(0)).find("prefetch"), std::string::npos);
  EXPECT_NE(build_error(base().batch(2), {.threads = 0}).find("threads"), std::string::npos);
  EXPECT_NE(build_error(base().batch(8, {.drop_last = true})).find("no batch"), std::string::npos);
  EXPECT_NE(build_error(Pipeline::from_items(items).shard(3, 2).read().decode_jpeg().batch(2)).find("shard"), std::string::npos);

  std::filesystem::create_directories(dir / "empty/class");
  EXPECT_NE(build_error(Pipeline::from_folder((dir / "empty").string()).read().decode_jpeg().batch(2)).find("no image files"),
            std::string::npos);
}

TEST(BadConfiguration, BudgetBelowTheMinimumFailsWithTheNumbers) {
  TempDir dir;
  const auto items = test::make_coded_items(dir.path(), 4);
  try {
    // A 64-sample batch of 64x64x3 bytes is 768 KiB (a ring slot, whole pages); prefetch 1 + 2 slots.
    Pipeline::from_items(items).read().decode_jpeg().resize(64, 64).batch(64).prefetch(1).build(
        {.memory_budget = 1_MiB});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfBudget);
    const std::string what = e.what();
    EXPECT_NE(what.find("ring 3 x 768.25 KiB"), std::string::npos) << what;  // + 256 B of labels
    EXPECT_NE(what.find("raise the budget to"), std::string::npos) << what;
  }
}

TEST(BadConfiguration, UnfixedSampleSizeMismatchIsASampleError) {
  TempDir dir;
  auto items = test::make_coded_items(dir.path(), 4);
  const auto odd = test::encode_jpeg(test::make_pattern(30, 30, 3, 1), 30, 30, 3);
  test::write_bytes(dir / "odd.jpg", odd);
  items.push_back(Item{(dir / "odd.jpg").string(), 9});
  Loader loader = Pipeline::from_items(items).read().decode_jpeg().batch(5).build({.threads = 1});
  try {
    for (Batch& b : loader.epoch(0)) (void)b;
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("resize"), std::string::npos) << e.what();
    EXPECT_EQ(e.path(), (dir / "odd.jpg").string());
  }
}

}  // namespace
}  // namespace sluice
