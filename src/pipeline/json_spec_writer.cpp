// The JSON pipeline spec's writer (docs/json-spec.md): the canonical document of a pipeline, every
// option written out so that parse_pipeline_json (json_spec.cpp) gives the same spec back. Each
// stage's options are written by its descriptor (descriptors/, stage_registry.hpp). A running
// pipeline's Stats are written by stats_json.cpp.
#include "sluice/pipeline/json_spec.hpp"

#include <optional>

#include "pipeline/json_text.hpp"
#include "pipeline/stage_json.hpp"
#include "pipeline/stage_registry.hpp"

namespace sluice {

namespace {

using nlohmann::ordered_json;

// A source's "remote" object, or nothing when every option is the default.
std::optional<ordered_json> write_remote(const RemoteOptions& r) {
  const RemoteOptions defaults;
  if (r.cache_dir.empty() && r.cache_limit == defaults.cache_limit && r.anonymous == defaults.anonymous &&
      r.timeout_s == defaults.timeout_s && r.retries == defaults.retries) {
    return std::nullopt;
  }
  ordered_json remote = {{"cache_limit", r.cache_limit}, {"anonymous", r.anonymous},
                         {"timeout_s", r.timeout_s}, {"retries", r.retries}};
  if (!r.cache_dir.empty()) remote["cache_dir"] = r.cache_dir;
  return remote;
}

ordered_json write_source(const spec::Source& source) {
  if (const auto* f = std::get_if<spec::Folder>(&source)) {
    if (!f->allow_outside_root && !f->allow_empty_classes) return {{"folder", f->path}};
    ordered_json folder = {{"path", f->path}};
    if (f->allow_outside_root) folder["allow_outside_root"] = true;
    if (f->allow_empty_classes) folder["allow_empty_classes"] = true;
    return {{"folder", folder}};
  }
  if (const auto* l = std::get_if<spec::ListFile>(&source)) {
    std::optional<ordered_json> remote = write_remote(l->remote);
    if (!l->allow_outside_root && !remote) return {{"list", l->path}};
    ordered_json list = {{"path", l->path}};
    if (l->allow_outside_root) list["allow_outside_root"] = true;
    if (remote) list["remote"] = std::move(*remote);
    return {{"list", std::move(list)}};
  }
  if (const auto* s = std::get_if<spec::Shards>(&source)) {
    ordered_json patterns = ordered_json::array();
    for (const std::string& p : s->patterns) patterns.push_back(p);
    ordered_json shards = {{"path", std::move(patterns)},
                           {"index", s->index == ShardIndex::kBesideShard ? "beside_shard" : "memory"},
                           {"shard_by", s->shard_by == ShardBy::kShards ? "shards" : "samples"}};
    if (std::optional<ordered_json> remote = write_remote(s->remote)) shards["remote"] = std::move(*remote);
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
  return dump_json(root, indent);  // a list source's paths need not be UTF-8
}

}  // namespace sluice
