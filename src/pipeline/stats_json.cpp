// The statistics' JSON schema (stats_json.hpp, docs/stats.md): the fields of sluice::Stats in
// snake_case, in their declaration order, plus the cache's hit rate.
#include "pipeline/stats_json.hpp"

#include "pipeline/json_text.hpp"
#include "sluice/pipeline/json_spec.hpp"

namespace sluice {

nlohmann::ordered_json stats_json(const Stats& stats) {
  using nlohmann::ordered_json;
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
  const std::int64_t lookups = c.hits + c.misses;
  j["cache"] = {{"kind", c.kind},       {"hits", c.hits},
                {"misses", c.misses},   {"entries", c.entries},
                {"bytes", c.bytes},     {"dropped", c.dropped},
                {"note", c.note},
                {"hit_rate", lookups > 0 ? static_cast<double>(c.hits) / static_cast<double>(lookups) : 0.0}};
  const TuningStats& t = stats.tuning;
  j["tuning"] = {{"samples_in_flight", t.samples_in_flight}, {"prefetch", t.prefetch},
                 {"autotuned", t.autotuned}, {"decisions", t.decisions}};
  ordered_json sources = ordered_json::array();
  for (const SourceStats& src : stats.sources) {
    ordered_json retries = ordered_json::object();
    for (const auto& [cause, n] : src.retries) retries[cause] = n;
    sources.push_back({{"source", src.source},
                       {"requests", src.requests},
                       {"bytes", src.bytes},
                       {"retries", std::move(retries)},
                       {"network_wait_seconds", src.network_wait_seconds},
                       {"cache_hits", src.cache_hits},
                       {"cache_misses", src.cache_misses},
                       {"failures", src.failures}});
  }
  j["sources"] = std::move(sources);
  return j;
}

std::string stats_to_json(const Stats& stats) { return dump_json(stats_json(stats)); }

}  // namespace sluice
