// The training allocator's contract, on constructed layouts: rounding and bins, split, coalescing
// with the left, the right and both neighbours, best fit, growth (2 MiB then doubling, a request
// larger than the next region, a limit, a backing that runs out), preallocation, the exact
// fragmentation figure, the out-of-memory report (and that a failed call changes nothing),
// category accounting and misuse. Randomized sequences and threads: allocator_stress_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <vector>

#include "allocator_test_support.hpp"
#include "sluice/core/error.hpp"
#include "sluice/device/device.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/out_of_memory.hpp"

namespace sluice {
namespace {

using test::FakeBacking;
using test::same_stats;
constexpr std::uint64_t kKiB = 1024, kMiB = 1024 * 1024;

AllocatorOptions preallocated(std::uint64_t bytes) {
  return {.mode = AllocatorMode::kPreallocate, .limit = bytes, .name = "test"};
}

std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

TEST(Allocator, RoundsTo256BytesAndBinsByPowersOfTwo) {
  EXPECT_EQ(Allocator::rounded_size(0), 256u);
  EXPECT_EQ(Allocator::rounded_size(1), 256u);
  EXPECT_EQ(Allocator::rounded_size(256), 256u);
  EXPECT_EQ(Allocator::rounded_size(257), 512u);
  EXPECT_EQ(Allocator::bin_of(256), 0);
  EXPECT_EQ(Allocator::bin_of(511 / 256 * 256), 0);
  EXPECT_EQ(Allocator::bin_of(512), 1);
  EXPECT_EQ(Allocator::bin_of(768), 1);
  EXPECT_EQ(Allocator::bin_of(1024), 2);
  EXPECT_EQ(Allocator::bin_of(256 * kMiB - 256), 19);
  EXPECT_EQ(Allocator::bin_of(256 * kMiB), 20);
  EXPECT_EQ(Allocator::bin_of(std::uint64_t{1} << 45), 20);  // the last bin is unbounded
}

TEST(Allocator, SplitsAChunkAndPlacesTheNextBlockRightAfter) {
  Allocator a(FakeBacking::make(), preallocated(1 * kMiB));
  void* x = a.allocate(1000, TensorCategory::kWeights);
  EXPECT_EQ(addr(x) % 256, 0u);
  EXPECT_EQ(a.allocated_size(x), 1024u);
  const AllocatorStats s = a.stats();
  EXPECT_EQ(s.in_use_bytes, 1024u);
  EXPECT_EQ(s.requested_bytes, 1000u);
  EXPECT_EQ(s.largest_free_block, 1 * kMiB - 1024);  // the remainder is one free chunk
  EXPECT_EQ(s.fragmentation, 0.0);
  void* y = a.allocate(256, TensorCategory::kWeights);
  EXPECT_EQ(addr(y), addr(x) + 1024);
  a.check_invariants();
  a.deallocate(x);
  a.deallocate(y);
  EXPECT_EQ(a.stats().largest_free_block, 1 * kMiB);  // all one chunk again
  a.check_invariants();
}

// Four 256 KiB blocks fill a 1 MiB region exactly; freeing neighbours in different orders must
// always leave one chunk where they were.
class Coalesce : public ::testing::Test {
 protected:
  void SetUp() override {
    for (void*& p : b) p = alloc.allocate(256 * kKiB, TensorCategory::kActivations);
    ASSERT_EQ(alloc.stats().free_bytes, 0u);
  }
  Allocator alloc{FakeBacking::make(), preallocated(1 * kMiB)};
  void* b[4] = {};
};

TEST_F(Coalesce, WithTheRightNeighbour) {
  alloc.deallocate(b[1]);
  alloc.deallocate(b[0]);  // b[1] is free and to its right
  EXPECT_EQ(alloc.stats().largest_free_block, 512 * kKiB);
  EXPECT_EQ(alloc.stats().fragmentation, 0.0);
  alloc.check_invariants();
  EXPECT_EQ(alloc.allocate(512 * kKiB, TensorCategory::kActivations), b[0]);
}

TEST_F(Coalesce, WithTheLeftNeighbour) {
  alloc.deallocate(b[2]);
  alloc.deallocate(b[3]);  // b[2] is free and to its left; b[3] ends the region
  EXPECT_EQ(alloc.stats().largest_free_block, 512 * kKiB);
  alloc.check_invariants();
  EXPECT_EQ(alloc.allocate(512 * kKiB, TensorCategory::kActivations), b[2]);
}

TEST_F(Coalesce, WithBothNeighbours) {
  alloc.deallocate(b[0]);
  alloc.deallocate(b[2]);
  EXPECT_EQ(alloc.stats().largest_free_block, 256 * kKiB);
  EXPECT_DOUBLE_EQ(alloc.stats().fragmentation, 0.5);
  alloc.deallocate(b[1]);  // joins b[0] and b[2]
  EXPECT_EQ(alloc.stats().largest_free_block, 768 * kKiB);
  EXPECT_EQ(alloc.stats().fragmentation, 0.0);
  alloc.check_invariants();
  alloc.deallocate(b[3]);
  EXPECT_EQ(alloc.stats().largest_free_block, 1 * kMiB);
  alloc.check_invariants();
}

TEST(Allocator, BestFitTakesTheSmallestChunkThatFitsLowestAddressFirst) {
  Allocator a(FakeBacking::make(), preallocated(4 * kMiB));
  // Holes of 64, 32, 48 and 32 KiB between used 4 KiB separators, then the free tail.
  const std::uint64_t holes[] = {64 * kKiB, 32 * kKiB, 48 * kKiB, 32 * kKiB};
  std::vector<void*> hole;
  for (const std::uint64_t size : holes) {
    hole.push_back(a.allocate(size, TensorCategory::kWorkspace));
    a.allocate(4 * kKiB, TensorCategory::kWeights);
  }
  for (void* p : hole) a.deallocate(p);
  a.check_invariants();
  // 30 KiB: both 32 KiB holes fit best; the lower one wins.
  void* p = a.allocate(30 * kKiB, TensorCategory::kWorkspace);
  EXPECT_EQ(p, hole[1]);
  // 40 KiB: the 48 KiB hole, not the 64 KiB one nor the tail.
  EXPECT_EQ(a.allocate(40 * kKiB, TensorCategory::kWorkspace), hole[2]);
  // 50 KiB: nothing in its own bin [32, 64) KiB fits any more; the 64 KiB hole of the next bin.
  EXPECT_EQ(a.allocate(50 * kKiB, TensorCategory::kWorkspace), hole[0]);
  // 32 KiB: the remaining 32 KiB hole exactly, where the split left 2 KiB after 30 KiB did not.
  EXPECT_EQ(a.allocate(32 * kKiB, TensorCategory::kWorkspace), hole[3]);
  a.check_invariants();
}

TEST(Allocator, GrowsFrom2MiBDoublingAndDoublesFurtherForALargeRequest) {
  auto backing = FakeBacking::make();
  FakeBacking& fake = *backing;
  Allocator a(std::move(backing), {.name = "grow"});
  EXPECT_EQ(a.stats().reserved_bytes, 0u);  // nothing before the first request
  a.allocate(1 * kMiB, TensorCategory::kWeights);
  EXPECT_EQ(fake.region_sizes(), (std::vector<std::uint64_t>{2 * kMiB}));
  a.allocate(kMiB + kMiB / 2, TensorCategory::kWeights);  // 1 MiB left: a 4 MiB region
  a.allocate(3 * kMiB, TensorCategory::kWeights);          // 2.5 MiB left: an 8 MiB region
  EXPECT_EQ(fake.region_sizes(), (std::vector<std::uint64_t>{2 * kMiB, 4 * kMiB, 8 * kMiB}));
  a.allocate(40 * kMiB, TensorCategory::kActivations);  // the next region, 16 MiB, doubles to 64
  a.allocate(100 * kMiB, TensorCategory::kActivations);  // then 128 MiB
  EXPECT_EQ(fake.region_sizes(),
            (std::vector<std::uint64_t>{2 * kMiB, 4 * kMiB, 8 * kMiB, 64 * kMiB, 128 * kMiB}));
  const AllocatorStats s = a.stats();
  EXPECT_EQ(s.reserved_bytes, 206 * kMiB);
  EXPECT_EQ(s.regions, 5u);
  a.allocate(4 * kMiB, TensorCategory::kActivations);  // fits in free space: no growth
  EXPECT_EQ(fake.region_sizes().size(), 5u);
  a.check_invariants();
}

TEST(Allocator, GrowthStopsAtTheLimitWithAReport) {
  Allocator a(FakeBacking::make(), {.limit = 5 * kMiB, .name = "limited"});
  a.allocate(kMiB + kMiB / 2, TensorCategory::kWeights);  // a 2 MiB region
  a.allocate(kMiB + kMiB / 2, TensorCategory::kWeights);  // 4 MiB capped to the 3 MiB left
  EXPECT_EQ(a.stats().reserved_bytes, 5 * kMiB);
  try {
    a.allocate(2 * kMiB, TensorCategory::kGradients);
    FAIL() << "allocated past the limit";
  } catch (const OutOfMemory& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("limit of"), std::string::npos) << text;
    EXPECT_NE(text.find("grows up to 5.00 MiB"), std::string::npos) << text;
    EXPECT_LE(test::widest_line(text), 80u) << text;
  }
  void* p = a.allocate(kMiB + kMiB / 2, TensorCategory::kGradients);  // fits the second region's rest
  EXPECT_NE(p, nullptr);
  a.check_invariants();
}

TEST(Allocator, FallsBackToARegionOfJustTheRequestWhenTheBackingRunsShort) {
  auto backing = FakeBacking::make(10 * kMiB);
  FakeBacking& fake = *backing;
  Allocator a(std::move(backing));
  a.allocate(1 * kMiB, TensorCategory::kWeights);  // 2 MiB
  a.allocate(3 * kMiB, TensorCategory::kWeights);  // 4 MiB
  a.allocate(3 * kMiB, TensorCategory::kWeights);  // 8 MiB refused (4 left): 3 MiB instead
  EXPECT_EQ(fake.region_sizes(), (std::vector<std::uint64_t>{2 * kMiB, 4 * kMiB, 3 * kMiB}));
  EXPECT_THROW(a.allocate(2 * kMiB, TensorCategory::kWeights), OutOfMemory);  // 1 MiB left in the backing
  a.check_invariants();
}

TEST(Allocator, ReleasesFreeRegionsAndKeepsDoubling) {
  auto backing = FakeBacking::make();
  FakeBacking& fake = *backing;
  Allocator a(std::move(backing));
  void* x = a.allocate(1 * kMiB, TensorCategory::kWeights);
  void* y = a.allocate(3 * kMiB, TensorCategory::kWeights);
  EXPECT_EQ(a.release_free_regions(), 0u);  // both regions hold a block
  a.deallocate(y);
  EXPECT_EQ(a.release_free_regions(), 4 * kMiB);
  EXPECT_EQ(a.stats().reserved_bytes, 2 * kMiB);
  EXPECT_EQ(fake.live_regions(), 1u);
  a.allocate(3 * kMiB, TensorCategory::kWeights);  // the next region is 8 MiB, not 4 again
  EXPECT_EQ(fake.region_sizes().back(), 8 * kMiB);
  a.deallocate(x);
  a.check_invariants();
}

TEST(Allocator, PreallocatesOneRegionAndNeverGrows) {
  auto backing = FakeBacking::make();
  FakeBacking& fake = *backing;
  Allocator a(std::move(backing), preallocated(4 * kMiB));
  EXPECT_EQ(fake.region_sizes(), (std::vector<std::uint64_t>{4 * kMiB}));
  EXPECT_EQ(a.stats().reserved_bytes, 4 * kMiB);
  void* x = a.allocate(3 * kMiB, TensorCategory::kWeights);
  EXPECT_THROW(a.allocate(2 * kMiB, TensorCategory::kWeights), OutOfMemory);
  void* y = a.allocate(1 * kMiB, TensorCategory::kWeights);  // exactly the rest
  EXPECT_EQ(a.stats().in_use_bytes, 4 * kMiB);
  EXPECT_EQ(a.stats().largest_free_block, 0u);
  EXPECT_EQ(a.stats().fragmentation, 0.0);  // nothing free: 0 by definition
  EXPECT_THROW(a.allocate(1, TensorCategory::kWeights), OutOfMemory);
  EXPECT_EQ(fake.region_sizes().size(), 1u);
  EXPECT_EQ(a.release_free_regions(), 0u);
  a.deallocate(x);
  a.deallocate(y);
  EXPECT_EQ(a.release_free_regions(), 0u);  // the preallocated region stays
  EXPECT_EQ(fake.live_regions(), 1u);
  a.check_invariants();
}

TEST(Allocator, PreallocationNeedsALimitAndABackingWithRoom) {
  try {
    Allocator a(FakeBacking::make(), {.mode = AllocatorMode::kPreallocate});
    FAIL() << "preallocated without a limit";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
  try {
    Allocator a(FakeBacking::make(1 * kMiB), preallocated(2 * kMiB));
    FAIL() << "preallocated more than the backing has";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfBudget);
    EXPECT_FALSE(e.category().has_value());
    EXPECT_NE(std::string(e.what()).find("preallocat"), std::string::npos);
  }
}

TEST(Allocator, FragmentationOfAConstructedLayoutIsExact) {
  Allocator a(FakeBacking::make(), preallocated(1 * kMiB));
  void* p128 = a.allocate(128 * kKiB, TensorCategory::kActivations);
  a.allocate(64 * kKiB, TensorCategory::kWeights);
  void* p256 = a.allocate(256 * kKiB, TensorCategory::kActivations);
  a.allocate(64 * kKiB, TensorCategory::kWeights);
  void* rest = a.allocate(512 * kKiB, TensorCategory::kActivations);
  EXPECT_EQ(a.stats().fragmentation, 0.0);
  a.deallocate(p128);
  EXPECT_EQ(a.stats().fragmentation, 0.0);  // one free block
  a.deallocate(p256);
  // free 384 KiB, the largest piece 256 KiB: (384 - 256) / 384.
  AllocatorStats s = a.stats();
  EXPECT_EQ(s.free_bytes, 384 * kKiB);
  EXPECT_EQ(s.largest_free_block, 256 * kKiB);
  EXPECT_DOUBLE_EQ(s.fragmentation, 1.0 / 3.0);
  a.deallocate(rest);  // 128 + 256 + 512: (896 - 512) / 896
  s = a.stats();
  EXPECT_DOUBLE_EQ(s.fragmentation, 384.0 / 896.0);
}

TEST(Allocator, OutOfMemoryReportsTheRequestBinsAndMapAndChangesNothing) {
  Allocator a(FakeBacking::make(), preallocated(1 * kMiB));
  std::vector<void*> blocks;
  for (int i = 0; i < 8; ++i) {
    blocks.push_back(a.allocate(64 * kKiB, i % 2 == 0 ? TensorCategory::kWeights : TensorCategory::kActivations));
  }
  a.deallocate(blocks[1]);
  a.deallocate(blocks[5]);
  const AllocatorStats before = a.stats();
  try {
    a.allocate(700 * kKiB, TensorCategory::kGradients);
    FAIL() << "no 700 KiB block exists";
  } catch (const OutOfMemory& e) {
    const std::string text = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kOutOfBudget);
    EXPECT_EQ(e.requested_bytes(), 700 * kKiB);
    EXPECT_EQ(e.category(), TensorCategory::kGradients);
    EXPECT_TRUE(same_stats(e.stats(), before));
    for (const char* part : {"OUT OF MEMORY", "716800 B", "700.00 KiB", "gradients", "never grows",
                             "free chunks by bin", "bin  chunk sizes", "[64.00 KiB, 128.00 KiB)",
                             "largest free block 512.00 KiB", "occupancy map", "1 character = "}) {
      EXPECT_NE(text.find(part), std::string::npos) << "missing '" << part << "' in\n" << text;
    }
    EXPECT_LE(test::line_count(text), 60u) << text;
    EXPECT_LE(test::widest_line(text), 80u) << text;
    // The map, at whatever scale the lines allowed: W, A freed, W, A, W, A freed, W, A, free half.
    const std::string cells = test::map_cells(text, 0);
    ASSERT_FALSE(cells.empty()) << text;
    ASSERT_EQ(1 * kMiB % cells.size(), 0u) << text;
    const std::size_t per_block = cells.size() / 16;
    std::string expected;
    for (const char c : std::string("W.WAW.WA")) expected += std::string(per_block, c);
    expected += std::string(8 * per_block, '.');
    EXPECT_EQ(cells, expected) << text;
  } catch (...) {
    FAIL() << "not an OutOfMemory";
  }
  EXPECT_TRUE(same_stats(a.stats(), before));
  a.check_invariants();
  void* p = a.allocate(64 * kKiB, TensorCategory::kGradients);  // still works
  EXPECT_EQ(p, blocks[1]);
  a.deallocate(p);
  EXPECT_TRUE(same_stats(a.stats(), [&] {
    AllocatorStats s = before;
    s.total_allocations += 1;
    s.by_category[index_of(TensorCategory::kGradients)].peak_in_use_bytes = 64 * kKiB;
    s.peak_in_use_bytes = std::max<std::uint64_t>(s.peak_in_use_bytes, s.in_use_bytes + 64 * kKiB);
    return s;
  }()));
}

