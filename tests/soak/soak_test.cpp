// Soak (ctest label "soak", outside the default run): 50 epochs over imagenette-val with file
// shuffle, a memory cache, a shuffle buffer and prefetch, checking that resident memory after
// epoch 50 is within 1% of epoch 5 (nothing grows per epoch) and that the accounted peak never
// moves after the cache has filled. SLUICE_SOAK_EPOCHS overrides the count (e.g. under a
// sanitizer, where epochs are slower).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "sluice/sluice.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

std::uint64_t rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

TEST(Soak, FiftyEpochsResidentMemoryStaysFlat) {
  SLUICE_REQUIRE_DATASET(dir, "imagenette-val");
  const char* env = std::getenv("SLUICE_SOAK_EPOCHS");
  const int epochs = env != nullptr ? std::atoi(env) : 50;
  ASSERT_GE(epochs, 6);
  Loader loader = Pipeline::from_folder(dir.string())
                      .shuffle_files(1)
                      .read()
                      .cache(MemoryCache{})
                      .decode_jpeg()
                      .random_resized_crop(128)
                      .flip_horizontal()
                      .normalize({.mean = {0.5f, 0.5f, 0.5f}, .std = {0.25f, 0.25f, 0.25f}, .layout = Layout::kNCHW,
                                  .dtype = DType::kF16})
                      .shuffle(1000)
                      .batch(64)
                      .prefetch(4)
                      .build({.memory_budget = 512_MiB, .threads = 2, .seed = 3});
  std::uint64_t rss_at_5 = 0;
  std::uint64_t peak_at_5 = 0;
  for (int e = 1; e <= epochs; ++e) {
    std::int64_t n = 0;
    for (Batch& b : loader.epoch(e - 1)) n += b.size();
    ASSERT_EQ(n, 3925);
    const std::uint64_t rss = rss_bytes();
    if (e == 5) {
      rss_at_5 = rss;
      peak_at_5 = loader.stats().memory_peak;
    }
    if (e == 5 || e % 10 == 0 || e == epochs) {
      std::printf("epoch %2d: RSS %.1f MiB, accounted peak %.1f MiB\n", e, static_cast<double>(rss) / (1 << 20),
                  static_cast<double>(loader.stats().memory_peak) / (1 << 20));
    }
  }
  const std::uint64_t rss_end = rss_bytes();
  EXPECT_LE(static_cast<double>(rss_end), 1.01 * static_cast<double>(rss_at_5));
  EXPECT_EQ(loader.stats().memory_peak, peak_at_5);
  EXPECT_EQ(loader.stats().cache.misses, 3925);  // the first epoch filled it; every later one hit
}

}  // namespace
}  // namespace sluice
