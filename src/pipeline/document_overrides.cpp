// apply_overrides (sluice/pipeline/json_spec.hpp): the options the C API and Python set over a
// loaded spec, checked and applied in one place.
#include <string>
#include <variant>

#include "sluice/core/error.hpp"
#include "sluice/pipeline/json_spec.hpp"

namespace sluice {

void apply_overrides(PipelineDocument& doc, const DocumentOverrides& o) {
  if (o.threads) {
    if (*o.threads != autotune && *o.threads < 1) {
      throw Error(ErrorCode::kInvalidArgument,
                  "threads: expected a positive count or auto, got " + std::to_string(*o.threads));
    }
    doc.build.threads = *o.threads;
  }
  if (o.memory_budget) doc.build.memory_budget = *o.memory_budget;
  if (o.cuda_stream != nullptr) {
    for (spec::Stage& stage : doc.spec.stages) {
      if (auto* t = std::get_if<spec::ToDevice>(&stage)) t->options.stream = o.cuda_stream;
    }
  }
  if (o.shard_rank.has_value() != o.shard_world.has_value()) {
    throw Error(ErrorCode::kInvalidArgument, "shard: give both the rank and the world size");
  }
  if (o.shard_rank) {
    if (*o.shard_world < 1 || *o.shard_rank < 0 || *o.shard_rank >= *o.shard_world) {
      throw Error(ErrorCode::kInvalidArgument, "shard: expected 0 <= rank < world, got rank " +
                                                   std::to_string(*o.shard_rank) + " of " +
                                                   std::to_string(*o.shard_world));
    }
    doc.spec.shard_rank = *o.shard_rank;
    doc.spec.shard_world = *o.shard_world;
  }
}

}  // namespace sluice
