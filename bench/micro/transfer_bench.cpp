// Host-to-device transfer: what the device path gets out of the bus, measured in one run.
//   pinned_memcpy_peak   cudaMemcpy from page-locked memory, the reference peak
//   ring_pinned          sluice's TransferRing (pinned slots, cudaMemcpyAsync on the copy stream,
//                        events, consumer stream waits): what the pipeline gets
//   pageable_async       cudaMemcpyAsync from ordinary memory: the cost of not pinning
//   ship_*               a 64 x 224 x 224 x 3 batch through the ring as f32, as f16, or as u8
//                        normalised to f32 / f16 on the GPU (images/s: the bytes the bus no
//                        longer carries)
// Prints the ratios and the target (ring_pinned >= 0.8 x pinned_memcpy_peak) at the end, then
// one line `transfer_bench_json {...}` with every rate (bytes/s, images/s for ship_*) for
// scripts/device-check. Without a usable GPU it prints one line and exits 0.
// Run: build/bench/transfer_bench
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "sluice/detail/device/copy.hpp"
#include "sluice/device/device.hpp"
#include "sluice/detail/device/device_pool.hpp"
#include "sluice/detail/device/gpu_normalize.hpp"
#include "sluice/detail/device/pinned.hpp"
#include "sluice/detail/device/transfer_ring.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kCopyBytes = 64u << 20;
constexpr int kBatch = 64, kSide = 224, kChannels = 3;
const sluice::DeviceId kDevice = sluice::cuda(0);

// Rates (bytes or images per second) of each benchmark's final run, for the summary.
std::map<std::string, double>& results() {
  static std::map<std::string, double> r;
  return r;
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void BM_pinned_memcpy_peak(benchmark::State& state) {
  auto pool = sluice::make_caching_pool(kDevice);
  sluice::PinnedBuffer src(kDevice, kCopyBytes);
  std::memset(src.data(), 1, kCopyBytes);
  sluice::DeviceBuffer dst(*pool, kCopyBytes);
  const auto start = Clock::now();
  for (auto _ : state) sluice::copy_to_device(kDevice, dst.data(), src.data(), kCopyBytes);
  results()["pinned_memcpy_peak"] = static_cast<double>(state.iterations()) * kCopyBytes / seconds_since(start);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(kCopyBytes));
}

void BM_ring_pinned(benchmark::State& state) {
  sluice::TransferRing ring({.device = kDevice, .slots = 3, .host_slot_bytes = kCopyBytes});
  for (int s = 0; s < 3; ++s) std::memset(ring.host_slot(s).data(), 1, kCopyBytes);
  sluice::Stream consumer(kDevice);
  int slot = 0;
  const auto start = Clock::now();
  for (auto _ : state) {
    ring.begin_fill(slot);
    ring.submit(slot, kCopyBytes);
    ring.hand_over(slot, consumer);
    ring.release(slot, consumer);
    slot = (slot + 1) % 3;
  }
  consumer.synchronize();
  ring.copy_stream().synchronize();
  results()["ring_pinned"] = static_cast<double>(state.iterations()) * kCopyBytes / seconds_since(start);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(kCopyBytes));
  state.counters["host_waits"] = static_cast<double>(ring.stats().fill_waits);
}

void BM_pageable_async(benchmark::State& state) {
  auto pool = sluice::make_caching_pool(kDevice);
  std::vector<std::uint8_t> src(kCopyBytes, 1);  // touched: no page faults inside the copy
  sluice::DeviceBuffer dst(*pool, kCopyBytes);
  sluice::Stream stream(kDevice);
  const auto start = Clock::now();
  for (auto _ : state) sluice::copy_to_device_async(dst.data(), src.data(), kCopyBytes, stream);
  stream.synchronize();
  results()["pageable_async"] = static_cast<double>(state.iterations()) * kCopyBytes / seconds_since(start);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(kCopyBytes));
}

