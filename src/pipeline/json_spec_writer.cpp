// The JSON pipeline spec's writer (docs/json-spec.md): the canonical document of a pipeline, every
// option written out so that parse_pipeline_json (json_spec.cpp) gives the same spec back, and a
// running pipeline's Stats as JSON for the C API and the Python module. Each stage's options are
// written by its descriptor (descriptors/, stage_registry.hpp).
#include "sluice/pipeline/json_spec.hpp"

#include "pipeline/stage_json.hpp"
#include "pipeline/stage_registry.hpp"

namespace sluice {

namespace {

using nlohmann::ordered_json;

ordered_json write_source(const spec::Source& source) {
  if (const auto* f = std::get_if<spec::Folder>(&source)) {
    if (!f->allow_outside_root) return {{"folder", f->path}};
    return {{"folder", {{"path", f->path}, {"allow_outside_root", true}}}};
  }
  if (const auto* l = std::get_if<spec::ListFile>(&source)) {
    if (!l->allow_outside_root) return {{"list", l->path}};
    return {{"list", {{"path", l->path}, {"allow_outside_root", true}}}};
  }
  if (const auto* s = std::get_if<spec::Shards>(&source)) {
    ordered_json patterns = ordered_json::array();
    for (const std::string& p : s->patterns) patterns.push_back(p);
    ordered_json shards = {{"path", std::move(patterns)},
                           {"index", s->index == ShardIndex::kBesideShard ? "beside_shard" : "memory"}};
    const RemoteOptions& r = s->remote;
    const RemoteOptions defaults;
    if (!r.cache_dir.empty() || r.cache_limit != defaults.cache_limit || r.anonymous != defaults.anonymous ||
        r.timeout_s != defaults.timeout_s || r.retries != defaults.retries) {
      ordered_json remote = {{"cache_limit", r.cache_limit}, {"anonymous", r.anonymous},
                             {"timeout_s", r.timeout_s}, {"retries", r.retries}};
      if (!r.cache_dir.empty()) remote["cache_dir"] = r.cache_dir;
      shards["remote"] = std::move(remote);
    }
    return {{"shards", std::move(shards)}};
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
    const schema::StageDescriptor& d = schema::descriptor_of(stage);
    stages.push_back({{d.name, d.json->write(stage)}});
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
  ordered_json recovered = ordered_json::array();
  for (const auto& r : stats.recovered_samples) recovered.push_back({{"path", r.path}, {"warning", r.warning}});
  ordered_json memory = ordered_json::object();
  for (const auto& m : stats.memory) memory[m.use] = {{"used", m.used}, {"peak", m.peak}};
  j["stages"] = std::move(stages);
  j["samples"] = stats.samples;
  j["batches"] = stats.batches;
  j["skipped"] = stats.skipped;
  j["skip_events"] = stats.skip_events;
  j["skipped_samples"] = std::move(skipped);
  j["recovered"] = stats.recovered;
  j["recovered_samples"] = std::move(recovered);
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
