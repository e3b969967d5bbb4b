// The JSON pipeline spec's parser (docs/json-spec.md): text into a PipelineSpec and BuildOptions,
// with messages that name the field by its JSON path (the writer is json_spec_writer.cpp). Only
// shapes, types and obvious ranges are checked here; whether the stages make a runnable pipeline
// stays build()'s question, so the two never disagree.
#include "sluice/pipeline/json_spec.hpp"
#include "sluice/pipeline/launcher.hpp"

#include <algorithm>
#include <cctype>
#include <climits>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"

namespace sluice {

namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

// What a bad value was, short enough for one line of a message.
std::string describe(const json& value) {
  std::string text = value.dump();
  constexpr std::size_t kMax = 60;
  if (text.size() > kMax) {
    std::size_t cut = kMax;
    // Not inside a UTF-8 sequence: messages reach Python, which decodes them strictly.
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    text = text.substr(0, cut) + "...";
  }
  return text;
}

[[noreturn]] void expected(const std::string& path, const std::string& what, const json& got) {
  bad(path + ": expected " + what + ", got " + describe(got));
}

std::string join(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& n : names) text += (text.empty() ? "" : ", ") + n;
  return text;
}

std::int64_t as_integer(const json& v, const std::string& path, std::int64_t min, std::int64_t max,
                        const std::string& what) {
  if (v.is_number_unsigned()) {  // nlohmann reads every non-negative integer as unsigned
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(max) || static_cast<std::int64_t>(u) < min) expected(path, what, v);
    return static_cast<std::int64_t>(u);
  }
  if (!v.is_number_integer()) expected(path, what, v);
  const auto i = v.get<std::int64_t>();
  if (i < min || i > max) expected(path, what, v);
  return i;
}

int as_positive_int(const json& v, const std::string& path) {
  return static_cast<int>(as_integer(v, path, 1, INT_MAX, "a positive integer"));
}

std::uint64_t as_seed(const json& v, const std::string& path) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0) return static_cast<std::uint64_t>(v.get<std::int64_t>());
  expected(path, "a non-negative integer", v);
}

double as_number(const json& v, const std::string& path, double min, double max, const std::string& what) {
  if (!v.is_number()) expected(path, what, v);
  const double d = v.get<double>();
  if (!(d >= min && d <= max)) expected(path, what, v);
  return d;
}

bool as_bool(const json& v, const std::string& path) {
  if (!v.is_boolean()) expected(path, "true or false", v);
  return v.get<bool>();
}

std::string as_string(const json& v, const std::string& path) {
  if (!v.is_string() || v.get_ref<const std::string&>().empty()) expected(path, "a non-empty string", v);
  return v.get<std::string>();
}

// Byte sizes: a number of bytes or a string with a unit ("4GiB", "512MB").
std::uint64_t as_size(const json& v, const std::string& path) {
  constexpr const char* kWhat = "a size (a non-negative integer of bytes or a string like \"4GiB\")";
  if (v.is_string()) {
    if (const auto bytes = parse_size(v.get<std::string>())) return *bytes;
    expected(path, kWhat, v);
  }
  return static_cast<std::uint64_t>(as_integer(v, path, 0, INT64_MAX, kWhat));
}

// One of a few names, case-insensitive.
template <class T>
T as_choice(const json& v, const std::string& path, std::initializer_list<std::pair<const char*, T>> choices) {
  std::vector<std::string> names;
  for (const auto& c : choices) names.emplace_back(c.first);
  const std::string what = "one of " + join(names);
  if (!v.is_string()) expected(path, what, v);
  std::string s = v.get<std::string>();
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const auto& c : choices) {
    if (s == c.first) return c.second;
  }
  expected(path, what, v);
}

DeviceId as_device(const json& v, const std::string& path) {
  constexpr const char* kWhat = "\"host\" or \"cuda:N\"";
  if (!v.is_string()) expected(path, kWhat, v);
  const std::string s = v.get<std::string>();
  if (s == "host") return host();
  if (s == "cuda") return cuda(0);
  if (s.rfind("cuda:", 0) == 0 && s.size() > 5 && s.size() < 15 &&
      std::all_of(s.begin() + 5, s.end(), [](unsigned char c) { return std::isdigit(c) != 0; })) {
    return cuda(std::stoi(s.substr(5)));
  }
  expected(path, kWhat, v);
}

