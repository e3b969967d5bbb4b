// json_spec_fuzzer: parse_pipeline_json on arbitrary text. Expected: a document or a
// sluice::Error; a finding is a crash, a sanitizer report, any other exception (nlohmann's own
// type or parse errors escaping), an Error with kInternal, a message longer than the bounds allow
// (a value dumped whole), or a document whose to_json does not parse back to the same text.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "sluice/pipeline/json_spec.hpp"

namespace sluice::fuzz {

void write_seeds(const std::filesystem::path& folder) {
  const char* specs[] = {
      R"({"source": {"folder": "imagenet/train"}, "shard": {"rank": 0, "world": 1}, "shuffle_files": {"seed": 1},
  "stages": ["read", {"decode_jpeg": {"color": "rgb", "fast_dct": true}}, {"random_resized_crop": {"size": 224}},
    {"flip_horizontal": {"probability": 0.5}},
    {"normalize": {"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225], "layout": "nchw", "dtype": "f16"}},
    {"shuffle": {"buffer": 8192}}, {"batch": {"size": 256, "drop_last": false}}, {"prefetch": {"depth": 2}},
    {"to_device": {"device": "cuda:0"}}],
  "build": {"memory_budget": "4GiB", "threads": "auto", "on_error": "skip", "seed": 1}})",
      R"({"source": {"list": {"path": "l.txt", "allow_outside_root": true}}, "stages": [{"read": {"max_file_size": "1MiB"}},
  {"cache": {"disk": {"path": "c.cache", "max_bytes": 1000}}}, "decode_jpeg", {"resize_shorter": {"size": 36}},
  {"center_crop": {"size": [32, 30]}}, {"batch": {"size": 4}}], "build": {"threads": 2, "ordered": true}})",
      R"({"source": {"items": [{"path": "a.jpg", "label": 3}, {"path": "b.jpg"}]}, "shard": "launcher",
  "stages": ["read", {"cache": {"memory": {"max_bytes": 0}}}, {"decode_jpeg": {"color": "grey", "max_image_pixels": 100}},
  {"random_crop": {"size": 32, "padding": 4, "fill": 7}}, {"resize": {"size": [8, 9], "filter": "area"}},
  {"normalize": {"dtype": "u8", "layout": "nhwc"}}, {"batch": {"size": 1}}]})",
      R"({"source": {"folder": {"path": "d", "allow_outside_root": false}}, "stages": [[[[1]]], {"x": null}, 1e999]})",
  };
  int i = 0;
  for (const char* s : specs) {
    const std::string text(s);
    write_seed(folder, "spec_" + std::to_string(i++), std::vector<std::uint8_t>(text.begin(), text.end()));
  }
}

}  // namespace sluice::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sluice;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  PipelineDocument doc;
  try {
    doc = parse_pipeline_json(text, "/base");
  } catch (const Error& e) {
    fuzz::check_error(e, "parse_pipeline_json");
    // Messages quote at most 60 characters of a value and 200 of a parser message; the rest is
    // field paths and fixed text. 4 KiB is far above any honest message.
    if (std::string_view(e.what()).size() > 4096) fuzz::finding("message", std::string(e.what()).substr(0, 300));
    return 0;
  }
  // What parses writes back to a spec that parses to the same text.
  const std::string once = to_json(doc);
  try {
    const std::string twice = to_json(parse_pipeline_json(once, "/base"));
    if (twice != once) fuzz::finding("round trip", once + "\n!=\n" + twice);
  } catch (const Error& e) {
    fuzz::finding("round trip", std::string(e.what()) + "\n" + once);
  }
  return 0;
}
