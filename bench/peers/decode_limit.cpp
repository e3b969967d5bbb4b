// Single-thread tjDecompress2 over preloaded file bytes: the yardstick the loaders are held to.
// PNG files (the formats benchmark's sets) through libspng's whole-image decode to 8-bit RGB instead.
#include "decode_limit.hpp"

#include <fcntl.h>
#include <spng.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

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
  // TurboJPEG 2.1 has no CMYK -> RGB conversion (tjDecompress2 fails with "Unsupported color
  // conversion request"), so CMYK and YCCK files are decoded to TJPF_CMYK. The limit then skips
  // the conversion to RGB a loader must still do: a few operations per pixel, on a handful of
  // files in an ImageNet-like set, in the limit's favour.
  int pixel_format = TJPF_RGB;
  bool png = false;  // decoded by libspng
};

bool is_png(const std::vector<unsigned char>& bytes) {
  static constexpr unsigned char kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  return bytes.size() >= 8 && std::equal(kSignature, kSignature + 8, bytes.begin());
}

struct SpngDeleter {
  void operator()(spng_ctx* ctx) const { spng_ctx_free(ctx); }
};
using SpngContext = std::unique_ptr<spng_ctx, SpngDeleter>;

// A PNG as a plain C loader decodes it with libspng: a context, the whole image to 8-bit RGB
// (every colour type and depth converted by libspng, CRCs and the zlib stream checked).
void decode_png(const unsigned char* bytes, std::size_t size, const Preloaded& file, std::vector<unsigned char>& out,
                const std::string& path) {
  const SpngContext ctx(spng_ctx_new(0));
  int code = ctx ? spng_set_png_buffer(ctx.get(), bytes, size) : SPNG_EMEM;
  if (code == 0) {
    code = spng_decode_image(ctx.get(), out.data(), static_cast<std::size_t>(file.width) * file.height * 3,
                             SPNG_FMT_RGB8, 0);
  }
  if (code != 0) throw std::runtime_error(path + ": " + spng_strerror(code));
}

constexpr int kMaxBytesPerPixel = 4;  // TJPF_CMYK

// Decodes one image into out (sized for the largest). Only tjDecompress2: it parses the header
// itself, and a second parse (tjDecompressHeader3) would add ~6% to a 32x32 decode and lower
// the limit in sluice's favour. The size comes from the preload.
void decode_one(tjhandle tj, const unsigned char* bytes, std::size_t size, const Preloaded& file,
                std::vector<unsigned char>& out, const std::string& path) {
  if (file.png) return decode_png(bytes, size, file, out, path);
  if (tjDecompress2(tj, bytes, static_cast<unsigned long>(size), out.data(), file.width, 0 /* pitch: packed */,
                    file.height, file.pixel_format, TJFLAG_FASTDCT) != 0) {
    // Warnings (e.g. a few bytes of trailing garbage) still produce the image; only real errors
    // should stop the benchmark.
    if (tjGetErrorCode(tj) == TJERR_FATAL) {
      throw std::runtime_error(path + ": " + tjGetErrorStr2(tj));
    }
  }
}

// Reads the file afresh into `bytes` (sized past the largest file): one open, one pread, one
// close, as a minimal C loader reads. Returns the byte count.
std::size_t read_again(const std::string& path, std::vector<unsigned char>& bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path);
  const ssize_t n = ::pread(fd, bytes.data(), bytes.size(), 0);
  ::close(fd);
  if (n <= 0) throw std::runtime_error("cannot read " + path);
  return static_cast<std::size_t>(n);
}

}  // namespace

namespace {

std::vector<Preloaded> preload(const ImageList& list, DecodeLimitResult& result) {
  TjHandle tj(tjInitDecompress());
  if (!tj) throw std::runtime_error(std::string("tjInitDecompress: ") + tjGetErrorStr2(nullptr));
  std::vector<Preloaded> files;
  files.reserve(list.entries.size());
  for (const ImageEntry& e : list.entries) {
    Preloaded p;
    p.bytes = read_file(e.path);
    int subsampling = 0;
    int colorspace = 0;
    if (is_png(p.bytes)) {
      const SpngContext ctx(spng_ctx_new(0));
      spng_ihdr ihdr{};
      const int code = ctx ? spng_set_png_buffer(ctx.get(), p.bytes.data(), p.bytes.size()) : SPNG_EMEM;
      if (code != 0 || spng_get_ihdr(ctx.get(), &ihdr) != 0) throw std::runtime_error(e.path + ": not a readable PNG");
      p.png = true;
      p.width = static_cast<int>(ihdr.width);
      p.height = static_cast<int>(ihdr.height);
    } else if (tjDecompressHeader3(tj.get(), p.bytes.data(), static_cast<unsigned long>(p.bytes.size()),
                            &p.width, &p.height, &subsampling, &colorspace) != 0) {
      throw std::runtime_error(e.path + ": " + tjGetErrorStr2(tj.get()));
    }
    if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) p.pixel_format = TJPF_CMYK;
    result.preloaded_bytes += p.bytes.size();
    result.max_pixels = std::max<std::int64_t>(result.max_pixels,
                                               std::int64_t{p.width} * p.height);
    files.push_back(std::move(p));
  }
  return files;
}