// An object whose keys must all be known; fields are read by key with their full path.
class Object {
 public:
  Object(const json& value, std::string path, std::initializer_list<const char*> known)
      : value_(value), path_(std::move(path)) {
    if (value_.is_null()) return;  // {"read": null} reads as {"read": {}}
    if (!value_.is_object()) expected(path_, "an object", value_);
    for (const auto& [key, unused] : value_.items()) {
      if (std::none_of(known.begin(), known.end(), [&key = key](const char* k) { return key == k; })) {
        std::vector<std::string> names(known.begin(), known.end());
        bad(path_ + ": unknown key \"" + key + "\" (known: " + join(names) + ")");
      }
    }
  }

  const json* find(const char* key) const {
    if (!value_.is_object()) return nullptr;
    const auto it = value_.find(key);
    return it == value_.end() ? nullptr : &*it;
  }
  std::string path(const char* key) const { return path_ + "." + key; }
  const std::string& path() const { return path_; }

  // The field, or the fallback when absent.
  template <class T, class Read>
  T get(const char* key, T fallback, Read read) const {
    const json* v = find(key);
    return v == nullptr ? fallback : read(*v, path(key));
  }
  template <class T, class Read>
  T require(const char* key, const std::string& what, Read read) const {
    const json* v = find(key);
    if (v == nullptr) bad(path(key) + ": missing (expected " + what + ")");
    return read(*v, path(key));
  }
  int positive(const char* key) const { return require<int>(key, "a positive integer", as_positive_int); }
  int positive(const char* key, int fallback) const { return get(key, fallback, as_positive_int); }
  bool flag(const char* key, bool fallback) const { return get(key, fallback, as_bool); }
  std::optional<std::uint64_t> seed(const char* key = "seed") const {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    return as_seed(*v, path(key));
  }

 private:
  const json& value_;
  std::string path_;
};

// "size" (square) or "width" and "height", as the builder's overloads take them.
std::pair<int, int> read_extent(const Object& o) {
  const bool size = o.find("size") != nullptr;
  const bool wh = o.find("width") != nullptr || o.find("height") != nullptr;
  if (size && wh) bad(o.path() + ": give \"size\" or \"width\" and \"height\", not both");
  if (size) {
    const int s = o.positive("size");
    return {s, s};
  }
  if (!wh) bad(o.path("size") + ": missing (expected a positive integer, or \"width\" and \"height\")");
  return {o.positive("width"), o.positive("height")};
}

ResizeOptions read_resize(const Object& o) {
  ResizeOptions r;
  r.filter = o.get("filter", r.filter, [](const json& v, const std::string& p) {
    return as_choice<Filter>(v, p, {{"bilinear", Filter::kBilinear}, {"area", Filter::kArea}});
  });
  r.antialias = o.flag("antialias", r.antialias);
  return r;
}

// [min, max] with 0 < min <= max.
std::pair<double, double> read_range(const json& v, const std::string& path) {
  constexpr const char* kWhat = "[min, max], two positive numbers with min <= max";
  if (!v.is_array() || v.size() != 2 || !v[0].is_number() || !v[1].is_number()) expected(path, kWhat, v);
  const double lo = v[0].get<double>();
  const double hi = v[1].get<double>();
  if (!(lo > 0 && lo <= hi)) expected(path, kWhat, v);
  return {lo, hi};
}

std::vector<float> read_floats(const json& v, const std::string& path, bool positive) {
  const std::string what = positive ? "an array of positive numbers" : "an array of numbers";
  if (!v.is_array()) expected(path, what, v);
  std::vector<float> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string p = path + "[" + std::to_string(i) + "]";
    if (!v[i].is_number()) expected(p, "a number", v[i]);
    const double d = v[i].get<double>();
    if (positive && !(d > 0)) expected(p, "a positive number", v[i]);
    out.push_back(static_cast<float>(d));
  }
  return out;
}

using StageReader = std::function<spec::Stage(const json&, const std::string&)>;

