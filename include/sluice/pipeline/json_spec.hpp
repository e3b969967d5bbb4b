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

#include <cstdint>
#include <optional>
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

// What a program that loads a spec may set over it: the C API's sluice_loader_options_t and
// Python's keyword arguments (threads, memory_budget, cuda_stream, shard) go through this one
// place. An option left empty keeps the spec's value.
struct DocumentOverrides {
  std::optional<int> threads;                // a positive count or sluice::autotune
  std::optional<std::uint64_t> memory_budget;  // bytes; 0: no limit
  void* cuda_stream = nullptr;               // a cudaStream_t every to_device stage hands batches to
  std::optional<int> shard_rank;             // with shard_world: this process's part of the data
  std::optional<int> shard_world;
};

// Applies `overrides` to `doc`. Throws sluice::Error(kInvalidArgument) for a thread count below 1
// (other than autotune) or a shard outside 0 <= rank < world, naming the option.
void apply_overrides(PipelineDocument& doc, const DocumentOverrides& overrides);

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

// A running pipeline's statistics as one JSON object on one line (the fields of Stats, snake_case;
// the schema is docs/stats.md), as the C API, Python and `sluice bench --json` write them. A path
// that is not valid UTF-8 keeps its bytes: each stray byte XX is written as \udcXX.
std::string stats_to_json(const Stats& stats);

}  // namespace sluice
