// `sluice prepare fashion-mnist`, run as a user runs it: on synthetic IDX files (layout, labels,
// pixels, reruns, every kind of broken input) and on Debian's real files when installed.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli_test_support.hpp"
#include "test_support.hpp"

namespace sluice::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kClasses[] = {"0_tshirt_top", "1_trouser", "2_pullover", "3_dress",
                                    "4_coat",       "5_sandal",  "6_shirt",    "7_sneaker",
                                    "8_bag",        "9_ankle_boot"};
constexpr const char* kDebianSource = "/usr/share/datasets/fashion-mnist";

std::string padded(std::uint32_t index) {
  char name[16];
  std::snprintf(name, sizeof name, "%05u.jpg", index);
  return name;
}

ino_t inode_of(const fs::path& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 ? info.st_ino : 0;
}

// One synthetic source a test process (gtest_discover_tests runs each test in its own process,
// so this is written once a test; ~0.5 s).
class PrepareFashionMnist : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    source_ = std::make_unique<TempDir>();
    write_synthetic_fashion_mnist(source_->path());
  }
  static void TearDownTestSuite() { source_.reset(); }

  static const fs::path& source() { return source_->path(); }

  // A source folder that is the good one except for `file`, replaced by `bytes` (gzipped), or
  // missing when bytes is null.
  fs::path source_with(const std::string& file, const std::vector<std::uint8_t>* bytes) {
    const fs::path dir = scratch_ / "source";
    fs::create_directories(dir);
    for (const auto& entry : fs::directory_iterator(source())) {
      const std::string name = entry.path().filename().string();
      if (name != file) fs::create_symlink(entry.path(), dir / name);
    }
    if (bytes != nullptr) write_gzip(dir / file, *bytes);
    return dir;
  }

  CliRun prepare(const fs::path& src, const fs::path& out, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"prepare", "fashion-mnist", "--out", out.string(),
                                     "--source", src.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  }

  // Asserts a failed run: exit 1, stderr names `file` and says `cause`, nothing written.
  void expect_failure(const CliRun& run, const std::string& file, const std::string& cause) {
    EXPECT_EQ(run.exit_code, 1) << run.err;
    EXPECT_NE(run.err.find("sluice: "), std::string::npos) << run.err;
    EXPECT_NE(run.err.find(file), std::string::npos) << "error should name " << file << ": "
                                                     << run.err;
    EXPECT_NE(run.err.find(cause), std::string::npos) << "error should say " << cause << ": "
                                                      << run.err;
    EXPECT_FALSE(fs::exists(scratch_ / "out")) << "a failed run must leave no output";
  }

  TempDir scratch_;
  inline static std::unique_ptr<TempDir> source_;
};

