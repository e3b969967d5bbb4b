// The training allocator over cudaMalloc on a real GPU: blocks are 256-byte aligned device memory
// that holds what is copied into it, growth and preallocation take device regions, a request
// beyond the device's memory is an OutOfMemory report that changes nothing, and a randomized
// alloc/free sequence keeps the invariants. Skips without a GPU (label gpu).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <random>
#include <vector>

#include "gpu_test_util.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"
#include "sluice/detail/device/copy.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/out_of_memory.hpp"

namespace sluice {
namespace {

constexpr std::uint64_t kMiB = 1024 * 1024;

TEST(GpuAllocator, BlocksAreAlignedDeviceMemoryThatHoldsData) {
  SLUICE_REQUIRE_GPU();
  Allocator a(cuda(0), {.name = "gpu grow"});
  EXPECT_EQ(a.device(), cuda(0));
  const std::size_t sizes[] = {1, 255, 4099, kMiB, 3 * kMiB + 17, 40 * kMiB};
  std::vector<std::pair<void*, std::size_t>> blocks;
  for (std::size_t i = 0; i < std::size(sizes); ++i) {
    void* p = a.allocate(sizes[i], i % 2 ? TensorCategory::kActivations : TensorCategory::kWeights);
    ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % 256, 0u);
    std::vector<std::uint8_t> bytes(sizes[i]);
    test::fill_random(bytes.data(), bytes.size(), i + 1);
    copy_to_device(cuda(0), p, bytes.data(), bytes.size());
    blocks.emplace_back(p, sizes[i]);
  }
  for (std::size_t i = 0; i < blocks.size(); ++i) {  // no block overwrote another
    std::vector<std::uint8_t> expected(blocks[i].second);
    test::fill_random(expected.data(), expected.size(), i + 1);
    EXPECT_EQ(test::download(cuda(0), blocks[i].first, blocks[i].second), expected) << "block " << i;
  }
  const AllocatorStats s = a.stats();
  EXPECT_EQ(s.live_allocations, std::size(sizes));
  EXPECT_GE(s.reserved_bytes, s.in_use_bytes);
  const std::string text = a.report();
  EXPECT_NE(text.find("cuda:0 (cudaMalloc)"), std::string::npos) << text;
  std::printf("%s", text.c_str());
  for (auto& [p, n] : blocks) a.deallocate(p);
  a.check_invariants();
  EXPECT_GT(a.release_free_regions(), 0u);
  EXPECT_EQ(a.stats().reserved_bytes, 0u);
}

TEST(GpuAllocator, PreallocatedRegionRunsOutAtItsLimit) {
  SLUICE_REQUIRE_GPU();
  Allocator a(cuda(0), {.mode = AllocatorMode::kPreallocate, .limit = 256 * kMiB, .name = "gpu prealloc"});
  EXPECT_EQ(a.stats().reserved_bytes, 256 * kMiB);
  void* x = a.allocate(200 * kMiB, TensorCategory::kWeights);
  const AllocatorStats before = a.stats();
  try {
    a.allocate(100 * kMiB, TensorCategory::kActivations);
    FAIL() << "allocated past the preallocated region";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfBudget);
    std::printf("%s", e.what());
  }
  EXPECT_EQ(a.stats().in_use_bytes, before.in_use_bytes);
  EXPECT_EQ(a.stats().reserved_bytes, before.reserved_bytes);
  void* y = a.allocate(56 * kMiB, TensorCategory::kActivations);  // exactly the rest
  a.deallocate(x);
  a.deallocate(y);
  a.check_invariants();
}

TEST(GpuAllocator, ARequestBeyondTheDeviceIsAReportAndChangesNothing) {
  SLUICE_REQUIRE_GPU();
  Allocator a(cuda(0), {.name = "gpu huge"});
  void* small = a.allocate(kMiB, TensorCategory::kWorkspace);
  const AllocatorStats before = a.stats();
  const std::uint64_t too_much = describe(cuda(0)).total_memory * 2;
  try {
    a.allocate(too_much, TensorCategory::kActivations);
    FAIL() << "cudaMalloc gave twice the device's memory";
  } catch (const OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find("cudaMalloc"), std::string::npos) << e.what();
  }
  EXPECT_EQ(a.stats().reserved_bytes, before.reserved_bytes);
  EXPECT_EQ(a.stats().total_allocations, before.total_allocations);
  void* after = a.allocate(kMiB, TensorCategory::kWorkspace);  // the device still serves
  a.deallocate(after);
  a.deallocate(small);
  a.check_invariants();
}

TEST(GpuAllocator, RandomSequenceKeepsInvariants) {
  SLUICE_REQUIRE_GPU();
  Allocator a(cuda(0), {.limit = 2048 * kMiB, .name = "gpu random"});
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> log_size(0.0, std::log(64.0 * kMiB));
  std::map<std::uintptr_t, std::uint64_t> live;
  int failures = 0;
  for (int op = 0; op < 20'000; ++op) {
    if (live.empty() || (live.size() < 128 && rng() % 2 == 0)) {
      const auto bytes = static_cast<std::uint64_t>(std::exp(log_size(rng)));
      try {
        void* p = a.allocate(bytes, TensorCategory::kActivations);
        const auto at = reinterpret_cast<std::uintptr_t>(p);
        const auto next = live.lower_bound(at);
        ASSERT_TRUE(next == live.end() || at + Allocator::rounded_size(bytes) <= next->first);
        ASSERT_TRUE(next == live.begin() || std::prev(next)->first + std::prev(next)->second <= at);
        live.emplace(at, Allocator::rounded_size(bytes));
      } catch (const OutOfMemory&) {
        ++failures;
      }
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<std::ptrdiff_t>(rng() % live.size()));
      a.deallocate(reinterpret_cast<void*>(it->first));
      live.erase(it);
    }
    if (op % 256 == 0) a.check_invariants();
  }
  std::printf("gpu random: %d out of memory, %s reserved in %llu regions\n", failures,
              format_bytes(a.stats().reserved_bytes).c_str(), static_cast<unsigned long long>(a.stats().regions));
  for (auto& [at, n] : live) a.deallocate(reinterpret_cast<void*>(at));
  a.check_invariants();
  EXPECT_EQ(a.stats().in_use_bytes, 0u);
}

}  // namespace
}  // namespace sluice
