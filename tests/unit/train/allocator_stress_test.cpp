// The training allocator under randomized load: 100k seeded alloc/free sequences (sizes 1 B to
// 4 MiB, log-uniform) on real host memory, checked after every operation against a shadow
// model: no two live blocks overlap, every live block lies inside a region, in-use, requested,
// reserved and the counts equal the model's, growth happens exactly when no free block fits and
// follows the doubling rule, and the bytes written into each block survive until it is freed.
// Also under a limit and preallocated (out of memory must change nothing), from 4 threads, and a
// repeated step of allocations that must not call operator new once warm (this executable counts
// operator new).
#include <gtest/gtest.h>

#include <atomic>
#include <new>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "allocator_test_support.hpp"
#include "sluice/core/units.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/out_of_memory.hpp"

#include "counting_new.hpp"

namespace sluice {
namespace {

constexpr std::uint64_t kMiB = 1024 * 1024;
constexpr std::uint64_t kMaxRequest = 4 * kMiB;
constexpr std::size_t kMaxLive = 200;

struct Block {
  std::uint64_t requested;
  std::uint64_t size;  // rounded
  TensorCategory category;
  std::uint8_t tag;
};

// Writes the block's tag into its first and last (up to) 64 bytes: a block that overlapped
// another would find the other's tag there when it is freed.
void stamp(void* p, const Block& b) {
  const std::size_t n = std::min<std::uint64_t>(b.requested, 64);
  std::memset(p, b.tag, n);
  std::memset(static_cast<std::uint8_t*>(p) + b.requested - n, b.tag, n);
}

bool stamp_intact(const void* p, const Block& b) {
  const std::size_t n = std::min<std::uint64_t>(b.requested, 64);
  const auto* bytes = static_cast<const std::uint8_t*>(p);
  for (std::size_t i = 0; i < n; ++i) {
    if (bytes[i] != b.tag || bytes[b.requested - n + i] != b.tag) return false;
  }
  return true;
}

struct Shadow {
  std::map<std::uintptr_t, Block> live;
  std::uint64_t in_use = 0, requested = 0, peak = 0, total = 0;
  std::array<std::uint64_t, kTensorCategoryCount> by_category{};
};

// Checks the allocator against the shadow; returns the first discrepancy, or empty.
std::string compare(const Allocator& a, const Shadow& m) {
  const AllocatorStats s = a.stats();
  if (s.in_use_bytes != m.in_use) return "in use " + std::to_string(s.in_use_bytes) + " != " + std::to_string(m.in_use);
  if (s.requested_bytes != m.requested) return "requested bytes differ";
  if (s.peak_in_use_bytes != m.peak) return "peak differs";
  if (s.live_allocations != m.live.size()) return "live count differs";
  if (s.total_allocations != m.total) return "total count differs";
  for (std::size_t i = 0; i < kTensorCategoryCount; ++i) {
    if (s.by_category[i].in_use_bytes != m.by_category[i]) return "category in use differs";
  }
  const std::vector<AllocatorRegion> regions = a.regions();
  std::uint64_t reserved = 0;
  for (const AllocatorRegion& r : regions) reserved += r.bytes;
  if (s.reserved_bytes != reserved || s.regions != regions.size()) return "reserved differs from the regions";
  if (s.free_bytes != reserved - m.in_use) return "free bytes differ";
  std::uintptr_t end_of_previous = 0;
  std::size_t region = 0;
  for (const auto& [addr, block] : m.live) {
    if (addr < end_of_previous) return "two live blocks overlap";
    end_of_previous = addr + block.size;
    while (region < regions.size() &&
           reinterpret_cast<std::uintptr_t>(regions[region].base) + regions[region].bytes <= addr) {
      ++region;
    }
    if (region == regions.size() || reinterpret_cast<std::uintptr_t>(regions[region].base) > addr ||
        addr + block.size > reinterpret_cast<std::uintptr_t>(regions[region].base) + regions[region].bytes) {
      return "a live block lies outside every region";
    }
    if (a.allocated_size(reinterpret_cast<void*>(addr)) != block.size) return "allocated_size differs";
  }
  return {};
}

// With every block freed, each region must be one free chunk again: the largest free block is
// the largest region, and the fragmentation is what the other regions make of it.
void expect_coalesced(const Allocator& a) {
  const AllocatorStats s = a.stats();
  std::uint64_t largest = 0;
  for (const AllocatorRegion& r : a.regions()) largest = std::max(largest, r.bytes);
  EXPECT_EQ(s.in_use_bytes, 0u);
  EXPECT_EQ(s.largest_free_block, largest) << a.report();
  const double expected =
      s.reserved_bytes == 0 ? 0.0 : static_cast<double>(s.reserved_bytes - largest) / static_cast<double>(s.reserved_bytes);
  EXPECT_DOUBLE_EQ(s.fragmentation, expected);
}

struct Run {
  AllocatorOptions options;
  std::uint64_t seed;
  int operations;
};

void run_sequence(const Run& run) {
  Allocator a(make_host_backing(), run.options);
  Shadow m;
  std::mt19937_64 rng(run.seed);
  std::uniform_real_distribution<double> log_size(0.0, std::log(static_cast<double>(kMaxRequest)));
  std::uint64_t next_region = run.options.initial_region_bytes;
  int failures = 0;
  std::size_t max_live = 0, growths = 0;
  for (int op = 0; op < run.operations; ++op) {
    const bool alloc = m.live.empty() || (m.live.size() < kMaxLive && rng() % 2 == 0);
    if (alloc) {
      const auto bytes = static_cast<std::uint64_t>(std::exp(log_size(rng)));  // 1 B .. 4 MiB
      const std::uint64_t rounded = Allocator::rounded_size(bytes);
      const auto category = static_cast<TensorCategory>(rng() % kTensorCategoryCount);
      const AllocatorStats before = a.stats();
      void* p = nullptr;
      try {
        p = a.allocate(bytes, category);
      } catch (const OutOfMemory& e) {
        ASSERT_NE(run.options.limit, 0u) << "out of memory without a limit: " << e.what();
        ASSERT_LT(before.largest_free_block, rounded) << "a free block fitted: " << e.what();
        ASSERT_TRUE(test::same_stats(a.stats(), before)) << "a failed allocation changed the stats";
        ++failures;
        continue;
      }
      const AllocatorStats after = a.stats();
      const bool grew = after.regions != before.regions;
      growths += grew ? 1 : 0;
      ASSERT_EQ(grew, before.largest_free_block < rounded) << "op " << op << ": grew iff nothing fitted";
      if (grew && run.options.mode == AllocatorMode::kGrow) {
        std::uint64_t expected = next_region;
        while (expected < rounded) expected *= 2;
        if (run.options.limit != 0) expected = std::min(expected, run.options.limit - before.reserved_bytes);
        ASSERT_EQ(after.reserved_bytes - before.reserved_bytes, expected) << "op " << op;
        next_region = std::max(next_region, expected) * 2;
      }
      const Block b{bytes, rounded, category, static_cast<std::uint8_t>(rng())};
      stamp(p, b);
      m.live.emplace(reinterpret_cast<std::uintptr_t>(p), b);
      m.in_use += rounded;
      m.requested += bytes;
      m.peak = std::max(m.peak, m.in_use);
      m.by_category[index_of(category)] += rounded;
      ++m.total;
      max_live = std::max(max_live, m.live.size());
    } else {
      auto it = m.live.begin();
      std::advance(it, static_cast<std::ptrdiff_t>(rng() % m.live.size()));
      void* p = reinterpret_cast<void*>(it->first);
      ASSERT_TRUE(stamp_intact(p, it->second)) << "op " << op << ": a block's bytes were overwritten";
      a.deallocate(p);
      m.in_use -= it->second.size;
      m.requested -= it->second.requested;
      m.by_category[index_of(it->second.category)] -= it->second.size;
      m.live.erase(it);
    }
    const std::string diff = compare(a, m);
    ASSERT_TRUE(diff.empty()) << "op " << op << " (seed " << run.seed << "): " << diff;
    ASSERT_NO_THROW(a.check_invariants()) << "op " << op;
  }
  ASSERT_NO_THROW(a.check_invariants());
  const AllocatorStats end = a.stats();
  std::printf("seed %llu: %d operations, up to %zu live blocks, %zu growths to %s in %llu regions, peak %s, "
              "%d out of memory, fragmentation at the end %.3f\n",
              static_cast<unsigned long long>(run.seed), run.operations, max_live, growths,
              format_bytes(end.reserved_bytes).c_str(), static_cast<unsigned long long>(end.regions),
              format_bytes(end.peak_in_use_bytes).c_str(), failures, end.fragmentation);
  if (run.options.limit != 0) {
    EXPECT_GT(failures, 0) << "the limit was never reached: the test tests less";
  }
  for (const auto& [addr, block] : m.live) a.deallocate(reinterpret_cast<void*>(addr));
  const AllocatorStats s = a.stats();
  EXPECT_EQ(s.in_use_bytes, 0u);
  expect_coalesced(a);
}

TEST(AllocatorRandom, Grow100kOperationsSeed1) { run_sequence({{}, 1, 100'000}); }
TEST(AllocatorRandom, Grow100kOperationsSeed2) { run_sequence({{}, 2, 100'000}); }
TEST(AllocatorRandom, Grow100kOperationsSeed3) { run_sequence({{}, 3, 100'000}); }

TEST(AllocatorRandom, GrowWithLimit100kOperations) {
  run_sequence({{.limit = 64 * kMiB, .name = "limited"}, 4, 100'000});
}

TEST(AllocatorRandom, Preallocated100kOperations) {
  run_sequence({{.mode = AllocatorMode::kPreallocate, .limit = 48 * kMiB, .name = "prealloc"}, 5, 100'000});
}

TEST(AllocatorSteadyState, ARepeatedStepCallsNoOperatorNew) {
#if !SLUICE_COUNTING_NEW
  GTEST_SKIP() << "sanitizers own operator new";
#else
  // One "training step": a fixed sequence of 2000 allocations and frees over a window of 100
  // live blocks. The first step sizes the allocator's bookkeeping; the next must reuse it.
  Allocator a(test::FakeBacking::make(), {.name = "steady"});
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> log_size(0.0, std::log(static_cast<double>(kMaxRequest)));
  std::vector<std::uint64_t> sizes(2000);
  for (std::uint64_t& n : sizes) n = static_cast<std::uint64_t>(std::exp(log_size(rng)));
  std::vector<void*> window(100, nullptr);
  auto step = [&] {
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      void*& slot = window[i % window.size()];
      a.deallocate(slot);
      slot = a.allocate(sizes[i], TensorCategory::kActivations);
    }
  };
  step();
  const long before = ::sluice::test::new_calls();
  for (int i = 0; i < 5; ++i) step();
  EXPECT_EQ(::sluice::test::new_calls() - before, 0) << "operator new in a steady state";
  for (void* p : window) a.deallocate(p);
  a.check_invariants();
#endif
}

TEST(AllocatorThreads, FourThreadsAllocateAndFreeConcurrently) {
  Allocator a(make_host_backing(), {.name = "threads"});
  constexpr int kThreads = 4, kOps = 20'000;
  std::vector<std::thread> threads;
  std::vector<std::string> errors(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(100 + static_cast<std::uint64_t>(t));
      std::uniform_real_distribution<double> log_size(0.0, std::log(1.0 * kMiB));
      std::vector<std::pair<void*, Block>> mine;
      for (int op = 0; op < kOps && errors[static_cast<std::size_t>(t)].empty(); ++op) {
        if (mine.empty() || (mine.size() < 32 && rng() % 2 == 0)) {
          const auto bytes = static_cast<std::uint64_t>(std::exp(log_size(rng)));
          const Block b{bytes, Allocator::rounded_size(bytes), static_cast<TensorCategory>(t),
                        static_cast<std::uint8_t>(t * 50 + op % 50)};
          void* p = a.allocate(bytes, b.category);
          stamp(p, b);
          mine.emplace_back(p, b);
        } else {
          const std::size_t i = rng() % mine.size();
          if (!stamp_intact(mine[i].first, mine[i].second)) errors[static_cast<std::size_t>(t)] = "overwritten";
          a.deallocate(mine[i].first);
          mine[i] = mine.back();
          mine.pop_back();
        }
      }
      for (auto& [p, b] : mine) a.deallocate(p);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) EXPECT_TRUE(e.empty()) << e;
  a.check_invariants();
  const AllocatorStats s = a.stats();
  EXPECT_EQ(s.in_use_bytes, 0u);
  EXPECT_EQ(s.live_allocations, 0u);
  EXPECT_GT(s.total_allocations, static_cast<std::uint64_t>(kThreads) * kOps / 3);
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_GT(s.by_category[static_cast<std::size_t>(t)].peak_in_use_bytes, 0u);
    EXPECT_EQ(s.by_category[static_cast<std::size_t>(t)].in_use_bytes, 0u);
  }
  expect_coalesced(a);
}

}  // namespace
}  // namespace sluice
