// The JSON spec's bounds: nesting depth, string length and text size are refused
// before parsing with a short message naming the limit and the offset; a bad value, however
// large, is quoted by a bounded prefix; a spec file that is a FIFO is refused without blocking.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "pipeline/json_limits.hpp"
#include "sluice/core/error.hpp"
#include "sluice/pipeline/json_spec.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_pipeline_json(text);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for a spec of " << text.size() << " bytes";
  return {};
}

std::string spec_with_stages(const std::string& stages) {
  return R"({"source": {"folder": "/d"}, "stages": )" + stages + "}";
}

TEST(JsonLimits, DeepNestingIsRefusedBeforeParsing) {
  const int depth = 100000;  // deep enough to overflow a recursive parser's or dumper's stack
  const std::string text = spec_with_stages(std::string(depth, '[') + std::string(depth, ']'));
  const std::string message = error_of(text);
  EXPECT_NE(message.find("nested deeper than 64 levels"), std::string::npos) << message;
  EXPECT_LT(message.size(), 200u);
  // Brackets inside strings do not count, and the limit itself is fine.
  EXPECT_NO_THROW(json_limits::check_text("\"" + std::string(1000, '[') + "\""));
  EXPECT_NO_THROW(json_limits::check_text(std::string(64, '[') + std::string(64, ']')));
  EXPECT_THROW(json_limits::check_text(std::string(65, '[') + std::string(65, ']')), Error);
  // An escaped quote does not end the string.
  EXPECT_NO_THROW(json_limits::check_text("\"\\\"" + std::string(100, '{') + "\""));
}

TEST(JsonLimits, LongStringsAreRefused) {
  const std::string text = R"({"source": {"folder": ")" + std::string(100000, 'a') + R"("}, "stages": []})";
  const std::string message = error_of(text);
  EXPECT_NE(message.find("string longer than 65536 bytes"), std::string::npos) << message;
  EXPECT_LT(message.size(), 200u);
}

TEST(JsonLimits, BadValuesAreQuotedByABoundedPrefix) {
  // stages must be an array: a large object there is reported by its first characters only.
  std::string big = "{";
  for (int i = 0; i < 200000; ++i) big += (i ? ",\"k" : "\"k") + std::to_string(i) + "\": [1, 2, 3]";
  big += "}";
  const std::string message = error_of(spec_with_stages(big));
  EXPECT_NE(message.find("stages: expected an array"), std::string::npos) << message.substr(0, 300);
  EXPECT_LT(message.size(), 200u) << message.substr(0, 300);
  EXPECT_NE(message.find("..."), std::string::npos);
  // An unknown key of 60 KiB is cut too.
  const std::string key(60000, 'z');
  const std::string unknown = error_of(R"({"source": {"folder": "/d"}, ")" + key + R"(": 1, "stages": []})");
  EXPECT_NE(unknown.find("unknown key"), std::string::npos) << unknown.substr(0, 300);
  EXPECT_LT(unknown.size(), 400u);
  // A parse error quoting a long token.
  const std::string broken = error_of(R"({"source": {"folder": ")" + std::string(60000, 'q') + "\n");
  EXPECT_NE(broken.find("not valid JSON"), std::string::npos);
  EXPECT_LT(broken.size(), 400u);
}

TEST(JsonLimits, DescribeNeverCutsInsideUtf8AndSerialisesOnlyWhatItShows) {
  nlohmann::json value = nlohmann::json::array();
  for (int i = 0; i < 1000; ++i) value.push_back(std::string(50, 'x') + "\xC3\xA9");
  const std::string text = json_limits::describe(value, 60);
  EXPECT_LE(text.size(), 63u);
  EXPECT_EQ(text.substr(text.size() - 3), "...");
  EXPECT_EQ(json_limits::describe(nlohmann::json{{"a", 1}}), R"({"a":1})");
  EXPECT_EQ(json_limits::describe(nlohmann::json::array({1, 2})), "[1,2]");
  // Invalid UTF-8 in a value does not throw while describing it.
  EXPECT_NO_THROW(json_limits::describe(nlohmann::json(std::string("\xFF\xFE"))));
}

// Found by json_spec_fuzzer: nlohmann throws out_of_range, not parse_error, for a number beyond
// double's range; it escaped parse_pipeline_json as a foreign exception.
TEST(JsonLimits, ANumberBeyondDoubleIsAnErrorNotAForeignException) {
  const std::string message = error_of(R"({"source": {"folder": "/d"}, "stages": [{"batch": {"size": 1e999}}]})");
  EXPECT_NE(message.find("not valid JSON"), std::string::npos) << message;
}

TEST(JsonLimits, ASpecFileThatIsAFifoIsRefused) {
  test::TempDir dir;
  const std::string path = (dir / "spec.json").string();
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
  try {
    load_pipeline_json(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.path(), path);
    EXPECT_NE(e.cause().find("not a regular file"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sluice
