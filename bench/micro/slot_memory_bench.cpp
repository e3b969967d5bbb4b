// The batch ring's slot memory, four ways: what a ring of 4 slots of 64 x 3 x 224 x 224 f32
// (154 MB) costs to prepare in set-up and to write for the first time (the first epoch's batches)
// and the second (the steady state), with plain 4 KiB pages faulted in by the writers, populated
// in set-up (MADV_POPULATE_WRITE), backed by transparent huge pages (MADV_HUGEPAGE), or both (what
// BatchRing::add_slot does; docs/decisions/batch-ring-memory.md). Counters, per ring: prepare_ms
// (set-up), first_ms (the first write of every byte), second_ms (the next write).
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kSlotBytes = std::size_t{64} * 3 * 224 * 224 * 4;
constexpr int kSlots = 4;

enum Prepare : int { kPlain = 0, kPopulate = 1, kHugePages = 2, kHugePagesPopulated = 3 };

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

void prepare(std::uint8_t* p, std::size_t bytes, int how) {
  constexpr std::uintptr_t kPage = 4096, kHuge = std::uintptr_t{2} << 20;
  const auto b = reinterpret_cast<std::uintptr_t>(p), e = b + bytes;
  if (how == kHugePages || how == kHugePagesPopulated) {
    const std::uintptr_t hb = (b + kHuge - 1) & ~(kHuge - 1), he = e & ~(kHuge - 1);
    if (he > hb) ::madvise(reinterpret_cast<void*>(hb), he - hb, MADV_HUGEPAGE);
  }
  if (how == kPopulate || how == kHugePagesPopulated) {
    const std::uintptr_t pb = (b + kPage - 1) & ~(kPage - 1), pe = e & ~(kPage - 1);
    ::madvise(reinterpret_cast<void*>(pb), pe - pb, MADV_POPULATE_WRITE);
  }
}

void BM_slot_memory(benchmark::State& state) {
  const int how = static_cast<int>(state.range(0));
  double prepare_ms = 0, first_ms = 0, second_ms = 0;
  for (auto _ : state) {
    std::vector<std::uint8_t*> slots;
    Clock::time_point t = Clock::now();
    for (int s = 0; s < kSlots; ++s) {
      slots.push_back(static_cast<std::uint8_t*>(::operator new(kSlotBytes, std::align_val_t{64})));
      prepare(slots.back(), kSlotBytes, how);
    }
    prepare_ms += ms_since(t);
    t = Clock::now();
    for (auto* p : slots) std::memset(p, 1, kSlotBytes);
    first_ms += ms_since(t);
    t = Clock::now();
    for (auto* p : slots) std::memset(p, 2, kSlotBytes);
    second_ms += ms_since(t);
    benchmark::DoNotOptimize(slots.front()[kSlotBytes - 1]);
    for (auto* p : slots) ::operator delete(p, std::align_val_t{64});
  }
  const auto n = static_cast<double>(state.iterations());
  state.counters["prepare_ms"] = prepare_ms / n;
  state.counters["first_ms"] = first_ms / n;
  state.counters["second_ms"] = second_ms / n;
}

BENCHMARK(BM_slot_memory)->ArgName("plain0_populate1_huge2_both3")->DenseRange(0, 3)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
