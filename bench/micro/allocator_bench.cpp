// The training allocator (sluice::Allocator, best fit with coalescing) against glibc's
// malloc/free: the cost of one alloc+free pair of mixed sizes, in ns per pair, measured in one
// run. Sizes are log-uniform from 16 B to 4 MiB (seeded; the allocator tests' distribution).
//   pairs    allocate, then free at once: the allocator's fast path
//   window   64 blocks live; each pair frees the oldest and allocates the next: a steady state
//            with fragmentation, as layers allocating and freeing activations make
//   window, 2 threads: the same from two threads at once, each with its own window (the
//            allocator takes one mutex; glibc gives each thread its own arena); wall time
//            over the pairs of both threads, so it halves if they scale
// With a GPU, cudaMalloc/cudaFree pairs are measured too, for the cost the allocator saves.
// Memory is not touched: this is the bookkeeping alone. Prints the ratios at the end.
// Run: build/bench/allocator_bench
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "device/cuda_backend.hpp"
#include "sluice/device/device.hpp"
#include "sluice/train/allocator.hpp"

namespace {

constexpr std::size_t kSizes = 1 << 14;  // a power of two: the index wraps with a mask
constexpr std::size_t kWindow = 64;

const std::vector<std::size_t>& mixed_sizes() {
  static const std::vector<std::size_t> sizes = [] {
    std::mt19937_64 rng(42);
    std::uniform_real_distribution<double> log_size(std::log(16.0), std::log(4.0 * 1024 * 1024));
    std::vector<std::size_t> out(kSizes);
    for (std::size_t& s : out) s = static_cast<std::size_t>(std::exp(log_size(rng)));
    return out;
  }();
  return sizes;
}

// ns per pair of each benchmark's final run, for the summary.
std::map<std::string, double>& results() {
  static std::map<std::string, double> r;
  return r;
}

struct Bfc {
  static sluice::Allocator& instance() {
    static sluice::Allocator allocator(sluice::host(), {.name = "bench"});
    return allocator;
  }
  void* allocate(std::size_t n) { return instance().allocate(n, sluice::TensorCategory::kActivations); }
  void deallocate(void* p) { instance().deallocate(p); }
};

struct Malloc {
  void* allocate(std::size_t n) { return std::malloc(n); }
  void deallocate(void* p) { std::free(p); }
};

struct CudaMalloc {
  void* allocate(std::size_t n) { return sluice::device_detail::device_malloc(0, n); }
  void deallocate(void* p) { sluice::device_detail::device_free(0, p); }
};

template <typename A>
void pairs(benchmark::State& state) {
  if constexpr (std::is_same_v<A, CudaMalloc>) {
    if (sluice::cuda_device_count() == 0) return state.SkipWithError("no CUDA device");
  }
  A a;
  const auto& sizes = mixed_sizes();
  std::size_t i = static_cast<std::size_t>(state.thread_index()) * 7919;
  for (auto _ : state) {
    void* p = a.allocate(sizes[i++ & (kSizes - 1)]);
    benchmark::DoNotOptimize(p);
    a.deallocate(p);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

template <typename A>
void window(benchmark::State& state) {
  A a;
  const auto& sizes = mixed_sizes();
  std::size_t i = static_cast<std::size_t>(state.thread_index()) * 7919;
  void* live[kWindow];
  for (void*& p : live) p = a.allocate(sizes[i++ & (kSizes - 1)]);
  std::size_t oldest = 0;
  for (auto _ : state) {
    a.deallocate(live[oldest]);
    live[oldest] = a.allocate(sizes[i++ & (kSizes - 1)]);
    benchmark::DoNotOptimize(live[oldest]);
    oldest = (oldest + 1) % kWindow;
  }
  for (void* p : live) a.deallocate(p);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

BENCHMARK_TEMPLATE(pairs, Bfc)->Name("pairs/bfc");
BENCHMARK_TEMPLATE(pairs, Malloc)->Name("pairs/malloc");
BENCHMARK_TEMPLATE(window, Bfc)->Name("window/bfc");
BENCHMARK_TEMPLATE(window, Malloc)->Name("window/malloc");
BENCHMARK_TEMPLATE(window, Bfc)->Name("window/bfc")->Threads(2)->UseRealTime();
BENCHMARK_TEMPLATE(window, Malloc)->Name("window/malloc")->Threads(2)->UseRealTime();
BENCHMARK_TEMPLATE(pairs, CudaMalloc)->Name("pairs/cudaMalloc");

// Keeps each run's ns per pair (real time over pairs done by all threads) for the summary.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.error_occurred || run.run_type != Run::RT_Iteration || run.iterations == 0) continue;
      // Wall time over the pairs of all threads: with 2 threads it halves if they scale.
      results()[run.benchmark_name()] = run.GetAdjustedRealTime();
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  const auto& r = results();
  auto ratio = [&](const std::string& ours, const std::string& theirs) {
    const auto a = r.find(ours), b = r.find(theirs);
    if (a == r.end() || b == r.end() || b->second == 0) return;
    std::printf("  %-36s %8.1f ns vs %-22s %8.1f ns: %.2fx\n", a->first.c_str(), a->second, b->first.c_str(),
                b->second, a->second / b->second);
  };
  std::printf("allocator summary (ns per alloc+free pair; below 1x: the allocator is faster)\n");
  ratio("pairs/bfc", "pairs/malloc");
  ratio("window/bfc", "window/malloc");
  ratio("window/bfc/real_time/threads:2", "window/malloc/real_time/threads:2");
  ratio("pairs/bfc", "pairs/cudaMalloc");
  const sluice::AllocatorStats s = Bfc::instance().stats();
  std::printf("bfc: peak %llu KiB in use, %llu KiB reserved in %llu regions\n",
              static_cast<unsigned long long>(s.peak_in_use_bytes >> 10),
              static_cast<unsigned long long>(s.reserved_bytes >> 10), static_cast<unsigned long long>(s.regions));
  return 0;
}