TEST(Allocator, NeverMergesChunksOfAdjacentRegions) {
  // Regions back to back in the address space: the second starts where the first ends.
  Allocator a(FakeBacking::make(std::numeric_limits<std::uint64_t>::max(), /*gap=*/0));
  void* x = a.allocate(2 * kMiB, TensorCategory::kWeights);  // fills the 2 MiB region
  void* y = a.allocate(4 * kMiB, TensorCategory::kWeights);  // fills the 4 MiB one, right after
  ASSERT_EQ(addr(y), addr(x) + 2 * kMiB);
  a.deallocate(x);
  a.deallocate(y);
  EXPECT_EQ(a.stats().largest_free_block, 4 * kMiB);  // two chunks, not one of 6 MiB
  EXPECT_DOUBLE_EQ(a.stats().fragmentation, 2.0 / 6.0);
  a.check_invariants();
}

TEST(Allocator, AccountsBytesAndPeaksPerCategory) {
  Allocator a(FakeBacking::make());
  void* w = a.allocate(1000, TensorCategory::kWeights);
  void* g = a.allocate(2048, TensorCategory::kGradients);
  std::vector<void*> act;
  for (int i = 0; i < 3; ++i) act.push_back(a.allocate(4096, TensorCategory::kActivations));
  a.deallocate(act.back());
  act.pop_back();
  AllocatorStats s = a.stats();
  EXPECT_EQ(s.category(TensorCategory::kWeights).in_use_bytes, 1024u);
  EXPECT_EQ(s.category(TensorCategory::kGradients).in_use_bytes, 2048u);
  EXPECT_EQ(s.category(TensorCategory::kActivations).in_use_bytes, 8192u);
  EXPECT_EQ(s.category(TensorCategory::kActivations).peak_in_use_bytes, 12288u);
  EXPECT_EQ(s.category(TensorCategory::kActivations).live_allocations, 2u);
  EXPECT_EQ(s.category(TensorCategory::kWorkspace).peak_in_use_bytes, 0u);
  EXPECT_EQ(s.in_use_bytes, 1024u + 2048u + 8192u);
  EXPECT_EQ(s.peak_in_use_bytes, 1024u + 2048u + 12288u);
  EXPECT_EQ(s.requested_bytes, 1000u + 2048u + 8192u);
  EXPECT_EQ(s.live_allocations, 4u);
  EXPECT_EQ(s.total_allocations, 5u);
  a.reset_peak();
  s = a.stats();
  EXPECT_EQ(s.peak_in_use_bytes, s.in_use_bytes);
  EXPECT_EQ(s.category(TensorCategory::kActivations).peak_in_use_bytes, 8192u);
  a.deallocate(w);
  a.deallocate(g);
  for (void* p : act) a.deallocate(p);
  s = a.stats();
  EXPECT_EQ(s.in_use_bytes, 0u);
  EXPECT_EQ(s.category(TensorCategory::kActivations).peak_in_use_bytes, 8192u);
  a.check_invariants();

  const std::string text = a.report();  // categories with a peak are listed, the rest are not
  EXPECT_NE(text.find("activations"), std::string::npos) << text;
  EXPECT_EQ(text.find("optimizer state "), std::string::npos) << text;  // only in the legend
  EXPECT_EQ(to_string(TensorCategory::kOptimizerState), "optimizer state");
  EXPECT_EQ(to_string(TensorCategory::kInputPinned), "input (pinned)");
  std::string initials;
  for (std::size_t i = 0; i < kTensorCategoryCount; ++i) initials += category_initial(static_cast<TensorCategory>(i));
  EXPECT_EQ(initials, "WGOAwIP");
}

