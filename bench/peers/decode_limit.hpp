// The decode limit: how fast plain full-size TurboJPEG decoding of the same files runs on one
// core, with the bytes already in memory. A loader that decodes every pixel cannot beat
// threads x this rate, so sluice is judged against it (measured in the same process and run as
// the loaders, so the ratio is not skewed by a noisy, shared machine). PNG files are decoded by
// libspng's whole-image decode to 8-bit RGB instead: the plain C decode of a PNG set.
#pragma once

#include <cstdint>
#include <vector>

#include "image_list.hpp"

namespace sluice::bench {

struct DecodeLimitOptions {
  double min_seconds = 1.0;  // repeat whole passes over the files until at least this long
  int warmup_images = 64;    // decoded first, untimed, after the output buffer's first touch
  // Read each file from disk (open, pread, close: what any loader must do) before decoding it,
  // instead of decoding the preloaded bytes: the ceiling of a plain read-and-decode loop.
  bool read_files = false;
};

struct DecodeLimitResult {
  std::int64_t images = 0;            // decoded in the timed passes
  double seconds = 0;                 // the timed passes: from after the warm-up to the last pass's end
  std::int64_t passes = 0;            // whole passes over the files timed (per thread)
  double single_thread_per_sec = 0;   // images / seconds on one core
  std::uint64_t preloaded_bytes = 0;  // the files held in memory
  std::int64_t max_pixels = 0;        // the largest image, width x height
};

// tjDecompress2 (TJPF_RGB, TJFLAG_FASTDCT, scale 1/1, one tjhandle reused; CMYK files to
// TJPF_CMYK, which TurboJPEG 2.1 cannot convert to RGB) over every file in list order, on the
// calling thread. The clock starts once the output buffer is allocated and touched and the
// warm-up decodes are done, so neither page faults nor cold code count against the rate. Throws
// std::runtime_error naming the file that fails.
DecodeLimitResult measure_decode_limit(const ImageList& list,
                                       const DecodeLimitOptions& options = {});

// The same decode on `threads` threads at once, each over every threads-th file: what the cores
// actually sustain together. On shared or turbo-boosted machines one busy core can run faster
// than two, so this can be well below threads x the single-thread rate; it is reported beside the
// limit, never instead of it.
// With options.read_files, each decode is preceded by reading its file.
DecodeLimitResult measure_parallel_decode(const ImageList& list, int threads,
                                          const DecodeLimitOptions& options = {});

}  // namespace sluice::bench
