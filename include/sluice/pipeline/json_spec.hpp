// The JSON pipeline spec: a document that describes any pipeline the builder can make (source,
// shard, file shuffle, every stage with every option, and the build options), for programs that
// do not write C++ (the C API, Python, `sluice bench --spec`). The schema is in docs/json-spec.md.
//
//   const sluice::PipelineDocument doc = sluice::load_pipeline_json("train.json");
//   sluice::Loader loader = sluice::Pipeline(doc.spec).build(doc.build);
//
// The parser checks types, shapes and obvious ranges and names the bad field by its JSON path
// (`stages[3].random_resized_crop.size: expected a positive integer, got "big"`); whether the
// stages make a pipeline that can run is still build()'s question. The JSON library stays out of
// this header: documents come in and go out as text.
#pragma once

#include <string>
#include <string_view>

#include "sluice/pipeline/options.hpp"
#include "sluice/pipeline/spec.hpp"
#include "sluice/pipeline/stats.hpp"

namespace sluice {

struct PipelineDocument {
  PipelineSpec spec;
  BuildOptions build;
};

// Parses a spec given as JSON text. Relative paths in it (source folder or list, item paths, a
// disk cache's path) resolve against `base_dir` when it is not empty, else they stay relative
// (to the process's working directory). Throws sluice::Error(kInvalidArgument) naming the field.
PipelineDocument parse_pipeline_json(std::string_view text, const std::string& base_dir = {});

// Reads and parses a spec file; its relative paths resolve against the file's own folder, so a
// spec can sit next to its data set. Throws kNotFound when the file cannot be opened.
PipelineDocument load_pipeline_json(const std::string& path);

// The canonical JSON text of a pipeline: every option written out, so parse_pipeline_json gives
// the same spec and options back. ToDeviceOptions::stream (a pointer) has no JSON form and is
// not written. `indent` < 0 gives one line.
std::string to_json(const PipelineSpec& spec, const BuildOptions& build, int indent = 2);
inline std::string to_json(const PipelineDocument& doc, int indent = 2) {
  return to_json(doc.spec, doc.build, indent);
}

// A running pipeline's statistics as one JSON object (the fields of Stats, snake_case), for the
// C API and the Python module.
std::string stats_to_json(const Stats& stats);

}  // namespace sluice