TEST(Allocator, RejectsForeignAndTwiceFreedPointers) {
  Allocator a(FakeBacking::make());
  void* p = a.allocate(100, TensorCategory::kWorkspace);
  EXPECT_TRUE(a.owns(p));
  EXPECT_FALSE(a.owns(static_cast<char*>(p) + 256));  // inside the region, not a block
  a.deallocate(nullptr);                               // ignored, as free(nullptr)
  const AllocatorStats before = a.stats();
  try {
    a.deallocate(static_cast<char*>(p) + 256);
    FAIL() << "freed an address that is no block";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
  EXPECT_TRUE(same_stats(a.stats(), before));
  a.deallocate(p);
  EXPECT_THROW(a.deallocate(p), Error);  // twice
  EXPECT_EQ(a.allocated_size(p), 0u);
  a.check_invariants();
}

TEST(Allocator, ZeroBytesGetADistinctGranule) {
  Allocator a(FakeBacking::make());
  void* p = a.allocate(0, TensorCategory::kWorkspace);
  void* q = a.allocate(0, TensorCategory::kWorkspace);
  EXPECT_NE(p, q);
  EXPECT_EQ(a.allocated_size(p), 256u);
  EXPECT_EQ(a.stats().requested_bytes, 0u);
  a.deallocate(p);
  a.deallocate(q);
  EXPECT_THROW(a.allocate(std::numeric_limits<std::size_t>::max(), TensorCategory::kWorkspace), OutOfMemory);
  a.check_invariants();
}

// A backing that fails with an error other than "no memory" (a broken driver).
class ThrowingBacking final : public Backing {
 public:
  DeviceId device() const override { return host(); }
  std::string describe() const override { return "throwing backing"; }
  void* allocate(std::size_t) override { throw Error(ErrorCode::kInternal, "driver gone"); }
  void deallocate(void*, std::size_t) noexcept override {}
};

TEST(Allocator, ABackingErrorPassesThroughAndChangesNothing) {
  Allocator a(std::make_unique<ThrowingBacking>());
  const AllocatorStats before = a.stats();
  EXPECT_THROW(a.allocate(1, TensorCategory::kWeights), Error);
  EXPECT_TRUE(same_stats(a.stats(), before));
  a.check_invariants();
}

TEST(Allocator, ReportsStayWithin60LinesAnd80ColumnsWithManyRegionsAndBins) {
  // Regions of 256 B, 512 B, ... each filled by one block: 45 regions, more than the map's lines.
  Allocator a(FakeBacking::make(), {.initial_region_bytes = 256, .name = "many"});
  std::vector<void*> blocks;
  for (int k = 0; k < 45; ++k) blocks.push_back(a.allocate(std::uint64_t{256} << k, TensorCategory::kActivations));
  EXPECT_EQ(a.stats().regions, 45u);
  // Free every other block: free chunks in 10 bins (and the last one unbounded).
  for (int k = 1; k < 45; k += 2) a.deallocate(blocks[static_cast<std::size_t>(k)]);
  const std::string text = a.report();
  EXPECT_LE(test::line_count(text), 60u) << text;
  EXPECT_LE(test::widest_line(text), 80u) << text;
  EXPECT_NE(text.find("more regions"), std::string::npos) << text;
  EXPECT_NE(text.find("[256.00 MiB, any)"), std::string::npos) << text;  // bin 20
  EXPECT_EQ(test::line_count(Allocator(FakeBacking::make()).report()) <= 60u, true);
  a.check_invariants();
}

TEST(Allocator, CudaBackingNeedsAUsableDevice) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present: tests/gpu/allocator_gpu_test.cpp covers it";
  try {
    Allocator a(cuda(0));
    FAIL() << "a CUDA allocator without a CUDA device";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
  Allocator host_allocator(host());  // the host backing always works
  void* p = host_allocator.allocate(1 << 20, TensorCategory::kInputHost);
  std::memset(p, 0xab, 1 << 20);
  host_allocator.deallocate(p);
  EXPECT_EQ(host_allocator.device(), host());
}

}  // namespace
}  // namespace sluice
