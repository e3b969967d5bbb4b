// A data set whose class folder and file are named with bytes that are not UTF-8 (`bad\xff`,
// `bad\xff.jpg`, as Linux allows): `bench --json` and `inspect --json` end with their JSON line
// (they threw nlohmann's type_error 316 after the whole run and printed nothing), the names
// escaped as \udcXX (docs/stats.md).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_test_support.hpp"
#include "pipeline/json_text.hpp"
#include "pipeline_support.hpp"
#include "test_support.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// good/ with 12 images, bad\xff/ with 4 images and a truncated bad\xff.jpg.
class NonUtf8Paths : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::vector<Item> good = make_coded_items(dir_ / "good", 12);
    make_coded_items(dir_ / "bad\xff", 4);
    const auto jpeg = read_bytes(good[0].path);
    write_bytes(bad_file(), {jpeg.begin(), jpeg.begin() + static_cast<long>(jpeg.size() / 2)});
  }
  fs::path bad_file() const { return dir_ / "bad\xff" / "bad\xff.jpg"; }
  std::string escaped_bad_file() const { return dir_.path().string() + R"(/bad\udcff/bad\udcff.jpg)"; }

  TempDir dir_;
};

TEST_F(NonUtf8Paths, BenchJsonKeepsTheSkippedPathEscaped) {
  const CliRun run = run_cli({"bench", "--data", dir_.path().string(), "--transform", "none", "--on-error", "skip",
                              "--batch", "4", "--out", "u8", "--threads", "2", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string line = run.last_line();
  EXPECT_NE(line.find("\"path\":\"" + escaped_bad_file() + "\""), std::string::npos) << line;
  const json j = json::parse(without_byte_escapes(line));
  EXPECT_EQ(j["images"], 17);
  EXPECT_EQ(j["skipped"], 1);
  ASSERT_EQ(j["skipped_samples"].size(), 1u);
  EXPECT_FALSE(j["skipped_samples"][0]["cause"].get<std::string>().empty());
}

TEST_F(NonUtf8Paths, InspectJsonNamesTheClassAndTheFileEscaped) {
  const CliRun run = run_cli({"inspect", dir_.path().string(), "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string line = run.last_line();
  EXPECT_NE(line.find(R"("bad\udcff")"), std::string::npos) << line;  // the class
  EXPECT_NE(line.find("\"" + escaped_bad_file() + "\""), std::string::npos) << line;
  const json j = json::parse(without_byte_escapes(line));
  EXPECT_EQ(j["files"], 17);
}

}  // namespace
}  // namespace sluice::test
