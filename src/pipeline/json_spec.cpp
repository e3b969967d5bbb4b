// The JSON pipeline spec's parser (docs/json-spec.md): text into a PipelineSpec and BuildOptions,
// with messages that name the field by its JSON path (the writer is json_spec_writer.cpp); each
// stage's options are read by its descriptor (descriptors/, stage_registry.hpp). Only
// shapes, types and obvious ranges are checked here; whether the stages make a runnable pipeline
// stays build()'s question, so the two never disagree.
#include "sluice/pipeline/json_spec.hpp"
#include "sluice/pipeline/launcher.hpp"

#include <climits>
#include <filesystem>

#include "sluice/detail/core/binary_io.hpp"
#include "sluice/detail/core/numbers.hpp"
#include "pipeline/json_limits.hpp"
#include "pipeline/stage_json.hpp"
#include "pipeline/stage_registry.hpp"
#include "sluice/core/error.hpp"
#include "sluice/pipeline/presets.hpp"

namespace sluice {

namespace {

using namespace json_fields;  // the field readers, shared with the stages' descriptors

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
  if (const schema::StageDescriptor* d = schema::find_stage(name)) return d->json->read(*options, path + "." + name);
  std::vector<std::string> known;
  for (const schema::StageDescriptor* d : schema::stage_descriptors()) known.emplace_back(d->name);
  bad(path + ": unknown stage \"" + name + "\" (known: " + join(known) + ")");
}

// {"preset": "cifar10_train"} or {"preset": {"name": "imagenet_eval", "size": 224, "dtype": "f16",
// "layout": "nhwc"}}: a standard transform's stages (sluice/pipeline/presets.hpp), expanded here,
// so the canonical document (to_json) lists the stages themselves.
std::vector<spec::Stage> read_preset(const json& v, const std::string& path) {
  static const json kNoOptions = json::object();
  const json& options = v.is_string() ? kNoOptions : v;  // both lvalues: no temporary for Object to outlive
  const Object o(options, path, {"name", "size", "dtype", "layout"});
  if (!v.is_string() && !v.is_object()) expected(path, "a preset's name or {\"name\": ..., \"size\": ...}", v);
  const std::string name = v.is_string() ? v.get<std::string>() : o.require<std::string>("name", "a preset's name", as_string);
  const presets::PresetEntry* entry = nullptr;
  try {
    entry = &presets::find(name);
  } catch (const Error& e) {
    bad(path + (v.is_string() ? "" : ".name") + ": " + e.cause());
  }
  int size = 0;
  if (entry->takes_size) {
    size = o.require<int>("size", "a positive integer", [](const json& x, const std::string& xp) {
      // The presets' own bound (presets.cpp): size * 256 / 224 must fit an int.
      return static_cast<int>(as_integer(x, xp, 1, 65536, "an integer in [1, 65536]"));
    });
  } else if (o.find("size") != nullptr) {
    bad(o.path("size") + ": " + name + " has its data set's size and takes none");
  }
  presets::Output out;
  out.layout = o.get("layout", out.layout, [](const json& x, const std::string& xp) {
    return as_choice<Layout>(x, xp, {{"nchw", Layout::kNCHW}, {"nhwc", Layout::kNHWC}});
  });
  out.dtype = o.get("dtype", out.dtype, [](const json& x, const std::string& xp) {
    return as_choice<DType>(x, xp, {{"u8", DType::kU8}, {"f32", DType::kF32}, {"f16", DType::kF16}, {"bf16", DType::kBF16}});
  });
  return entry->make(size, out).stages;
}

// Relative paths in a spec file mean "next to the spec", not "next to whoever runs it"; a URL
// (s3://, http://, https://) is no path.
std::string resolve_path(const std::string& base_dir, const std::string& path) {
  namespace fs = std::filesystem;
  const bool url = path.starts_with("s3://") || path.starts_with("http://") || path.starts_with("https://");
  if (base_dir.empty() || url || fs::path(path).is_absolute()) return path;
  return (fs::path(base_dir) / path).lexically_normal().string();
}

// {"cache_dir": DIR, "cache_limit": SIZE, "anonymous": BOOL, "timeout_s": S, "retries": N}.
RemoteOptions read_remote(const json& v, const std::string& where, const std::string& base_dir) {
  const Object o(v, where, {"cache_dir", "cache_limit", "anonymous", "timeout_s", "retries"});
  RemoteOptions r;
  if (const json* dir = o.find("cache_dir")) r.cache_dir = resolve_path(base_dir, as_string(*dir, o.path("cache_dir")));
  r.cache_limit = o.get("cache_limit", r.cache_limit, as_size);
  r.anonymous = o.flag("anonymous", r.anonymous);
  r.timeout_s = o.get("timeout_s", r.timeout_s, [](const json& x, const std::string& xp) {
    return as_number(x, xp, 0.5, 3600, "seconds from 0.5 to 3600");
  });
  r.retries = o.get("retries", r.retries, [](const json& x, const std::string& xp) {
    return static_cast<int>(as_integer(x, xp, 0, 100, "an integer from 0 to 100"));
  });
  return r;
}

// "PATTERN", ["PATTERN", ...], or {"path": PATTERN or [...], "index": "beside_shard" | "memory",
// "shard_by": "shards" | "samples", "remote": {...}}. Patterns may be URLs (docs/remote.md).
spec::Shards read_shards(const json& v, const std::string& base_dir) {
  spec::Shards out;
  const json* patterns = &v;
  std::string where = "source.shards";
  if (v.is_object()) {
    const Object o(v, where, {"path", "index", "shard_by", "remote"});
    if (const json* remote = o.find("remote")) out.remote = read_remote(*remote, o.path("remote"), base_dir);
    patterns = o.find("path");
    if (patterns == nullptr) bad("source.shards.path: missing (expected a shard pattern or an array of them)");
    where = o.path("path");
    out.index = o.get("index", out.index, [](const json& x, const std::string& xp) {
      return as_choice<ShardIndex>(x, xp, {{"beside_shard", ShardIndex::kBesideShard}, {"memory", ShardIndex::kMemoryOnly}});
    });
    out.shard_by = o.get("shard_by", out.shard_by, [](const json& x, const std::string& xp) {
      return as_choice<ShardBy>(x, xp, {{"shards", ShardBy::kShards}, {"samples", ShardBy::kSamples}});
    });
  }
  const std::string what = "a shard pattern (\"train-{000000..000146}.tar\", \"shards/*.tar\") or an array of them";
  if (patterns->is_string()) {
    out.patterns.push_back(resolve_path(base_dir, as_string(*patterns, where)));
  } else if (patterns->is_array() && !patterns->empty()) {
    for (std::size_t i = 0; i < patterns->size(); ++i) {
      out.patterns.push_back(resolve_path(base_dir, as_string((*patterns)[i], where + "[" + std::to_string(i) + "]")));
    }
  } else {
    expected(where, what, *patterns);
  }
  return out;
}

spec::Source read_source(const json* v, const std::string& base_dir) {
  if (v == nullptr) bad("source: missing (expected one of folder, list, items, shards)");
  const Object o(*v, "source", {"folder", "list", "items", "shards"});
  if (!v->is_object() || v->size() != 1) {
    bad("source: expected exactly one of folder, list, items, shards, got " + describe(*v));
  }
  const auto resolve = [&base_dir](const std::string& path) { return resolve_path(base_dir, path); };
  if (const json* s = o.find("shards")) return read_shards(*s, base_dir);
  if (const json* f = o.find("folder")) {
    // "DIR", or {"path": DIR, "allow_outside_root": true} for folders whose symlinks leave it,
    // "allow_empty_classes": true to keep class folders without images.
    if (!f->is_object()) return spec::Folder{resolve(as_string(*f, "source.folder")), false};
    const Object folder(*f, "source.folder", {"path", "allow_outside_root", "allow_empty_classes"});
    return spec::Folder{resolve(folder.require<std::string>("path", "a non-empty string", as_string)),
                        folder.flag("allow_outside_root", false), folder.flag("allow_empty_classes", false)};
  }
  if (const json* l = o.find("list")) {
    // "FILE", or {"path": FILE, "allow_outside_root": true} for lists whose entries climb out,
    // "remote": {...} for a list or entries named by URL (docs/remote.md).
    if (!l->is_object()) return spec::ListFile{resolve(as_string(*l, "source.list")), false, {}};
    const Object list(*l, "source.list", {"path", "allow_outside_root", "remote"});
    spec::ListFile out{resolve(list.require<std::string>("path", "a non-empty string", as_string)),
                       list.flag("allow_outside_root", false), {}};
    if (const json* remote = list.find("remote")) out.remote = read_remote(*remote, list.path("remote"), base_dir);
    return out;
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
    return static_cast<int>(as_integer(x, xp, 1, core::max_threads(),
                                       "an integer from 1 to " + std::to_string(core::max_threads()) +
                                           " (4 x the hardware threads, at least 1024) or \"auto\""));
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
  json_limits::check_text(text);  // size, nesting depth and string lengths, before parsing
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for a number past double's range ("1e999": json_spec_fuzzer).
    bad("not valid JSON: " + json_limits::clip(e.what(), 200));
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
    const json& element = (*stages)[i];
    if (element.is_object() && element.size() == 1 && element.begin().key() == "preset") {
      for (spec::Stage& s : read_preset(*element.begin(), "stages[" + std::to_string(i) + "].preset")) {
        doc.spec.stages.push_back(std::move(s));
      }
      continue;
    }
    spec::Stage stage = read_stage(element, "stages[" + std::to_string(i) + "]");
    if (auto* cache = std::get_if<spec::Cache>(&stage)) {
      if (auto* disk = std::get_if<DiskCache>(&cache->store)) disk->path = resolve_path(base_dir, disk->path);
    }
    doc.spec.stages.push_back(std::move(stage));
  }
  return doc;
}

PipelineDocument load_pipeline_json(const std::string& path) {
  // A regular file under the spec's bound, through the one reader of whole files: a FIFO is
  // refused without blocking, a device never read, a file that grows stopped at the bound.
  const std::string text = core::read_regular_text(path, json_limits::kMaxSpecBytes, "pipeline spec");
  try {
    return parse_pipeline_json(text, std::filesystem::path(path).parent_path().string());
  } catch (const Error& e) {
    throw Error(e.code(), e.cause(), path);  // "train.json: stages[2]...: expected ..."
  }
}

}  // namespace sluice