TEST_F(PrepareFashionMnist, SyntheticLimit30_WritesSplitsClassFoldersInLabelOrderAndMarker) {
  const fs::path out = scratch_ / "out";
  const CliRun run = prepare(source(), out, {"--limit", "30"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("prepared fashion-mnist"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("60 files"), std::string::npos) << run.out;

  for (const char* split : {"train", "test"}) {
    std::vector<std::string> folders;
    for (const auto& entry : fs::directory_iterator(out / split)) {
      folders.push_back(entry.path().filename().string());
    }
    std::sort(folders.begin(), folders.end());
    ASSERT_EQ(folders.size(), 10u) << split;
    for (std::size_t label = 0; label < folders.size(); ++label) {
      EXPECT_EQ(folders[label], kClasses[label]) << "sorted class " << label;
    }
    EXPECT_EQ(list_files(out / split).size(), 30u) << split;
    for (std::uint32_t i = 0; i < 30; ++i) {
      EXPECT_TRUE(fs::exists(out / split / kClasses[synthetic_label(i)] / padded(i)))
          << split << " image " << i;
    }
  }
  const json marker = json::parse(read_bytes(out / "prepared.json"));
  EXPECT_EQ(marker["files"], 60);
  EXPECT_EQ(marker["quality"], 95);
  EXPECT_EQ(marker["limit"], 30);
  EXPECT_EQ(marker["splits"]["train"]["files"], 30);
  std::uint64_t bytes = 0;
  for (const fs::path& file : list_files(out)) {
    if (file.extension() == ".jpg") bytes += fs::file_size(file);
  }
  EXPECT_EQ(marker["bytes"].get<std::uint64_t>(), bytes);
  for (const auto& entry : fs::directory_iterator(out)) {
    EXPECT_FALSE(entry.path().filename().string().starts_with(".")) << "left " << entry.path();
  }
}

TEST_F(PrepareFashionMnist, SyntheticQuality95_DecodedPixelsWithinJpegToleranceOfIdx) {
  const fs::path out = scratch_ / "out";
  ASSERT_EQ(prepare(source(), out, {"--limit", "50"}).exit_code, 0);
  for (const auto& [split, count] : {std::pair{"train", 50u}, std::pair{"test", 50u}}) {
    for (std::uint32_t i = 0; i < count; ++i) {
      int width = 0;
      int height = 0;
      const auto pixels =
          decode_grey(out / split / kClasses[synthetic_label(i)] / padded(i), width, height);
      ASSERT_EQ(width, 28);
      ASSERT_EQ(height, 28);
      int max_error = 0;
      double sum_error = 0;
      for (int y = 0; y < 28; ++y) {
        for (int x = 0; x < 28; ++x) {
          const int error = std::abs(pixels[y * 28 + x] - synthetic_pixel(i, y, x));
          max_error = std::max(max_error, error);
          sum_error += error;
        }
      }
      EXPECT_LE(max_error, 6) << split << " image " << i;
      EXPECT_LE(sum_error / (28 * 28), 1.5) << split << " image " << i;
    }
  }
}

TEST_F(PrepareFashionMnist, SecondRun_SaysAlreadyPreparedAndRewritesNothing) {
  const fs::path out = scratch_ / "out";
  ASSERT_EQ(prepare(source(), out, {"--limit", "20"}).exit_code, 0);
  const fs::path probe = out / "train" / kClasses[synthetic_label(7)] / padded(7);
  const ino_t before = inode_of(probe);
  const CliRun again = prepare(source(), out, {"--limit", "20"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("already prepared"), std::string::npos) << again.out;
  EXPECT_EQ(inode_of(probe), before);
}

TEST_F(PrepareFashionMnist, Force_ReplacesThePreparedTreeAndLeavesNoTemporaries) {
  const fs::path out = scratch_ / "out";
  ASSERT_EQ(prepare(source(), out, {"--limit", "20"}).exit_code, 0);
  const fs::path probe = out / "train" / kClasses[synthetic_label(7)] / padded(7);
  const ino_t before = inode_of(probe);
  const CliRun forced = prepare(source(), out, {"--limit", "20", "--force", "--quality", "80"});
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_NE(forced.out.find("prepared fashion-mnist"), std::string::npos) << forced.out;
  EXPECT_NE(inode_of(probe), before);
  EXPECT_EQ(json::parse(read_bytes(out / "prepared.json"))["quality"], 80);
  EXPECT_EQ(list_files(out).size(), 40u + 1u);  // images and the marker, nothing else
}

TEST_F(PrepareFashionMnist, OtherQualityWithoutForce_FailsAskingForForce) {
  const fs::path out = scratch_ / "out";
  ASSERT_EQ(prepare(source(), out, {"--limit", "10"}).exit_code, 0);
  const CliRun run = prepare(source(), out, {"--limit", "10", "--quality", "50"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("--force"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("quality 95"), std::string::npos) << run.err;
}

TEST_F(PrepareFashionMnist, LeftoversOfAKilledRun_AreRemoved) {
  const fs::path out = scratch_ / "out";
  write_bytes(out / ".partial-999999" / "train" / "junk.jpg", {1, 2, 3});
  const CliRun run = prepare(source(), out, {"--limit", "5"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_FALSE(fs::exists(out / ".partial-999999"));
}

TEST_F(PrepareFashionMnist, TrainFolderWithoutMarker_NeedsForce) {
  const fs::path out = scratch_ / "out";
  write_bytes(out / "train" / "mine.jpg", {1, 2, 3});
  const CliRun run = prepare(source(), out, {"--limit", "5"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("--force"), std::string::npos) << run.err;
  EXPECT_TRUE(fs::exists(out / "train" / "mine.jpg"));
  EXPECT_EQ(prepare(source(), out, {"--limit", "5", "--force"}).exit_code, 0);
  EXPECT_FALSE(fs::exists(out / "train" / "mine.jpg"));
}

TEST_F(PrepareFashionMnist, MissingLabelsFile_NamesTheFileAndTheDebianPackage) {
  const fs::path src = source_with("t10k-labels-idx1-ubyte.gz", nullptr);
  expect_failure(prepare(src, scratch_ / "out"), "t10k-labels-idx1-ubyte",
                 "apt-get install dataset-fashion-mnist");
}

TEST_F(PrepareFashionMnist, MissingSourceFolder_SaysHowToInstall) {
  expect_failure(prepare(scratch_ / "nowhere", scratch_ / "out"), "nowhere",
                 "apt-get install dataset-fashion-mnist");
}

TEST_F(PrepareFashionMnist, LabelsWithImagesMagic_FailsOnMagicNumber) {
  const auto bytes = idx_labels(synthetic_labels(kTestCount), 2051);
  expect_failure(prepare(source_with("t10k-labels-idx1-ubyte.gz", &bytes), scratch_ / "out"),
                 "t10k-labels-idx1-ubyte.gz", "wrong magic number 2051");
}

TEST_F(PrepareFashionMnist, CutGzipStream_FailsAsDamagedGzip) {
  const auto full = idx_labels(synthetic_labels(kTestCount));
  const fs::path src = source_with("t10k-labels-idx1-ubyte.gz", &full);
  const auto gz = read_bytes(src / "t10k-labels-idx1-ubyte.gz");
  write_bytes(src / "t10k-labels-idx1-ubyte.gz",
              std::vector<std::uint8_t>(gz.begin(), gz.begin() + gz.size() / 2));
  expect_failure(prepare(src, scratch_ / "out"), "t10k-labels-idx1-ubyte.gz", "damaged gzip");
}

TEST_F(PrepareFashionMnist, HeaderPromisesMoreImagesThanStored_FailsAsTruncated) {
  const auto bytes = idx_images(kTestCount, 28, 28, synthetic_images(100));
  expect_failure(prepare(source_with("t10k-images-idx3-ubyte.gz", &bytes), scratch_ / "out"),
                 "t10k-images-idx3-ubyte.gz", "truncated");
}

TEST_F(PrepareFashionMnist, ConsistentFileWithWrongCount_FailsNamingBothCounts) {
  const auto bytes = idx_images(100, 28, 28, synthetic_images(100));
  const CliRun run = prepare(source_with("t10k-images-idx3-ubyte.gz", &bytes), scratch_ / "out");
  expect_failure(run, "t10k-images-idx3-ubyte.gz", "holds 100 images");
  EXPECT_NE(run.err.find("10000"), std::string::npos) << run.err;
}

TEST_F(PrepareFashionMnist, LabelCountDifferentFromImages_Fails) {
  const auto bytes = idx_labels(synthetic_labels(9999));
  expect_failure(prepare(source_with("t10k-labels-idx1-ubyte.gz", &bytes), scratch_ / "out"),
                 "t10k-labels-idx1-ubyte.gz", "holds 9999 labels");
}

TEST_F(PrepareFashionMnist, Images32x32_FailsOnDimensions) {
  std::vector<std::uint8_t> pixels(std::size_t{kTestCount} * 32 * 32, 128);
  const auto bytes = idx_images(kTestCount, 32, 32, pixels);
  expect_failure(prepare(source_with("t10k-images-idx3-ubyte.gz", &bytes), scratch_ / "out"),
                 "t10k-images-idx3-ubyte.gz", "28x28");
}

TEST_F(PrepareFashionMnist, LabelTen_FailsNamingIndex) {
  auto labels = synthetic_labels(kTestCount);
  labels[1234] = 10;
  const auto bytes = idx_labels(labels);
  expect_failure(prepare(source_with("t10k-labels-idx1-ubyte.gz", &bytes), scratch_ / "out"),
                 "t10k-labels-idx1-ubyte.gz", "label 10 at index 1234");
}

TEST_F(PrepareFashionMnist, PreparedFolder_InspectsAsTenGreyscaleClasses) {
  const fs::path out = scratch_ / "out";
  ASSERT_EQ(prepare(source(), out, {"--limit", "40"}).exit_code, 0);
  const CliRun run = run_cli({"inspect", (out / "train").string(), "--json", "--decode"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const json report = json::parse(run.last_line());
  EXPECT_EQ(report["files"], 40);
  EXPECT_EQ(report["greyscale"], 40);
  EXPECT_EQ(report["failed"], 0);
  ASSERT_EQ(report["classes"].size(), 10u);
  for (int label = 0; label < 10; ++label) {
    EXPECT_EQ(report["classes"][label]["name"], kClasses[label]);
    EXPECT_EQ(report["classes"][label]["files"], 4);  // labels (7i + 3) % 10 cycle every 10
  }
}

TEST(PrepareUsage, BadInvocations_ExitTwo) {
  TempDir scratch;
  EXPECT_EQ(run_cli({"prepare", "fashion-mnist"}).exit_code, 2) << "--out is required";
  EXPECT_EQ(run_cli({"prepare", "cifar-1000", "--out", (scratch / "o").string()}).exit_code, 2);
  EXPECT_EQ(run_cli({"prepare", "fashion-mnist", "--out", (scratch / "o").string(), "--quality",
                     "0"})
                .exit_code,
            2);
  EXPECT_FALSE(fs::exists(scratch / "o"));
}

TEST(SluiceCli, VersionAndUsage) {
  const CliRun version = run_cli({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_NE(version.out.find("sluice "), std::string::npos) << version.out;
  EXPECT_EQ(run_cli({}).exit_code, 2) << "a subcommand is required";
  EXPECT_EQ(run_cli({"no-such-command"}).exit_code, 2);
  const CliRun help = run_cli({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("prepare"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("inspect"), std::string::npos) << help.out;
}

// The real files from dataset-fashion-mnist: checks our reading of the format against data we did
// not write, pixel by pixel and label by label.
TEST(PrepareFashionMnistDebian, Limit100_MatchesTheIdxPixelsAndLabels) {
  if (!fs::exists(fs::path(kDebianSource) / "t10k-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist not installed (scripts/setup installs it)";
  }
  TempDir scratch;
  const fs::path out = scratch / "fm";
  const CliRun run = run_cli({"prepare", "fashion-mnist", "--out", out.string(), "--limit", "100"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(list_files(out / "train").size(), 100u);
  EXPECT_EQ(list_files(out / "test").size(), 100u);

  const auto images = read_gzip(fs::path(kDebianSource) / "t10k-images-idx3-ubyte.gz");
  const auto labels = read_gzip(fs::path(kDebianSource) / "t10k-labels-idx1-ubyte.gz");
  double total_error = 0;
  for (std::uint32_t i = 0; i < 100; ++i) {
    const fs::path file = out / "test" / kClasses[labels[8 + i]] / padded(i);
    ASSERT_TRUE(fs::exists(file)) << file;
    int width = 0;
    int height = 0;
    const auto pixels = decode_grey(file, width, height);
    ASSERT_EQ(width * height, 784);
    double error = 0;
    for (int p = 0; p < 784; ++p) error += std::abs(pixels[p] - images[16 + i * 784 + p]);
    // Real images have hard edges, so single pixels may ring; the mean stays small.
    EXPECT_LE(error / 784, 3.0) << file;
    total_error += error / 784;
  }
  EXPECT_LE(total_error / 100, 1.5);
}

}  // namespace
}  // namespace sluice::test
