// What a running pipeline reports: per-stage busy time, items and bytes, skips, and waits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sluice {

struct StageStats {
  std::string name;            // "read", "decode_jpeg", "transform", "normalize"
  double busy_seconds = 0;     // summed over worker threads
  std::int64_t items = 0;
  std::int64_t bytes = 0;      // bytes the stage produced
};

struct SkippedSample {
  std::string path;
  std::string cause;
};

struct Stats {
  std::vector<StageStats> stages;
  std::int64_t samples = 0;             // samples written into batches
  std::int64_t batches = 0;             // batches handed to the consumer
  std::int64_t skipped = 0;             // bad samples replaced under OnError::kSkip
  std::vector<SkippedSample> skipped_samples;  // each distinct bad path once, first cause
  double consumer_wait_seconds = 0;     // time the consumer blocked waiting for a batch
  int threads = 0;                      // worker threads in use
};

}  // namespace sluice