// Whole passes over files[first], files[first + step], ... until more() says stop; returns the
// images decoded and counts the passes. warmed() runs once the buffers are touched and the
// warm-up decodes are done, before the first timed pass: the caller starts its clock there.
std::int64_t decode_passes(const ImageList& list, const std::vector<Preloaded>& files, std::size_t first,
                           std::size_t step, std::int64_t max_pixels, const DecodeLimitOptions& options,
                           const std::function<void()>& warmed, const std::function<bool()>& more,
                           std::int64_t& passes) {
  TjHandle tj(tjInitDecompress());
  if (!tj) throw std::runtime_error(std::string("tjInitDecompress: ") + tjGetErrorStr2(nullptr));
  // One output buffer for every image: the limit measures decoding, not the allocator. The same
  // for the bytes read afresh (options.read_files). Both are zero-filled here, so every page is
  // faulted in before the clock starts.
  std::vector<unsigned char> out(static_cast<std::size_t>(max_pixels) * kMaxBytesPerPixel);
  std::size_t largest_file = 0;
  for (const Preloaded& f : files) largest_file = std::max(largest_file, f.bytes.size());
  std::vector<unsigned char> read_buffer(options.read_files ? largest_file + 1 : 0);
  const auto one = [&](std::size_t i) {
    const std::string& path = list.entries[i].path;
    if (!options.read_files) return decode_one(tj.get(), files[i].bytes.data(), files[i].bytes.size(), files[i], out, path);
    const std::size_t size = read_again(path, read_buffer);
    decode_one(tj.get(), read_buffer.data(), size, files[i], out, path);
  };
  const std::size_t warmup = std::min<std::size_t>(files.size(), static_cast<std::size_t>(options.warmup_images));
  for (std::size_t i = first; i < warmup; i += step) one(i);
  warmed();
  std::int64_t images = 0;
  do {  // whole passes only, so every file weighs the same in the rate whatever the pass count
    for (std::size_t i = first; i < files.size(); i += step) {
      one(i);
      ++images;
    }
    ++passes;
  } while (more());
  return images;
}

}  // namespace

DecodeLimitResult measure_decode_limit(const ImageList& list, const DecodeLimitOptions& options) {
  DecodeLimitResult result;
  const std::vector<Preloaded> files = preload(list, result);
  Clock::time_point start;
  const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  result.images = decode_passes(
      list, files, 0, 1, result.max_pixels, options, [&] { start = Clock::now(); },
      [&] { return elapsed() < options.min_seconds; }, result.passes);
  result.seconds = elapsed();
  result.single_thread_per_sec = static_cast<double>(result.images) / result.seconds;
  return result;
}

DecodeLimitResult measure_parallel_decode(const ImageList& list, int threads, const DecodeLimitOptions& options) {
  DecodeLimitResult result;
  const std::vector<Preloaded> files = preload(list, result);
  std::atomic<bool> stop{false};
  std::vector<std::int64_t> images(static_cast<std::size_t>(threads), 0);
  std::vector<std::int64_t> passes(static_cast<std::size_t>(threads), 0);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(threads));
  // Every thread warms up first (or fails); then the clock starts and all decode at once.
  std::atomic<int> waiting{threads};
  std::atomic<bool> go{false};
  const auto warmed = [&] {
    waiting.fetch_sub(1);
    waiting.notify_all();
    go.wait(false);
  };
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      try {
        images[static_cast<std::size_t>(t)] =
            decode_passes(list, files, static_cast<std::size_t>(t), static_cast<std::size_t>(threads),
                          result.max_pixels, options, warmed, [&] { return !stop.load(); },
                          passes[static_cast<std::size_t>(t)]);
      } catch (...) {
        errors[static_cast<std::size_t>(t)] = std::current_exception();
        if (!go.load()) {  // failed before warming up: the others must not wait for it
          waiting.fetch_sub(1);
          waiting.notify_all();
        }
      }
    });
  }
  for (int left = waiting.load(); left > 0; left = waiting.load()) waiting.wait(left);
  const Clock::time_point start = Clock::now();
  go = true;
  go.notify_all();
  while (std::chrono::duration<double>(Clock::now() - start).count() < options.min_seconds) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop = true;
  for (auto& w : workers) w.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (std::int64_t n : images) result.images += n;
  result.passes = *std::min_element(passes.begin(), passes.end());
  result.single_thread_per_sec = static_cast<double>(result.images) / result.seconds / threads;
  return result;
}

}  // namespace sluice::bench
