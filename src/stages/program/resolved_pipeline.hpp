// build()'s first half: checks a PipelineSpec against its stages' descriptors (ordering rules and
// checks, pipeline/stage_registry.hpp), loads the data set, and turns both into a ResolvedPipeline the
// runtime can execute. Every configuration error is found here, before any thread starts, with a
// message that names the stage and says what to change.
#pragma once

#include <cstdint>
#include <memory>

#include "sluice/pipeline/options.hpp"
#include "sluice/pipeline/spec.hpp"
#include "stages/augment/batch_mix.hpp"
#include "stages/source/epoch_order.hpp"
#include "stages/program/sample_program.hpp"
#include "stages/source/source.hpp"

namespace sluice::stages {

namespace remote {
class SourceCounters;
}  // namespace remote

struct ResolvedPipeline {
  Dataset dataset;
  EpochOrderOptions order;
  int batch_size = 0;
  bool drop_last = false;
  int prefetch = 2;            // batches prepared ahead of the one the consumer holds
  bool prefetch_set = false;   // prefetch() was called: the autotuner leaves the depth alone
  SampleProgramConfig program;  // the runtime builds the program once its caches exist
  std::optional<spec::Cache> cache;
  std::optional<spec::ToDevice> to_device;
  NormalizeOptions device_normalize;  // with to_device({.normalize_on_device}): done on the device
  BuildOptions options;
  std::uint64_t skip_key = 0;  // random stream that picks replacements for bad samples
  BatchMixPlan batch_mix;      // mixup() / cutmix(): mixed on the host once a batch is complete
  // What the source fetched over the network, per origin (build()'s fetch and every epoch's):
  // Loader::stats()'s "sources". Null for local data.
  std::shared_ptr<remote::SourceCounters> remote_counters;
  // The transfers' buffers (remote_buffer_bytes) when the source names a URL: MemoryUse::kRemote.
  std::uint64_t remote_bytes = 0;
};

// Throws sluice::Error(kInvalidArgument, kNotFound, ...) for a pipeline that cannot run. Every
// file the plan and its program open goes through `file_ops` (null: the real file system).
ResolvedPipeline resolve_pipeline(const PipelineSpec& spec, const BuildOptions& options, FileOps* file_ops = nullptr);

}  // namespace sluice::stages
