// Single-thread tjDecompress2 over preloaded file bytes: the yardstick the loaders are held to.
#include "decode_limit.hpp"

#include <turbojpeg.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>

namespace sluice::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct TjDeleter {
  void operator()(void* handle) const { tjDestroy(handle); }
};
using TjHandle = std::unique_ptr<void, TjDeleter>;

std::vector<unsigned char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct Preloaded {
  std::vector<unsigned char> bytes;
  int width = 0;
  int height = 0;
};

// Decodes one image into out (sized for the largest). Only tjDecompress2: it parses the header
// itself, and a second parse (tjDecompressHeader3) would add ~6% to a 32x32 decode and lower
// the limit in sluice's favour. The size comes from the preload.
void decode_one(tjhandle tj, const Preloaded& file, std::vector<unsigned char>& out,
                const std::string& path) {
  if (tjDecompress2(tj, file.bytes.data(), static_cast<unsigned long>(file.bytes.size()),
                    out.data(), file.width, 0 /* pitch: packed */, file.height, TJPF_RGB,
                    TJFLAG_FASTDCT) != 0) {
    // Warnings (e.g. a few bytes of trailing garbage) still produce the image; only real errors
    // should stop the benchmark.
    if (tjGetErrorCode(tj) == TJERR_FATAL) {
      throw std::runtime_error(path + ": " + tjGetErrorStr2(tj));
    }
  }
}

}  // namespace

DecodeLimitResult measure_decode_limit(const ImageList& list, const DecodeLimitOptions& options) {
  TjHandle tj(tjInitDecompress());
  if (!tj) throw std::runtime_error(std::string("tjInitDecompress: ") + tjGetErrorStr2(nullptr));

  DecodeLimitResult result;
  std::vector<Preloaded> files;
  files.reserve(list.entries.size());
  for (const ImageEntry& e : list.entries) {
    Preloaded p;
    p.bytes = read_file(e.path);
    int subsampling = 0;
    int colorspace = 0;
    if (tjDecompressHeader3(tj.get(), p.bytes.data(), static_cast<unsigned long>(p.bytes.size()),
                            &p.width, &p.height, &subsampling, &colorspace) != 0) {
      throw std::runtime_error(e.path + ": " + tjGetErrorStr2(tj.get()));
    }
    result.preloaded_bytes += p.bytes.size();
    result.max_pixels = std::max<std::int64_t>(result.max_pixels,
                                               std::int64_t{p.width} * p.height);
    files.push_back(std::move(p));
  }

  // One output buffer for every image: the limit measures decoding, not the allocator.
  std::vector<unsigned char> out(static_cast<std::size_t>(result.max_pixels) * 3);

  const std::size_t warmup = std::min<std::size_t>(files.size(),
                                                   static_cast<std::size_t>(options.warmup_images));
  for (std::size_t i = 0; i < warmup; ++i) {
    decode_one(tj.get(), files[i], out, list.entries[i].path);
  }

  // Whole passes only, so every file weighs the same in the rate whatever the pass count.
  const Clock::time_point start = Clock::now();
  double elapsed = 0;
  do {
    for (std::size_t i = 0; i < files.size(); ++i) {
      decode_one(tj.get(), files[i], out, list.entries[i].path);
    }
    result.images += static_cast<std::int64_t>(files.size());
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < options.min_seconds);

  result.seconds = elapsed;
  result.single_thread_per_sec = static_cast<double>(result.images) / elapsed;
  return result;
}

}  // namespace sluice::bench
