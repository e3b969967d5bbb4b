// `sluice inspect`, run as a user runs it: on a generated folder with known bad files (each must
// be listed with its cause), and on the shared real datasets (counts must match the disk).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "cli_test_support.hpp"
#include "jpeg_edits.hpp"
#include "test_support.hpp"

namespace sluice::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Three classes of four good JPEGs, plus one file of each kind of trouble and one of each JPEG
// variant inspect counts.
class InspectGeneratedFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = scratch_ / "set";
    good_ = make_image_folder(root_, 3, 4, 64, 48);
    const auto jpeg = read_bytes(good_.front());
    const fs::path a = good_[0].parent_path();
    const fs::path b = good_[4].parent_path();
    const fs::path c = good_[8].parent_path();
    // Header intact, scan data cut: only a full decode notices.
    cut_data_ = a / "cut_data.jpg";
    write_bytes(cut_data_, {jpeg.begin(), jpeg.begin() + static_cast<long>(jpeg.size() * 6 / 10)});
    png_ = b / "renamed_png.jpg";
    write_bytes(png_, make_png(16, 16));
    empty_ = c / "empty.jpg";
    write_bytes(empty_, {});
    cut_header_ = c / "cut_header.jpg";
    write_bytes(cut_header_, {jpeg.begin(), jpeg.begin() + 20});

    const auto rgb = make_pattern(40, 30, 3, 5);
    write_bytes(a / "progressive.jpg", encode_jpeg(rgb, 40, 30, 3, {.progressive = true}));
    write_bytes(b / "grey.jpg", encode_jpeg(make_pattern(40, 30, 1, 6), 40, 30, 1));
    write_bytes(c / "cmyk.jpg", encode_jpeg(make_pattern(40, 30, 4, 7), 40, 30, 4, {.cmyk = true}));
    write_bytes(c / "notes.txt", {'h', 'i'});        // not an image name: ignored, counted
    write_bytes(c / ".hidden.jpg", {'x'});           // hidden: skipped like the source stage does
  }

  json inspect_json(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"inspect", root_.string(), "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const CliRun run = run_cli(args);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return json::parse(run.last_line());
  }

  static std::map<std::string, json> failures_by_path(const json& report) {
    std::map<std::string, json> out;
    for (const json& f : report["failures"]) out[f["path"].get<std::string>()] = f;
    return out;
  }

  TempDir scratch_;
  fs::path root_;
  std::vector<fs::path> good_;
  fs::path cut_data_, png_, empty_, cut_header_;
};

