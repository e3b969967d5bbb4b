// Images larger than the memory plan: a folder of 500x375 photos with two 8000x6000
// ones the plan's header probes never see, run at the pipeline's own minimum budget. Before, a
// worker waited 2 s for room and failed the epoch with kOutOfBudget even under kSkip. Now the
// huge baseline files decode in row bands inside the worker's share, with the very bytes of an
// unlimited run, under both policies; a huge progressive file, whose libjpeg coefficients (144 MB
// at any scale) cannot fit the budget at all, fails with kTooLarge naming it and the bytes under
// kFail and is skipped under kSkip.
#include <gtest/gtest.h>

#include <regex>

#include "pipeline_support.hpp"
#include "sluice/sluice.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

namespace fs = std::filesystem;

class LargeImages : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    fs::create_directories(dir_->path() / "set");
    // 100 small files and two huge ones that sort to places 11 and 52 of 102: the plan's 32
    // header probes, every third file, never read them (its size probes see every file).
    for (int i = 0; i < 100; ++i) {
      const auto rgb = test::make_pattern(500, 375, 3, static_cast<std::uint32_t>(i));
      test::write_bytes(path("s_%03d.jpg", i), test::encode_jpeg(rgb, 500, 375, 3, {.quality = 85}));
    }
    const auto big = test::make_pattern(8000, 6000, 3, 77);
    test::write_bytes(path("s_%03db.jpg", 10), test::encode_jpeg(big, 8000, 6000, 3, {.quality = 80}));
    test::write_bytes(path("s_%03db.jpg", 50), test::encode_jpeg(big, 8000, 6000, 3, {.quality = 80, .subsampling = 0}));
    progressive_ = new test::TempDir();
    fs::copy(dir_->path(), progressive_->path(), fs::copy_options::recursive);
    test::write_bytes(progressive_->path() / "set" / "s_080b.jpg",
                      test::encode_jpeg(big, 8000, 6000, 3, {.quality = 80, .progressive = true}));
  }
  static void TearDownTestSuite() {
    delete progressive_;
    delete dir_;
  }
  static fs::path path(const char* format, int index) {
    char name[32];
    std::snprintf(name, sizeof name, format, index);
    return dir_->path() / "set" / name;
  }

  static Pipeline pipeline(const fs::path& root) {
    return Pipeline::from_folder((root / "set").string())
        .read()
        .decode_jpeg()
        .resize_shorter(256)
        .center_crop(224)
        .normalize({.mean = {}, .std = {}, .layout = Layout::kNHWC, .dtype = DType::kU8})
        .batch(8);
  }

  // The smallest budget build() accepts, read from its refusal as a user would.
  static std::uint64_t minimum_budget(const fs::path& root, OnError on_error, int threads = 2) {
    try {
      (void)pipeline(root).build({.memory_budget = 4096, .threads = threads, .on_error = on_error});
    } catch (const Error& e) {
      std::smatch m;
      const std::string what = e.what();
      if (std::regex_search(what, m, std::regex("raise the budget to .* \\(([0-9]+) bytes\\)"))) {
        return std::stoull(m[1].str());
      }
      ADD_FAILURE() << what;
    }
    return 0;
  }

  static inline test::TempDir* dir_ = nullptr;
  static inline test::TempDir* progressive_ = nullptr;
};

TEST_F(LargeImages, HugeBaselineFilesDecodeInBandsAtTheMinimumBudgetWithTheUnlimitedRunsBytes) {
  Loader unlimited = pipeline(dir_->path()).build({.threads = 2});
  const std::uint64_t reference = test::epoch_checksum(unlimited, 0);
  for (const OnError policy : {OnError::kFail, OnError::kSkip}) {
    for (const int threads : {1, 2}) {
      const std::uint64_t budget = minimum_budget(dir_->path(), policy, threads);
      ASSERT_GT(budget, 0u);
      // The plan never saw a huge file's header: far less than one whole region of one (6 MB).
      EXPECT_LT(budget, static_cast<std::uint64_t>(threads) * (48u << 20));
      std::printf("[ large ] %d thread(s): minimum budget %llu bytes\n", threads, static_cast<unsigned long long>(budget));
      Loader loader = pipeline(dir_->path()).build({.memory_budget = budget, .threads = threads, .on_error = policy});
      EXPECT_EQ(test::epoch_checksum(loader, 0), reference) << "threads " << threads;
      const Stats s = loader.stats();
      EXPECT_TRUE(s.skipped_samples.empty());
      EXPECT_LE(s.memory_peak, budget);
      EXPECT_EQ(s.samples, 102);
    }
  }
}

TEST_F(LargeImages, AHugeProgressiveFileIsTooLargeUnderFailAndSkippedUnderSkip) {
  const fs::path root = progressive_->path();
  const std::string huge = (root / "set" / "s_080b.jpg").string();
  const std::uint64_t minimum = minimum_budget(root, OnError::kFail);
  ASSERT_GT(minimum, 0u);
  Loader failing = pipeline(root).build({.memory_budget = minimum, .threads = 2, .on_error = OnError::kFail});
  try {
    for (Batch& b : failing.epoch(0)) (void)b;
    FAIL() << "144 MB of coefficients inside a budget of " << minimum;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTooLarge) << e.what();
    EXPECT_EQ(e.path(), huge);
    EXPECT_NE(e.cause().find("needs 137.33 MiB for libjpeg's coefficients at any scale"), std::string::npos)
        << e.cause();
  }
  Loader skipping = pipeline(root).build({.memory_budget = minimum, .threads = 2, .on_error = OnError::kSkip});
  int samples = 0;
  for (Batch& b : skipping.epoch(0)) samples += b.size();
  EXPECT_EQ(samples, 103);
  const Stats s = skipping.stats();
  ASSERT_EQ(s.skipped_samples.size(), 1u);
  EXPECT_EQ(s.skipped_samples[0].path, huge);
  EXPECT_LE(s.memory_peak, minimum);
  // With room for it, it decodes.
  Loader roomy = pipeline(root).build({.memory_budget = minimum + (160 << 20), .threads = 2});
  int all = 0;
  for (Batch& b : roomy.epoch(0)) all += b.size();
  EXPECT_EQ(all, 103);
}

}  // namespace
}  // namespace sluice