// Every stage of spec::Stage, in its order, with the options it takes.
const std::vector<std::pair<std::string, StageReader>>& stage_readers() {
  static const std::vector<std::pair<std::string, StageReader>> readers{
      {"read", [](const json& v, const std::string& p) -> spec::Stage {
         const Object o(v, p, {"max_file_size"});
         ReadOptions r;
         r.max_file_size = o.get("max_file_size", r.max_file_size, as_size);
         return spec::Read{r};
       }},
      {"cache", [](const json& v, const std::string& p) -> spec::Stage {
         const Object o(v, p, {"memory", "disk"});
         const json* memory = o.find("memory");
         const json* disk = o.find("disk");
         if ((memory == nullptr) == (disk == nullptr)) {
           bad(p + ": expected exactly one of memory, disk (e.g. {\"memory\": {}} or {\"disk\": {\"path\": ...}})");
         }
         if (memory != nullptr) {
           const Object m(*memory, o.path("memory"), {"max_bytes"});
           return spec::Cache{MemoryCache{m.get("max_bytes", std::uint64_t{0}, as_size)}};
         }
         const Object d(*disk, o.path("disk"), {"path", "max_bytes"});
         return spec::Cache{DiskCache{d.require<std::string>("path", "a non-empty string", as_string),
                                      d.get("max_bytes", std::uint64_t{0}, as_size)}};
       }},
      {"decode_jpeg", [](const json& v, const std::string& p) -> spec::Stage {
         const Object o(v, p, {"color", "fast_dct", "fast_upsample", "dct_scaling", "roi", "accept_warnings",
                               "max_image_pixels"});
         DecodeOptions d;
         d.color = o.get("color", d.color, [](const json& c, const std::string& cp) {
           return as_choice<Color>(c, cp, {{"rgb", Color::kRGB}, {"grey", Color::kGrey}, {"gray", Color::kGrey}});
         });
         d.fast_dct = o.flag("fast_dct", d.fast_dct);
         d.fast_upsample = o.flag("fast_upsample", d.fast_upsample);
         d.dct_scaling = o.flag("dct_scaling", d.dct_scaling);
         d.roi = o.flag("roi", d.roi);
         d.accept_warnings = o.flag("accept_warnings", d.accept_warnings);
         d.max_image_pixels = o.get("max_image_pixels", d.max_image_pixels, [](const json& m, const std::string& mp) {
           return static_cast<std::uint64_t>(as_integer(m, mp, 1, INT64_MAX, "a positive integer"));
         });
         return spec::DecodeJpeg{d};
       }},
      {"resize_shorter", [](const json& v, const std::string& p) -> spec::Stage {
         const Object o(v, p, {"size", "filter", "antialias"});
         return spec::ResizeShorter{o.positive("size"), read_resize(o)};
       }},
      {"resize", [](const json& v, const std::string& p) -> spec::Stage {
         const Object o(v, p, {"size", "width", "height", "filter", "antialias"});
         const auto [w, h] = read_extent(o);
         return spec::Resize{w, h, read_resize(o)};
       }},
      {"center_crop", [](const json& v, const std::string& p) -> spec::Stage {
         const Object o(v, p, {"size", "width", "height"});
         const auto [w, h] = read_extent(o);
         return spec::CenterCrop{w, h};
       }},
      {"random_resized_crop", [](const json& v, const std::string& p) -> spec::Stage {
         const Object o(v, p, {"size", "width", "height", "scale", "ratio", "filter", "antialias", "seed"});
         const auto [w, h] = read_extent(o);
         RandomResizedCropOptions r;
         std::tie(r.scale_min, r.scale_max) = o.get("scale", std::pair{r.scale_min, r.scale_max}, read_range);
         std::tie(r.ratio_min, r.ratio_max) = o.get("ratio", std::pair{r.ratio_min, r.ratio_max}, read_range);
         r.resize = read_resize(o);
         r.seed = o.seed();
         return spec::RandomResizedCrop{w, h, r};
       }},
      {"random_crop", [](const json& v, const std::string& p) -> spec::Stage {
         const Object o(v, p, {"size", "width", "height", "padding", "fill", "seed"});
         const auto [w, h] = read_extent(o);
         RandomCropOptions r;
         r.padding = o.get("padding", r.padding, [](const json& x, const std::string& xp) {
           return static_cast<int>(as_integer(x, xp, 0, INT_MAX, "a non-negative integer"));
         });
         r.fill = o.get("fill", r.fill, [](const json& x, const std::string& xp) {
           return static_cast<std::uint8_t>(as_integer(x, xp, 0, 255, "an integer in [0, 255]"));
         });
         r.seed = o.seed();
         return spec::RandomCrop{w, h, r};
       }},
      {"flip_horizontal", [](const json& v, const std::string& p) -> spec::Stage {
         const Object o(v, p, {"probability", "seed"});
         const double probability = o.get("probability", 0.5, [](const json& x, const std::string& xp) {
           return as_number(x, xp, 0, 1, "a number in [0, 1]");
         });
         return spec::FlipHorizontal{probability, FlipOptions{o.seed()}};
       }},
      {"normalize", [](const json& v, const std::string& p) -> spec::Stage {
         const Object o(v, p, {"mean", "std", "layout", "dtype"});
         NormalizeOptions n;
         n.mean = o.get("mean", n.mean, [](const json& x, const std::string& xp) { return read_floats(x, xp, false); });
         n.std = o.get("std", n.std, [](const json& x, const std::string& xp) { return read_floats(x, xp, true); });
         n.layout = o.get("layout", n.layout, [](const json& x, const std::string& xp) {
           return as_choice<Layout>(x, xp, {{"nchw", Layout::kNCHW}, {"nhwc", Layout::kNHWC}});
         });
         n.dtype = o.get("dtype", n.dtype, [](const json& x, const std::string& xp) {
           return as_choice<DType>(x, xp, {{"u8", DType::kU8}, {"f32", DType::kF32}, {"f16", DType::kF16},
                                           {"bf16", DType::kBF16}});
         });
         return spec::Normalize{n};
       }},
      {"shuffle", [](const json& v, const std::string& p) -> spec::Stage {
         const Object o(v, p, {"buffer", "seed"});
         return spec::Shuffle{o.require<std::int64_t>("buffer", "a positive integer",
                                                      [](const json& x, const std::string& xp) {
                                                        return as_integer(x, xp, 1, INT64_MAX, "a positive integer");
                                                      }),
                              ShuffleOptions{o.seed()}};
       }},
      {"batch", [](const json& v, const std::string& p) -> spec::Stage {
         const Object o(v, p, {"size", "drop_last"});
         return spec::Batch{o.positive("size"), BatchOptions{o.flag("drop_last", false)}};
       }},
      {"prefetch", [](const json& v, const std::string& p) -> spec::Stage {
         const Object o(v, p, {"depth"});
         return spec::Prefetch{o.positive("depth")};
       }},
      {"to_device", [](const json& v, const std::string& p) -> spec::Stage {
         const Object o(v, p, {"device", "normalize_on_device", "stage_through_ring"});
         ToDeviceOptions t;
         t.normalize_on_device = o.flag("normalize_on_device", t.normalize_on_device);
         t.stage_through_ring = o.flag("stage_through_ring", t.stage_through_ring);
         return spec::ToDevice{o.require<DeviceId>("device", "\"host\" or \"cuda:N\"", as_device), t};
       }},
  };
  return readers;
}

