// No heap allocation per sample in steady state (docs/design.md principle 1), proven by counting.
//
// This executable replaces the global operator new (every C++ allocation in the process, sluice's
// and the standard library's) and interposes malloc (every C allocation, oneTBB's and
// libjpeg-turbo's included). After warm-up epochs:
//  - operator new must not be called at all while an epoch runs;
//  - malloc may be called only by libjpeg-turbo for its per-image working memory, which it
//    allocates and frees inside every decode and which cannot be routed through a pool; the test
//    measures that cost on the same files with plain tjDecompress2 in the same process and
//    requires the pipeline to add nothing to it.
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "sluice/sluice.hpp"
#include "test_support.hpp"

#include "counting_new.hpp"

namespace {
std::atomic<long> g_malloc_calls{0};
}  // namespace

// Sanitizers replace malloc and operator new themselves; counting would fight them, so under a
// sanitizer this file compiles to one skipped test (counting_new.hpp defines nothing there).
#define SLUICE_COUNTING SLUICE_COUNTING_NEW

#if SLUICE_COUNTING
extern "C" void* __libc_malloc(std::size_t);
extern "C" void* malloc(std::size_t n) {
  g_malloc_calls.fetch_add(1, std::memory_order_relaxed);
  return __libc_malloc(n);
}

#endif

namespace sluice {
namespace {

#if !SLUICE_COUNTING
TEST(Allocation, SkippedUnderSanitizers) { GTEST_SKIP() << "sanitizers own malloc and operator new"; }
#else
struct Counts {
  long news;
  long mallocs;
};

template <class F>
Counts count(F&& f) {
  const long n0 = ::sluice::test::new_calls();
  const long m0 = g_malloc_calls.load();
  f();
  return {::sluice::test::new_calls() - n0, g_malloc_calls.load() - m0};
}

std::vector<Item> sample_items(const std::filesystem::path& dir, int n) {
  std::vector<Item> items;
  for (int i = 0; i < n; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "photo_%04d.jpg", i * 7);
    items.push_back(Item{(dir / name).string(), i});
  }
  return items;
}

// libjpeg-turbo's own mallocs per image, for full decodes through TurboJPEG.
double turbojpeg_mallocs_per_image(const std::vector<Item>& items) {
  tjhandle h = tjInitDecompress();
  std::vector<std::vector<std::uint8_t>> files;
  for (const auto& item : items) files.push_back(test::read_bytes(item.path));
  std::vector<std::uint8_t> out(1024 * 1024 * 3);
  const auto c = count([&] {
    for (const auto& f : files) {
      int w, h2, s, cs;
      tjDecompressHeader3(h, f.data(), f.size(), &w, &h2, &s, &cs);
      tjDecompress2(h, f.data(), f.size(), out.data(), w, 0, h2, TJPF_RGB, 0);
    }
  });
  tjDestroy(h);
  return static_cast<double>(c.mallocs) / static_cast<double>(files.size());
}

void run_epochs(Loader& loader, int first, int count_epochs) {
  for (int e = first; e < first + count_epochs; ++e) {
    for (Batch& b : loader.epoch(e)) {
      volatile auto touch = static_cast<const std::uint8_t*>(b.data().data)[0];
      (void)touch;
    }
  }
}

// Each worker's buffers grow until they hold the largest sample that worker has seen; then they
// never allocate again. With one worker, two epochs show it every sample, so the steady state
// is exact and checked as zero. With more workers, which worker meets which sample varies, so
// the check is that allocations do not scale with samples: a bounded handful (a few buffers per
// worker reaching a new high-water mark), far below one per sample.
// Growable storage per worker: four buffers (file, decoded, resized, scratch) and ten resampler
// tables, each settling after a few power-of-two steps. A worker that sat idle through warm-up
// (it happens on a loaded machine) may still take those steps once.
constexpr long kWorkerBuffers = 16;

void expect_steady_state_is_allocation_free(Pipeline pipeline, const std::vector<Item>& items, int threads) {
  Loader loader = pipeline.build({.threads = threads, .seed = 1});
  run_epochs(loader, 0, 2);
  const Counts c = count([&] { run_epochs(loader, 2, 4); });
  const double samples = 4.0 * static_cast<double>(items.size());
  if (threads == 1) {
    EXPECT_EQ(c.news, 0) << "operator new called " << c.news << " times in " << samples << " samples";
  } else {
    EXPECT_LE(c.news, kWorkerBuffers * threads) << "operator new called " << c.news << " times in " << samples << " samples";
  }
  const double baseline = turbojpeg_mallocs_per_image(items);
  const double per_sample = static_cast<double>(c.mallocs - c.news) / samples;
  std::printf("%d thread(s): %ld operator new in %.0f samples; mallocs per sample: pipeline %.2f, "
              "libjpeg-turbo's own per image %.2f\n", threads, c.news, samples, per_sample, baseline);
  EXPECT_LE(per_sample, baseline + 0.05) << "the pipeline adds mallocs of its own";
}

TEST(Allocation, EvalPipelineSteadyStateAllocatesNothingOfItsOwn) {
  SLUICE_REQUIRE_DATASET(dir, "wallpaper-crops");
  const auto items = sample_items(dir, 48);
  for (int threads : {1, 2}) {
    expect_steady_state_is_allocation_free(Pipeline::from_items(items)
                                               .shuffle_files(3)
                                               .read()
                                               .decode_jpeg({.roi = false})
                                               .resize_shorter(128)
                                               .center_crop(112)
                                               .normalize()
                                               .shuffle(10)
                                               .batch(8),
                                           items, threads);
  }
}

TEST(Allocation, TrainPipelineWithRegionDecodeAllocatesNoCxxMemoryPerSample) {
  // Random crops give every epoch new geometries; the buffers are sized by the image (decode)
  // and grow in powers of two (tables), so they settle all the same. Region decodes go through
  // the libjpeg API, whose per-image mallocs differ from TurboJPEG's: only C++ is counted here.
  SLUICE_REQUIRE_DATASET(dir, "wallpaper-crops");
  const auto items = sample_items(dir, 48);
  for (int threads : {1, 2}) {
    Loader loader = Pipeline::from_items(items)
                        .read()
                        .decode_jpeg()
                        .random_resized_crop(96)
                        .flip_horizontal()
                        .normalize({.mean = {0.5f, 0.5f, 0.5f}, .std = {0.2f, 0.2f, 0.2f}, .layout = Layout::kNCHW, .dtype = DType::kBF16})
                        .batch(16)
                        .build({.threads = threads});
    run_epochs(loader, 0, 6);
    const Counts c = count([&] { run_epochs(loader, 6, 4); });
    std::printf("%d thread(s): %ld operator new in %d samples\n", threads, c.news, 4 * 48);
    EXPECT_LE(c.news, threads == 1 ? 2 : kWorkerBuffers * threads);
  }
}

#endif  // SLUICE_COUNTING

}  // namespace
}  // namespace sluice
