// The JSON pipeline spec's writer (docs/json-spec.md): the canonical document of a pipeline, every
// option written out so that parse_pipeline_json (json_spec.cpp) gives the same spec back, and a
// running pipeline's Stats as JSON for the C API and the Python module.
#include <nlohmann/json.hpp>

#include "sluice/pipeline/json_spec.hpp"

namespace sluice {

namespace {

using nlohmann::ordered_json;

const char* name_of(Filter f) { return f == Filter::kArea ? "area" : "bilinear"; }

void write_extent(ordered_json& j, int width, int height) {
  if (width == height) {
    j["size"] = width;
  } else {
    j["width"] = width;
    j["height"] = height;
  }
}

void write_resize(ordered_json& j, const ResizeOptions& r) {
  j["filter"] = name_of(r.filter);
  j["antialias"] = r.antialias;
}

void write_seed(ordered_json& j, const std::optional<std::uint64_t>& seed) {
  if (seed) j["seed"] = *seed;
}

struct StageWriter {
  ordered_json operator()(const spec::Read& s) const { return {{"max_file_size", s.options.max_file_size}}; }
  ordered_json operator()(const spec::Cache& s) const {
    if (const auto* m = std::get_if<MemoryCache>(&s.store)) return {{"memory", {{"max_bytes", m->max_bytes}}}};
    const auto& d = std::get<DiskCache>(s.store);
    return {{"disk", {{"path", d.path}, {"max_bytes", d.max_bytes}}}};
  }
  ordered_json operator()(const spec::DecodeJpeg& s) const {
    const DecodeOptions& d = s.options;
    return {{"color", d.color == Color::kGrey ? "grey" : "rgb"}, {"fast_dct", d.fast_dct},
            {"fast_upsample", d.fast_upsample}, {"dct_scaling", d.dct_scaling}, {"roi", d.roi},
            {"accept_warnings", d.accept_warnings}, {"max_image_pixels", d.max_image_pixels}};
  }
  ordered_json operator()(const spec::ResizeShorter& s) const {
    ordered_json j{{"size", s.size}};
    write_resize(j, s.options);
    return j;
  }
  ordered_json operator()(const spec::Resize& s) const {
    ordered_json j = ordered_json::object();
    write_extent(j, s.width, s.height);
    write_resize(j, s.options);
    return j;
  }
  ordered_json operator()(const spec::CenterCrop& s) const {
    ordered_json j = ordered_json::object();
    write_extent(j, s.width, s.height);
    return j;
  }
  ordered_json operator()(const spec::RandomResizedCrop& s) const {
    ordered_json j = ordered_json::object();
    write_extent(j, s.width, s.height);
    j["scale"] = {s.options.scale_min, s.options.scale_max};
    j["ratio"] = {s.options.ratio_min, s.options.ratio_max};
    write_resize(j, s.options.resize);
    write_seed(j, s.options.seed);
    return j;
  }
  ordered_json operator()(const spec::RandomCrop& s) const {
    ordered_json j = ordered_json::object();
    write_extent(j, s.width, s.height);
    j["padding"] = s.options.padding;
    j["fill"] = s.options.fill;
    write_seed(j, s.options.seed);
    return j;
  }
  ordered_json operator()(const spec::FlipHorizontal& s) const {
    ordered_json j{{"probability", s.probability}};
    write_seed(j, s.options.seed);
    return j;
  }
  ordered_json operator()(const spec::Normalize& s) const {
    const NormalizeOptions& n = s.options;
    return {{"mean", n.mean}, {"std", n.std}, {"layout", n.layout == Layout::kNCHW ? "nchw" : "nhwc"},
            {"dtype", std::string(to_string(n.dtype))}};
  }
  ordered_json operator()(const spec::Shuffle& s) const {
    ordered_json j{{"buffer", s.buffer}};
    write_seed(j, s.options.seed);
    return j;
  }
  ordered_json operator()(const spec::Batch& s) const { return {{"size", s.size}, {"drop_last", s.options.drop_last}}; }
  ordered_json operator()(const spec::Prefetch& s) const { return {{"depth", s.depth}}; }
  ordered_json operator()(const spec::ToDevice& s) const {
    return {{"device", to_string(s.device)}, {"normalize_on_device", s.options.normalize_on_device},
            {"stage_through_ring", s.options.stage_through_ring}};
  }
};

ordered_json write_source(const spec::Source& source) {
  if (const auto* f = std::get_if<spec::Folder>(&source)) return {{"folder", f->path}};
  if (const auto* l = std::get_if<spec::ListFile>(&source)) {
    if (!l->allow_outside_root) return {{"list", l->path}};
    return {{"list", {{"path", l->path}, {"allow_outside_root", true}}}};
  }
  ordered_json items = ordered_json::array();
  for (const Item& item : std::get<spec::Items>(source).items) {
    items.push_back({{"path", item.path}, {"label", item.label}});
  }
  return {{"items", std::move(items)}};
}

}  // namespace

std::string to_json(const PipelineSpec& spec, const BuildOptions& build, int indent) {
  ordered_json root;
  root["source"] = write_source(spec.source);
  root["shard"] = {{"rank", spec.shard_rank}, {"world", spec.shard_world}};
  if (spec.shuffle_files_seed) root["shuffle_files"] = {{"seed", *spec.shuffle_files_seed}};
  ordered_json stages = ordered_json::array();
  for (const spec::Stage& stage : spec.stages) {
    stages.push_back({{spec::name_of(stage), std::visit(StageWriter{}, stage)}});
  }
  root["stages"] = std::move(stages);
  ordered_json b;
  b["memory_budget"] = build.memory_budget;
  if (build.threads == autotune) {
    b["threads"] = "auto";
  } else {
    b["threads"] = build.threads;
  }
  b["samples_in_flight"] = build.samples_in_flight;
  b["on_error"] = build.on_error == OnError::kSkip ? "skip" : "fail";
  b["seed"] = build.seed;
  b["ordered"] = build.ordered;
  root["build"] = std::move(b);
  return root.dump(indent);
}

std::string stats_to_json(const Stats& stats) {
  ordered_json j;
  ordered_json stages = ordered_json::array();
  for (const auto& s : stats.stages) {
    stages.push_back({{"name", s.name}, {"busy_seconds", s.busy_seconds}, {"items", s.items}, {"bytes", s.bytes}});
  }
  ordered_json skipped = ordered_json::array();
  for (const auto& s : stats.skipped_samples) skipped.push_back({{"path", s.path}, {"cause", s.cause}});
  ordered_json memory = ordered_json::object();
  for (const auto& m : stats.memory) memory[m.use] = {{"used", m.used}, {"peak", m.peak}};
  j["stages"] = std::move(stages);
  j["samples"] = stats.samples;
  j["batches"] = stats.batches;
  j["skipped"] = stats.skipped;
  j["skipped_samples"] = std::move(skipped);
  j["consumer_wait_seconds"] = stats.consumer_wait_seconds;
  j["threads"] = stats.threads;
  j["memory_budget"] = stats.memory_budget;
  j["memory_used"] = stats.memory_used;
  j["memory_peak"] = stats.memory_peak;
  j["memory"] = std::move(memory);
  const CacheStats& c = stats.cache;
  j["cache"] = {{"kind", c.kind}, {"hits", c.hits}, {"misses", c.misses}, {"entries", c.entries},
                {"bytes", c.bytes}, {"dropped", c.dropped}, {"note", c.note}};
  const TuningStats& t = stats.tuning;
  j["tuning"] = {{"samples_in_flight", t.samples_in_flight}, {"prefetch", t.prefetch},
                 {"autotuned", t.autotuned}, {"decisions", t.decisions}};
  return j.dump();
}

}  // namespace sluice
