// Normalize kernel: a 224x224 RGB sample into f32/f16 CHW, scalar vs AVX2 row kernels, writing
// into a rotating 64-sample batch as the pipeline does (so the stores reach memory, not cache).
#include <benchmark/benchmark.h>

#include <vector>

#include "sluice/detail/memory/aligned_buffer.hpp"
#include "stages/image/normalize.hpp"

namespace {

using sluice::DType;
using sluice::Layout;

void run(benchmark::State& state, DType dtype, Layout layout, bool scalar) {
  constexpr int kSide = 224;
  constexpr int kBatch = 64;
  std::vector<std::uint8_t> pixels(kSide * kSide * 3);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(i * 131 + 7);
  sluice::stages::NormalizeKernel kernel;
  if (dtype == DType::kU8) {
    kernel.setup({{}, {}, layout, dtype}, 3);
  } else {
    kernel.setup({{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}, layout, dtype}, 3);
  }
  if (scalar) kernel.use_scalar_kernels();
  const std::size_t sample = kernel.sample_bytes({kSide, kSide});
  sluice::AlignedBuffer batch(sample * kBatch);
  const sluice::ConstImageView view(pixels.data(), kSide, kSide, 3, kSide * 3);
  int slot = 0;
  for (auto _ : state) {
    kernel.run(view, (slot & 1) != 0, batch.data() + sample * static_cast<std::size_t>(slot));
    slot = (slot + 1) % kBatch;
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(sample));
}

void BM_f32_nchw_scalar(benchmark::State& s) { run(s, DType::kF32, Layout::kNCHW, true); }
void BM_f32_nchw_avx2(benchmark::State& s) { run(s, DType::kF32, Layout::kNCHW, false); }
void BM_f32_nhwc_avx2(benchmark::State& s) { run(s, DType::kF32, Layout::kNHWC, false); }
void BM_f16_nchw_scalar(benchmark::State& s) { run(s, DType::kF16, Layout::kNCHW, true); }
void BM_f16_nchw_avx2(benchmark::State& s) { run(s, DType::kF16, Layout::kNCHW, false); }
void BM_u8_nchw(benchmark::State& s) { run(s, DType::kU8, Layout::kNCHW, false); }
BENCHMARK(BM_f32_nchw_scalar);
BENCHMARK(BM_f32_nchw_avx2);
BENCHMARK(BM_f32_nhwc_avx2);
BENCHMARK(BM_f16_nchw_scalar);
BENCHMARK(BM_f16_nchw_avx2);
BENCHMARK(BM_u8_nchw);

}  // namespace

BENCHMARK_MAIN();
