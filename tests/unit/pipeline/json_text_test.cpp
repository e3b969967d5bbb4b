// dump_json (src/pipeline/json_text.hpp): the documents sluice writes keep a path that is not
// UTF-8, byte for byte, as \udcXX escapes that Python's json.loads and os.fsencode turn back into
// the bytes; everything else is written exactly as nlohmann's dump() writes it. Also the stats
// schema's one writer, and the overrides the C API and Python apply to a spec.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "pipeline/json_text.hpp"
#include "sluice/core/error.hpp"
#include "sluice/pipeline/json_spec.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

TEST(JsonText, ValidDocumentsAreWrittenAsDumpWritesThem) {
  const ordered_json doc = {{"path", "caf\xc3\xa9/\xf0\x9f\x92\x80.jpg"},  // é and U+1F480, valid UTF-8
                            {"quote \"\\ \b\f\n\r\t\x01\x1f", {1, -2, 3.25, 1e300, nullptr, true, false}},
                            {"empty", ordered_json::object()},
                            {"none", ordered_json::array()},
                            {"nested", {{"a", {{"b", "c"}}}}}};
  for (const int indent : {-1, 0, 2, 4}) EXPECT_EQ(dump_json(doc, indent), doc.dump(indent)) << indent;
  const json unordered = json::parse(doc.dump());
  EXPECT_EQ(dump_json(unordered), unordered.dump());
}

TEST(JsonText, BytesThatAreNotUtf8BecomeLowSurrogateEscapes) {
  struct Case {
    std::string bytes;
    std::string written;
  };
  const std::vector<Case> cases = {
      {"bad\xff.jpg", R"("bad\udcff.jpg")"},
      {"\x80", R"("\udc80")"},
      {"\xc0\x80", R"("\udcc0\udc80")"},              // an overlong NUL
      {"\xed\xa0\x80", R"("\udced\udca0\udc80")"},    // an encoded surrogate
      {"\xe2\x82", R"("\udce2\udc82")"},              // a sequence cut short
      {"\xf4\x90\x80\x80", R"("\udcf4\udc90\udc80\udc80")"},  // past U+10FFFF
      {"\xc3\xa9\xff\xc3\xa9", "\"\xc3\xa9\\udcff\xc3\xa9\""},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(dump_json(json(c.bytes)), c.written);
    EXPECT_THROW((void)json(c.bytes).dump(), json::type_error);  // what the writers did before
  }
}

TEST(JsonText, PythonDecodesTheEscapesBackToTheBytes) {
  const std::string python = SLUICE_SYSTEM_PYTHON;
  if (python.empty()) GTEST_SKIP() << "no /usr/bin/python3";
  const std::string bytes = "d\xff/\xc3\xa9\xed\xa0\x80\xe2\x82.jpg";
  test::TempDir dir;
  const std::string file = (dir / "doc.json").string();
  const std::string text = dump_json(ordered_json{{"path", bytes}});
  test::write_bytes(file, std::vector<std::uint8_t>(text.begin(), text.end()));
  const std::string command = python + " -c \"import json,os,sys; sys.stdout.buffer.write(os.fsencode(json.load(open('" +
                              file + "'))['path']))\"";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buffer[256];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  ASSERT_EQ(::pclose(pipe), 0);
  EXPECT_EQ(out, bytes);
}

TEST(JsonText, WithoutByteEscapesLetsAStrictParserReadTheRest) {
  const std::string text = dump_json(ordered_json{{"path", "bad\xff"}, {"pair", "\xf0\x9f\x92\x80"}, {"n", 3}});
  EXPECT_THROW({ const json parsed = json::parse(text); }, json::parse_error);  // nlohmann refuses the escape
  const json j = json::parse(without_byte_escapes(text));
  EXPECT_EQ(j["path"], "bad\xef\xbf\xbd");  // U+FFFD
  EXPECT_EQ(j["n"], 3);
  // A pair's low half and an escaped backslash before "udcff" are left alone.
  EXPECT_EQ(without_byte_escapes(R"({"a":"\ud83d\udc80","b":"\\udcff"})"), R"({"a":"\ud83d\udc80","b":"\\udcff"})");
}

TEST(JsonText, StatsWithAPathThatIsNotUtf8) {
  Stats stats;
  stats.skipped_samples.push_back({"cls\xff/bad\xff.jpg", "truncated"});
  stats.recovered_samples.push_back({"r\xfe.jpg", "warning"});
  const std::string text = stats_to_json(stats);  // threw type_error 316 before
  EXPECT_NE(text.find(R"({"path":"cls\udcff/bad\udcff.jpg","cause":"truncated"})"), std::string::npos) << text;
  EXPECT_NE(text.find(R"({"path":"r\udcfe.jpg","warning":"warning"})"), std::string::npos) << text;
  for (const char* key : {"\"memory_peak\":", "\"skipped_samples\":", "\"hit_rate\":"}) {
    EXPECT_NE(text.find(key), std::string::npos) << key;
  }
}

TEST(DocumentOverrides, AppliedOverTheSpecAndChecked) {
  PipelineDocument doc = parse_pipeline_json(
      R"({"source": {"folder": "x"}, "stages": [{"read": {}}, {"decode_jpeg": {}}, {"batch": {"size": 2}},
          {"to_device": {"device": "host"}}], "build": {"threads": 3, "memory_budget": 100}})");
  apply_overrides(doc, {});
  EXPECT_EQ(doc.build.threads, 3);
  EXPECT_EQ(doc.build.memory_budget, 100u);
  int stream = 0;
  apply_overrides(doc, {.threads = autotune, .memory_budget = 0, .cuda_stream = &stream, .shard_rank = 1, .shard_world = 4});
  EXPECT_EQ(doc.build.threads, autotune);
  EXPECT_EQ(doc.build.memory_budget, 0u);
  EXPECT_EQ(std::get<spec::ToDevice>(doc.spec.stages.back()).options.stream, &stream);
  EXPECT_EQ(doc.spec.shard_rank, 1);
  EXPECT_EQ(doc.spec.shard_world, 4);
  EXPECT_THROW(apply_overrides(doc, {.threads = 0}), Error);
  EXPECT_THROW(apply_overrides(doc, {.threads = -2}), Error);
  EXPECT_THROW(apply_overrides(doc, {.shard_rank = 4, .shard_world = 4}), Error);
  EXPECT_THROW(apply_overrides(doc, {.shard_rank = 0}), Error);
}

}  // namespace
}  // namespace sluice