TEST_F(InspectGeneratedFolder, HeadersOnly_CountsClassesListsEmptyAndCutHeaderAndFlagsThePngNamedJpg) {
  const json report = inspect_json();
  EXPECT_EQ(report["layout"], "class-folders");
  EXPECT_EQ(report["files"], 12 + 4 + 3);
  EXPECT_EQ(report["other_files"], 1);
  ASSERT_EQ(report["classes"].size(), 3u);
  EXPECT_EQ(report["classes"][0]["files"], 4 + 2);  // + cut_data, progressive
  EXPECT_EQ(report["classes"][1]["files"], 4 + 2);  // + renamed_png, grey
  EXPECT_EQ(report["classes"][2]["files"], 4 + 3);  // + empty, cut_header, cmyk
  std::uint64_t bytes = 0;
  for (const json& c : report["classes"]) bytes += c["bytes"].get<std::uint64_t>();
  EXPECT_EQ(report["bytes"].get<std::uint64_t>(), bytes);

  EXPECT_EQ(report["greyscale"], 1 + 1);  // grey.jpg, and the grey PNG named .jpg (decoded by content)
  EXPECT_EQ(report["progressive"], 1);
  EXPECT_EQ(report["cmyk"], 1);
  EXPECT_EQ(report["dimensions"]["headers_read"], 12 + 1 + 3 + 1);  // cut_data's header is whole; the PNG
  EXPECT_EQ(report["dimensions"]["max_width"], 64);
  EXPECT_EQ(report["dimensions"]["min_height"], 16);
  EXPECT_EQ(report["formats"]["by_content"]["PNG"]["files"], 1);
  EXPECT_EQ(report["formats"]["by_content"]["JPEG"]["files"], 12 + 4 + 1);  // and cut_header (FF D8)
  ASSERT_EQ(report["formats"]["extension_mismatches"], 1) << report["formats"].dump(2);
  EXPECT_EQ(report["formats"]["mismatched_files"][0]["path"], png_.string());
  EXPECT_EQ(report["formats"]["mismatched_files"][0]["content"], "PNG");
  EXPECT_EQ(report["formats"]["mismatched_files"][0]["extension"], "JPEG");

  const auto failures = failures_by_path(report);
  EXPECT_EQ(report["failed"], 2);
  ASSERT_EQ(failures.size(), 2u) << report["failures"].dump(2);
  EXPECT_FALSE(failures.count(png_.string()));
  ASSERT_TRUE(failures.count(empty_.string()));
  EXPECT_EQ(failures.at(empty_.string())["cause"], "empty file");
  ASSERT_TRUE(failures.count(cut_header_.string()));
  EXPECT_FALSE(failures.at(cut_header_.string())["cause"].get<std::string>().empty());
  for (const auto& [path, failure] : failures) EXPECT_EQ(failure["stage"], "header") << path;
}

TEST_F(InspectGeneratedFolder, Decode_AlsoListsTheFileWithCutScanData) {
  const json report = inspect_json({"--decode"});
  EXPECT_EQ(report["decoded"], true);
  const auto failures = failures_by_path(report);
  EXPECT_EQ(failures.size(), 3u) << report["failures"].dump(2);
  ASSERT_TRUE(failures.count(cut_data_.string())) << report["failures"].dump(2);
  EXPECT_EQ(failures.at(cut_data_.string())["stage"], "decode");
  EXPECT_FALSE(failures.at(cut_data_.string())["cause"].get<std::string>().empty());
}

