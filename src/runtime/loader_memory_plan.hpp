// LoaderMemoryPlan: what a pipeline needs at least, computed by build() before any thread starts, so a
// pipeline that cannot run inside its budget fails there, with the numbers, rather than halfway
// through an epoch. Per-worker working memory (the share each worker reserves when it is made) is
// estimated from probed files (their size and JPEG header). An image larger than those takes
// free budget if there is some; else its decode goes in row bands inside the share, and only
// what cannot shrink (a larger file, a progressive image's coefficients) waits while another
// worker's transient memory may come back, or fails that sample (kTooLarge, skippable).
#pragma once

#include <cstdint>
#include <string>

#include "sluice/pipeline/pipeline.hpp"
#include "stages/program/resolved_pipeline.hpp"

namespace sluice::runtime {

struct LoaderMemoryPlan {
  std::uint64_t batch_bytes = 0;      // one ring slot: samples and labels
  int min_slots = 3;                  // prefetch + 2 at the smallest prefetch depth
  stages::WorkspaceShare share;       // per worker: file, decoded image, resampled sample, scratch,
                                      // decoder planes and libjpeg coefficients
  std::uint64_t index_bytes = 0;      // the epoch order's index arrays
  std::uint64_t items_bytes = 0;      // the item table (stages/source/item_table.hpp), held from build()
  std::uint64_t remote_bytes = 0;     // a remote source's transfer buffers (docs/remote.md), held from build()
  std::uint64_t resume_bytes = 0;     // the JPEG resume points kept per item (stages/program/resume_store.hpp)
  int threads = 1;
  int probed = 0;                     // files probed for the estimate
  // Every item in a memory cache, from the probes' mean sizes: decoded images and encoded files.
  std::uint64_t decoded_set_bytes = 0;
  std::uint64_t encoded_set_bytes = 0;

  std::uint64_t workspace_bytes() const { return share.total(); }
  std::uint64_t minimum() const {
    return batch_bytes * static_cast<std::uint64_t>(min_slots) + workspace_bytes() * static_cast<std::uint64_t>(threads) +
           index_bytes + items_bytes + remote_bytes + resume_bytes;
  }
  // "ring 3 x 36.75 MiB + 2 workers x 3.06 MiB + indices 16.0 KiB + items 320.0 KiB + resume points
  // 812.5 KiB = 117.56 MiB"
  std::string explain() const;
};

// min_prefetch: the smallest depth the pipeline may run at (the one set with prefetch(), or 1).
LoaderMemoryPlan plan_memory(const stages::ResolvedPipeline& plan, std::size_t sample_bytes, int threads, int min_prefetch);

// Pipeline::plan_memory: the memory plan of a pipeline as build() would make it (its threads, its
// tuning's depths), by use, without building it.
PipelineMemoryPlan describe_memory(const stages::ResolvedPipeline& plan);

}  // namespace sluice::runtime