spec::Stage read_stage(const json& v, const std::string& path) {
  // {"decode_jpeg": {...}}, or the bare name "read" for a stage with its default options.
  std::string name;
  const json* options = nullptr;
  static const json kNoOptions = nullptr;
  if (v.is_string()) {
    name = v.get<std::string>();
    options = &kNoOptions;
  } else if (v.is_object() && v.size() == 1) {
    name = v.begin().key();
    options = &*v.begin();
  } else {
    expected(path, "an object with one key, the stage's name (e.g. {\"batch\": {\"size\": 64}})", v);
  }
  std::vector<std::string> known;
  for (const auto& [stage, reader] : stage_readers()) {
    if (stage == name) return reader(*options, path + "." + name);
    known.push_back(stage);
  }
  bad(path + ": unknown stage \"" + name + "\" (known: " + join(known) + ")");
}

// Relative paths in a spec file mean "next to the spec", not "next to whoever runs it".
std::string resolve_path(const std::string& base_dir, const std::string& path) {
  namespace fs = std::filesystem;
  if (base_dir.empty() || fs::path(path).is_absolute()) return path;
  return (fs::path(base_dir) / path).lexically_normal().string();
}

spec::Source read_source(const json* v, const std::string& base_dir) {
  if (v == nullptr) bad("source: missing (expected one of folder, list, items)");
  const Object o(*v, "source", {"folder", "list", "items"});
  if (!v->is_object() || v->size() != 1) {
    bad("source: expected exactly one of folder, list, items, got " + describe(*v));
  }
  const auto resolve = [&base_dir](const std::string& path) { return resolve_path(base_dir, path); };
  if (const json* f = o.find("folder")) return spec::Folder{resolve(as_string(*f, "source.folder"))};
  if (const json* l = o.find("list")) {
    // "FILE", or {"path": FILE, "allow_outside_root": true} for lists whose entries climb out.
    if (!l->is_object()) return spec::ListFile{resolve(as_string(*l, "source.list")), false};
    const Object list(*l, "source.list", {"path", "allow_outside_root"});
    return spec::ListFile{resolve(list.require<std::string>("path", "a non-empty string", as_string)),
                          list.flag("allow_outside_root", false)};
  }
  const json& items = *o.find("items");
  if (!items.is_array()) expected("source.items", "an array of {\"path\": ..., \"label\": ...}", items);
  spec::Items out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const Object item(items[i], "source.items[" + std::to_string(i) + "]", {"path", "label"});
    if (!items[i].is_object()) expected(item.path(), "an object {\"path\": ..., \"label\": ...}", items[i]);
    out.items.push_back(Item{resolve(item.require<std::string>("path", "a non-empty string", as_string)),
                             item.get("label", std::int32_t{0}, [](const json& x, const std::string& xp) {
                               return static_cast<std::int32_t>(
                                   as_integer(x, xp, 0, INT32_MAX, "a non-negative integer"));
                             })});
  }
  return out;
}

