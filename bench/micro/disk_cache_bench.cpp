// DiskCacheStore micro benchmarks. Hits: lookup() of 50 KB and 600 KB entries (one pread into the
// caller's buffer plus an XXH3 check) against a plain pread of the same bytes from a regular
// file, both warm in the page cache, so the ratio is the cache's own overhead. Open: a cache of
// 100k entries opened from its index file and, as after a crash, by scanning entry headers.
//
//   build-cache/bench/disk_cache_bench --benchmark_filter='Hit|Pread' \
//       --benchmark_enable_random_interleaving=true --benchmark_repetitions=5
//   build-cache/bench/disk_cache_bench --benchmark_filter=Open   (writes ~1.7 GB under $TMPDIR)
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <malloc.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sluice/detail/memory/aligned_buffer.hpp"
#include "stages/cache/disk_cache.hpp"
#include "stages/cache/disk_cache_format.hpp"

namespace {

namespace fs = std::filesystem;
using sluice::AlignedBuffer;
using sluice::stages::CacheKey;
using sluice::stages::DiskCacheStore;
using sluice::stages::DiskCacheOptions;

constexpr int kHitEntries = 64;  // 64 x 600 KB: well past the L2, like a real epoch's samples

fs::path make_scratch_dir() {
  std::string pattern = (fs::temp_directory_path() / "sluice-bench-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) std::abort();
  return pattern;
}

std::vector<std::uint8_t> payload(std::size_t bytes, int seed) {
  std::vector<std::uint8_t> p(bytes);
  std::uint32_t s = 2166136261u ^ static_cast<std::uint32_t>(seed);
  for (std::size_t i = 0; i < bytes; ++i) {
    s = s * 1664525u + 1013904223u;
    p[i] = static_cast<std::uint8_t>(s >> 24);
  }
  return p;
}

CacheKey key(int i) {
  return {"/data/imagenet/train/n01440764/n01440764_" + std::to_string(10000 + i) + ".JPEG",
          static_cast<std::uint64_t>(100000 + i), 1'700'000'000'000'000'000 + i};
}

// A cache and a plain file holding the same payloads.
struct HitFixture {
  explicit HitFixture(std::size_t bytes) : dir(make_scratch_dir()), bytes(bytes) {
    DiskCacheOptions o;
    o.path = (dir / "hits.cache").string();
    cache = std::make_unique<DiskCacheStore>(o);
    const std::string plain_path = (dir / "plain.bin").string();
    plain_fd = ::open(plain_path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    for (int i = 0; i < kHitEntries; ++i) {
      const std::vector<std::uint8_t> p = payload(bytes, i);
      if (!cache->insert(key(i), p)) std::abort();
      if (::pwrite(plain_fd, p.data(), p.size(), static_cast<off_t>(i * bytes)) !=
          static_cast<ssize_t>(bytes)) {
        std::abort();
      }
    }
  }
  ~HitFixture() {
    cache.reset();
    ::close(plain_fd);
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  fs::path dir;
  std::size_t bytes;
  std::unique_ptr<DiskCacheStore> cache;
  int plain_fd = -1;
};

HitFixture& hit_fixture(std::size_t bytes) {
  static std::map<std::size_t, std::unique_ptr<HitFixture>> fixtures;
  auto& f = fixtures[bytes];
  if (!f) f = std::make_unique<HitFixture>(bytes);
  return *f;
}

void BM_LookupHit(benchmark::State& state) {
  HitFixture& f = hit_fixture(static_cast<std::size_t>(state.range(0)));
  AlignedBuffer out(f.bytes);
  int i = 0;
  for (auto _ : state) {
    if (!f.cache->lookup(key(i), out)) state.SkipWithError("miss");
    benchmark::DoNotOptimize(out.data());
    i = (i + 1) % kHitEntries;
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(f.bytes));
}

void BM_PlainPread(benchmark::State& state) {
  HitFixture& f = hit_fixture(static_cast<std::size_t>(state.range(0)));
  AlignedBuffer out(f.bytes);
  int i = 0;
  for (auto _ : state) {
    if (::pread(f.plain_fd, out.data(), f.bytes, static_cast<off_t>(i * f.bytes)) !=
        static_cast<ssize_t>(f.bytes)) {
      state.SkipWithError("short read");
    }
    benchmark::DoNotOptimize(out.data());
    i = (i + 1) % kHitEntries;
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(f.bytes));
}

// The floor of a checked hit: the same pread, then the same XXH3 the cache computes.
void BM_PlainPreadXxh3(benchmark::State& state) {
  HitFixture& f = hit_fixture(static_cast<std::size_t>(state.range(0)));
  AlignedBuffer out(f.bytes);
  int i = 0;
  for (auto _ : state) {
    if (::pread(f.plain_fd, out.data(), f.bytes, static_cast<off_t>(i * f.bytes)) !=
        static_cast<ssize_t>(f.bytes)) {
      state.SkipWithError("short read");
    }
    benchmark::DoNotOptimize(sluice::stages::disk_cache_format::payload_checksum(out.data(), f.bytes));
    i = (i + 1) % kHitEntries;
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(f.bytes));
}

BENCHMARK(BM_LookupHit)->Arg(50 << 10)->Arg(600 << 10);
BENCHMARK(BM_PlainPread)->Arg(50 << 10)->Arg(600 << 10);
BENCHMARK(BM_PlainPreadXxh3)->Arg(50 << 10)->Arg(600 << 10);

// 100k entries of 17 KB: each header then needs its own read when there is no index, the slow
// case of a scan. `heap_per_entry` is what the in-memory index costs (malloc'd bytes).
constexpr int kOpenEntries = 100'000;
constexpr std::size_t kOpenPayload = 17'000;

struct OpenFixture {
  OpenFixture() : dir(make_scratch_dir()) {
    options.path = (dir / "open.cache").string();
    {
      DiskCacheStore cache(options);
      const std::vector<std::uint8_t> p = payload(kOpenPayload, 1);
      for (int i = 0; i < kOpenEntries; ++i) {
        if (!cache.insert(key(i), p)) std::abort();
      }
    }
    index = (dir / "open.cache.idx").string();
    // Hold the write lock so the benchmarked opens are readers: they never write the index
    // back, and the scan case stays a scan.
    lock_fd = ::open(options.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (lock_fd < 0 || ::flock(lock_fd, LOCK_EX) != 0) std::abort();
  }
  ~OpenFixture() {
    ::close(lock_fd);
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  fs::path dir;
  DiskCacheOptions options;
  std::string index;
  int lock_fd = -1;
};

OpenFixture& open_fixture() {
  static OpenFixture f;
  return f;
}

void BM_Open100k(benchmark::State& state) {
  OpenFixture& f = open_fixture();
  const bool with_index = state.range(0) != 0;
  const std::string moved = f.index + ".away";
  if (!with_index) fs::rename(f.index, moved);
  double heap_per_entry = 0;
  for (auto _ : state) {
    const std::size_t heap_before = ::mallinfo2().uordblks;
    auto cache = std::make_unique<DiskCacheStore>(f.options);
    state.PauseTiming();  // only the open is timed, not freeing the index
    heap_per_entry = static_cast<double>(::mallinfo2().uordblks - heap_before) / kOpenEntries;
    if (cache->stats().entries != kOpenEntries) state.SkipWithError("entries missing");
    cache.reset();
    state.ResumeTiming();
  }
  if (!with_index) fs::rename(moved, f.index);
  state.counters["entries"] = kOpenEntries;
  state.counters["heap_per_entry"] = heap_per_entry;
}

BENCHMARK(BM_Open100k)->ArgName("index")->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->Iterations(5);

}  // namespace

BENCHMARK_MAIN();