// A batch through the ring: `host_dtype` bytes over the bus; with `gpu_out` set, u8 is shipped
// and the normalize kernel produces `gpu_out` on the device.
void ship(benchmark::State& state, const char* name, sluice::DType host_dtype, bool normalize_on_gpu,
          sluice::DType gpu_out) {
  sluice::GpuNormalizer normalizer;
  normalizer.setup({.mean = {0.485f, 0.456f, 0.406f}, .std = {0.229f, 0.224f, 0.225f}, .dtype = gpu_out}, kChannels);
  const std::size_t elements = static_cast<std::size_t>(kBatch) * kSide * kSide * kChannels;
  const std::size_t host_bytes = elements * sluice::size_of(host_dtype);
  const std::size_t out_offset = (host_bytes + 4095) / 4096 * 4096;
  const std::size_t device_bytes = normalize_on_gpu ? out_offset + normalizer.output_bytes(kBatch, kSide, kSide) : host_bytes;
  sluice::TransferRing ring({.device = kDevice, .slots = 3, .host_slot_bytes = host_bytes, .device_slot_bytes = device_bytes});
  for (int s = 0; s < 3; ++s) std::memset(ring.host_slot(s).data(), 7, host_bytes);
  const sluice::DeviceNormalizeStep step{.normalizer = &normalizer, .src_offset = 0, .dst_offset = out_offset,
                                         .batch = kBatch, .height = kSide, .width = kSide};
  sluice::Stream consumer(kDevice);
  int slot = 0;
  const auto start = Clock::now();
  for (auto _ : state) {
    ring.begin_fill(slot);
    ring.submit(slot, host_bytes, normalize_on_gpu ? &step : nullptr);
    ring.hand_over(slot, consumer);
    ring.release(slot, consumer);
    slot = (slot + 1) % 3;
  }
  consumer.synchronize();
  results()[name] = static_cast<double>(state.iterations()) * kBatch / seconds_since(start);
  state.SetItemsProcessed(state.iterations() * kBatch);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(host_bytes));
}

void BM_ship_f32(benchmark::State& s) { ship(s, "ship_f32", sluice::DType::kF32, false, sluice::DType::kF32); }
void BM_ship_f16(benchmark::State& s) { ship(s, "ship_f16", sluice::DType::kF16, false, sluice::DType::kF16); }
void BM_ship_u8_normalize_f32_on_gpu(benchmark::State& s) {
  ship(s, "ship_u8_gpu_f32", sluice::DType::kU8, true, sluice::DType::kF32);
}
void BM_ship_u8_normalize_f16_on_gpu(benchmark::State& s) {
  ship(s, "ship_u8_gpu_f16", sluice::DType::kU8, true, sluice::DType::kF16);
}

BENCHMARK(BM_pinned_memcpy_peak)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ring_pinned)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_pageable_async)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ship_f32)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ship_f16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ship_u8_normalize_f32_on_gpu)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ship_u8_normalize_f16_on_gpu)->UseRealTime()->Unit(benchmark::kMillisecond);

void print_summary() {
  const auto& r = results();
  const auto get = [&r](const char* k) {
    const auto it = r.find(k);
    return it == r.end() ? 0.0 : it->second;
  };
  const double peak = get("pinned_memcpy_peak");
  const double ring = get("ring_pinned");
  const double pageable = get("pageable_async");
  std::printf("\ntransfer summary (%s, one run):\n", sluice::describe(kDevice).name.c_str());
  if (peak > 0) std::printf("  pinned cudaMemcpy peak     %6.1f GB/s\n", peak / 1e9);
  if (peak > 0 && ring > 0) {
    const double ratio = ring / peak;
    std::printf("  ring (pinned, async) H2D   %6.1f GB/s = %.2f x peak  [target >= 0.80: %s]\n", ring / 1e9, ratio,
                ratio >= 0.8 ? "PASS" : "FAIL");
  }
  if (peak > 0 && pageable > 0) {
    std::printf("  pageable async H2D         %6.1f GB/s = %.2f x peak\n", pageable / 1e9, pageable / peak);
  }
  const double f32 = get("ship_f32");
  for (const char* k : {"ship_f16", "ship_u8_gpu_f32", "ship_u8_gpu_f16"}) {
    if (f32 > 0 && get(k) > 0) {
      std::printf("  %-26s %8.0f images/s = %.2f x shipping f32 (%.0f images/s)\n", k, get(k), get(k) / f32, f32);
    }
  }
  std::printf("transfer_bench_json {\"device\": \"%s\"", sluice::describe(kDevice).name.c_str());
  for (const auto& [name, rate] : r) std::printf(", \"%s\": %.6g", name.c_str(), rate);
  std::printf("}\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (sluice::cuda_device_count() == 0) {
    std::printf("transfer_bench: skipped, no usable CUDA device (%s)\n", sluice::cuda_unavailable_reason().c_str());
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  print_summary();
  benchmark::Shutdown();
  return 0;
}