TEST_F(InspectGeneratedFolder, TextReport_NamesEveryBadFileWithItsCause) {
  const CliRun run = run_cli({"inspect", root_.string()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  for (const fs::path& bad : {empty_, cut_header_}) {
    EXPECT_NE(run.out.find(bad.string() + ": "), std::string::npos) << run.out;
  }
  EXPECT_NE(run.out.find(png_.string() + ": named JPEG, holds PNG"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("empty file"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("19 image files"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("3 classes"), std::string::npos) << run.out;
}

// A file libjpeg warns about but reads whole is listed as recovered (with the warning), not as a
// failure, as the pipeline treats it; --strict-decode lists it as a failure.
TEST_F(InspectGeneratedFolder, RecoveredFile_IsListedWithItsWarningAndStrictDecodeFailsIt) {
  const fs::path junk = good_[1].parent_path() / "junk_between_markers.jpg";
  write_bytes(junk, with_junk_before_marker(read_bytes(good_[1]), 0xDB, 9));
  const std::string warning = "Corrupt JPEG data: 9 extraneous bytes before marker 0xdb";
  for (const char* mode : {"", "--decode"}) {
    const json report = inspect_json(std::string(mode).empty() ? std::vector<std::string>{}
                                                               : std::vector<std::string>{mode});
    EXPECT_EQ(failures_by_path(report).count(junk.string()), 0u) << mode;
    EXPECT_EQ(report["recovered"], 1) << mode;
    ASSERT_EQ(report["recovered_files"].size(), 1u) << mode;
    EXPECT_EQ(report["recovered_files"][0]["path"], junk.string());
    EXPECT_EQ(report["recovered_files"][0]["warning"], warning);
  }
  const json strict = inspect_json({"--strict-decode"});
  EXPECT_EQ(strict["recovered"], 0);
  const auto failures = failures_by_path(strict);
  ASSERT_EQ(failures.count(junk.string()), 1u) << strict["failures"].dump(2);
  EXPECT_EQ(failures.at(junk.string())["stage"], "header");
  EXPECT_NE(failures.at(junk.string())["cause"].get<std::string>().find(warning), std::string::npos);

  const CliRun text = run_cli({"inspect", root_.string()});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("recovered: 1"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(junk.string() + ": " + warning), std::string::npos) << text.out;
}

TEST(Inspect, MissingFolder_ExitsOneNamingIt) {
  TempDir scratch;
  const CliRun run = run_cli({"inspect", (scratch / "nope").string()});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find((scratch / "nope").string()), std::string::npos) << run.err;
}

TEST(Inspect, WallpaperCrops_JsonCountsMatchTheDisk) {
  SLUICE_REQUIRE_DATASET(root, "wallpaper-crops");
  const CliRun run = run_cli({"inspect", root.string(), "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const json report = json::parse(run.last_line());
  const auto files = list_files(root);
  std::uint64_t bytes = 0;
  for (const fs::path& file : files) bytes += fs::file_size(file);
  EXPECT_EQ(report["files"].get<std::size_t>(), files.size());
  EXPECT_EQ(report["bytes"].get<std::uint64_t>(), bytes);
  EXPECT_EQ(report["layout"], "flat");
  ASSERT_EQ(report["classes"].size(), 1u);
  EXPECT_EQ(report["classes"][0]["name"], "wallpaper-crops");
  EXPECT_EQ(report["classes"][0]["files"].get<std::size_t>(), files.size());
  EXPECT_GT(report["greyscale"].get<int>(), 0);
  EXPECT_GT(report["progressive"].get<int>(), 0);
  EXPECT_EQ(report["failed"], 0) << report["failures"].dump(2);
  std::uint64_t histogram_files = 0;
  for (const json& b : report["size_histogram"]) histogram_files += b["files"].get<std::uint64_t>();
  EXPECT_EQ(histogram_files, files.size());
  std::uint64_t side_files = 0;
  for (const json& b : report["dimensions"]["shorter_side_histogram"]) {
    side_files += b["files"].get<std::uint64_t>();
  }
  EXPECT_EQ(side_files, files.size());
  EXPECT_GE(report["dimensions"]["min_width"].get<int>(), 300);
  EXPECT_LE(report["dimensions"]["max_width"].get<int>(), 1024);
}

TEST(Inspect, WallpaperCrops_DecodeFindsNoFailures) {
  SLUICE_REQUIRE_DATASET(root, "wallpaper-crops");
  const CliRun run = run_cli({"inspect", root.string(), "--json", "--decode"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const json report = json::parse(run.last_line());
  EXPECT_EQ(report["failed"], 0) << report["failures"].dump(2);
  EXPECT_EQ(report["files"], 1000);
}

// A truncated file from the wild (the cut falls before the scan data, so the header read already
// fails): listed with the decoder's cause whether or not --decode is given.
TEST(Inspect, SharedTruncatedJpeg_IsListedWithItsCause) {
  SLUICE_REQUIRE_DATASET(root, "corrupt");
  for (const bool decode : {false, true}) {
    std::vector<std::string> args = {"inspect", root.string(), "--json"};
    if (decode) args.push_back("--decode");
    const CliRun run = run_cli(args);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const json report = json::parse(run.last_line());
    ASSERT_EQ(report["failed"], 1) << "decode " << decode;
    EXPECT_NE(report["failures"][0]["path"].get<std::string>().find("truncated.jpg"),
              std::string::npos);
    EXPECT_NE(report["failures"][0]["cause"].get<std::string>().find("Premature end"),
              std::string::npos)
        << report["failures"][0].dump();
  }
}

}  // namespace
}  // namespace sluice::test