BuildOptions read_build(const json* v) {
  BuildOptions b;
  if (v == nullptr) return b;
  const Object o(*v, "build", {"memory_budget", "threads", "samples_in_flight", "on_error", "seed", "ordered"});
  b.memory_budget = o.get("memory_budget", b.memory_budget, as_size);
  b.threads = o.get("threads", b.threads, [](const json& x, const std::string& xp) {
    if (x.is_string() && x.get<std::string>() == "auto") return autotune;
    return static_cast<int>(as_integer(x, xp, 1, INT_MAX, "a positive integer or \"auto\""));
  });
  b.samples_in_flight = o.get("samples_in_flight", b.samples_in_flight, [](const json& x, const std::string& xp) {
    return static_cast<int>(as_integer(x, xp, 0, INT_MAX, "a non-negative integer (0: the default)"));
  });
  b.on_error = o.get("on_error", b.on_error, [](const json& x, const std::string& xp) {
    return as_choice<OnError>(x, xp, {{"fail", OnError::kFail}, {"skip", OnError::kSkip}});
  });
  b.seed = o.seed().value_or(b.seed);
  b.ordered = o.flag("ordered", b.ordered);
  return b;
}

}  // namespace

PipelineDocument parse_pipeline_json(std::string_view text, const std::string& base_dir) {
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    bad(std::string("not valid JSON: ") + e.what());
  }
  const Object top(root, "spec", {"source", "shard", "shuffle_files", "stages", "build"});
  if (!root.is_object()) expected("spec", "a JSON object with source, stages and build", root);

  PipelineDocument doc;
  doc.spec.source = read_source(top.find("source"), base_dir);
  doc.build = read_build(top.find("build"));
  if (const json* shard = top.find("shard"); shard != nullptr && shard->is_string()) {
    // "launcher": the rank and world mpirun or srun gave this process (launcher.hpp), read now.
    if (shard->get<std::string>() != "launcher") {
      expected("shard", "{\"rank\": R, \"world\": W} or \"launcher\"", *shard);
    }
    const LauncherRank launched = launcher_rank();
    doc.spec.shard_rank = launched.rank;
    doc.spec.shard_world = launched.world;
  } else if (shard != nullptr) {
    const Object o(*shard, "shard", {"rank", "world"});
    doc.spec.shard_world = o.positive("world", 1);
    doc.spec.shard_rank = o.get("rank", 0, [&](const json& x, const std::string& xp) {
      const int last = doc.spec.shard_world - 1;
      return static_cast<int>(
          as_integer(x, xp, 0, last, "an integer in [0, world - 1] = [0, " + std::to_string(last) + "]"));
    });
  }
  if (const json* shuffle = top.find("shuffle_files")) {
    const Object o(*shuffle, "shuffle_files", {"seed"});
    doc.spec.shuffle_files_seed = o.seed().value_or(doc.build.seed);
  }
  const json* stages = top.find("stages");
  if (stages == nullptr) bad("stages: missing (expected an array of stages, e.g. [{\"read\": {}}, ...])");
  if (!stages->is_array()) expected("stages", "an array of stages", *stages);
  for (std::size_t i = 0; i < stages->size(); ++i) {
    spec::Stage stage = read_stage((*stages)[i], "stages[" + std::to_string(i) + "]");
    if (auto* cache = std::get_if<spec::Cache>(&stage)) {
      if (auto* disk = std::get_if<DiskCache>(&cache->store)) disk->path = resolve_path(base_dir, disk->path);
    }
    doc.spec.stages.push_back(std::move(stage));
  }
  return doc;
}

PipelineDocument load_pipeline_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kNotFound, "cannot open the pipeline spec file", path);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(ErrorCode::kIo, "cannot read the pipeline spec file", path);
  try {
    return parse_pipeline_json(text.str(), std::filesystem::path(path).parent_path().string());
  } catch (const Error& e) {
    throw Error(e.code(), e.cause(), path);  // "train.json: stages[2]...: expected ..."
  }
}

}  // namespace sluice
