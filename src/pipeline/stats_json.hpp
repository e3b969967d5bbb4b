// A running pipeline's statistics as JSON: the one schema (docs/stats.md) that the C API
// (sluice_loader_stats_json), Python (Pipeline.stats()) and the CLI (`bench --json`, which adds
// the run's own keys beside these) all write. Write it out with dump_json (json_text.hpp), which
// keeps paths that are not UTF-8.
#pragma once

#include <nlohmann/json.hpp>

#include "sluice/pipeline/stats.hpp"

namespace sluice {

nlohmann::ordered_json stats_json(const Stats& stats);

}  // namespace sluice
