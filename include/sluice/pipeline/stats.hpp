// What a running pipeline reports: per-stage busy time, items and bytes, skips, and waits.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
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

// A file decoded in spite of libjpeg warnings (DecodeOptions::strict off), as Pillow decodes it.
struct RecoveredSample {
  std::string path;
  std::string warning;  // libjpeg's first, e.g. "Corrupt JPEG data: 5 extraneous bytes before marker 0xdb"
};

// Accounted memory of one use (read buffers, decode buffers, shuffle, cache, batches, pinned).
struct MemoryStats {
  std::string use;
  std::uint64_t used = 0;
  std::uint64_t peak = 0;
};

struct CacheStats {
  std::string kind;          // "memory" or "disk"; empty without a cache
  std::int64_t hits = 0;
  std::int64_t misses = 0;
  std::int64_t entries = 0;
  std::uint64_t bytes = 0;
  std::int64_t dropped = 0;  // corrupt (disk) or evicted for working memory (memory)
  std::string note;          // why a disk cache is read-only or disabled, if it is
};

// What the autotuner (or the fixed settings) run with now.
struct TuningStats {
  int samples_in_flight = 0;  // samples submitted to workers and not finished, at most
  int prefetch = 0;           // batches prepared ahead of the consumer's
  bool autotuned = false;
  std::int64_t decisions = 0; // changes the autotuner made
};

// What a loader fetched over the network from one source (docs/remote.md): one entry per origin
// its data set names ("http://host:port", "https://host", "s3://bucket"), counted by this loader
// alone, build()'s fetch included. Empty for local data.
struct SourceStats {
  std::string source;
  std::int64_t requests = 0;            // HTTP requests sent, retries included
  std::uint64_t bytes = 0;              // body bytes received
  // Retries by cause: "refused", "reset", "timeout", "http_status", "short_body",
  // "etag_changed", "other"; every cause listed, 0 where none.
  std::vector<std::pair<std::string, std::int64_t>> retries;
  double network_wait_seconds = 0;      // time spent in fetches that included this source
  std::int64_t cache_hits = 0;          // copies in the remote cache found current (304)
  std::int64_t cache_misses = 0;        // objects fetched into it
  std::int64_t failures = 0;            // objects given up on (after the retries, or a 403/404)
};

struct Stats {
  std::vector<StageStats> stages;
  std::int64_t samples = 0;             // samples written into batches
  std::int64_t batches = 0;             // batches handed to the consumer
  std::int64_t skipped = 0;             // distinct bad files replaced under OnError::kSkip
  // Replacements made: a file bad in two epochs, or a replacement that was bad too, counts again.
  std::int64_t skip_events = 0;
  std::vector<SkippedSample> skipped_samples;  // each distinct bad path once, first cause
  std::int64_t recovered = 0;           // files decoded despite libjpeg warnings, each counted once
  std::vector<RecoveredSample> recovered_samples;  // the first 1000 of them, with their first warning
  double consumer_wait_seconds = 0;     // time the consumer blocked waiting for a batch
  int threads = 0;                      // worker threads in use
  std::uint64_t memory_budget = 0;      // the limit; 0: none
  std::uint64_t memory_used = 0;        // accounted now
  std::uint64_t memory_peak = 0;        // accounted peak, all uses together
  std::vector<MemoryStats> memory;      // per use
  CacheStats cache;
  TuningStats tuning;
  std::vector<SourceStats> sources;     // per remote source; empty for local data
};

}  // namespace sluice
