// Normalize kernel: a 224x224 RGB sample into f32/f16 CHW, scalar vs AVX2 row kernels, writing
// into a rotating 64-sample batch as the pipeline does (so the stores reach memory, not cache).
// The AVX2 f32 CHW case three ways: the kernels' exact FMA divisions (avx2), their table gather
// (avx2_table), and, as the yardstick they were chosen against, fma(x, 1/(255 std), -mean/std),
// which is not torchvision's value (fma_inexact, a row kernel of this file only).
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "sluice/detail/memory/aligned_buffer.hpp"
#include "stages/image/normalize.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

using sluice::DType;
using sluice::Layout;
namespace nd = sluice::stages::normalize_detail;

enum class Variant { kBest, kScalar, kTable, kFmaInexact };

#if defined(__x86_64__)
// One multiply-add per element: out = x * scale + shift, streamed as the kernels stream.
__attribute__((target("avx2,fma"))) void plane_f32_fma_inexact(const std::uint8_t* src, int n, int c,
                                                                const nd::Affine& a, bool stream, float* dst) {
  const float scale = 1.0f / (255.0f * a.std[c]);
  const float shift = -a.mean[c] / a.std[c];
  const __m256 vs = _mm256_set1_ps(scale), vb = _mm256_set1_ps(shift);
  int i = 0;
  for (; i < n && (reinterpret_cast<std::uintptr_t>(dst + i) & 31) != 0; ++i) dst[i] = static_cast<float>(src[i]) * scale + shift;
  for (; i + 8 <= n; i += 8) {
    std::int64_t bytes;
    std::memcpy(&bytes, src + i, 8);
    const __m256 x = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bytes)));
    const __m256 v = _mm256_fmadd_ps(x, vs, vb);
    if (stream) {
      _mm256_stream_ps(dst + i, v);
    } else {
      _mm256_storeu_ps(dst + i, v);
    }
  }
  for (; i < n; ++i) dst[i] = static_cast<float>(src[i]) * scale + shift;
}
#endif

void run(benchmark::State& state, DType dtype, Layout layout, Variant variant) {
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
  static nd::RowKernels inexact{};
  if (variant == Variant::kScalar) kernel.use_scalar_kernels();
  if (variant == Variant::kTable) kernel.use_table_lookup();
  if (variant == Variant::kFmaInexact) {
#if defined(__x86_64__)
    if (nd::avx2_kernels() == nullptr) {
      state.SkipWithError("no AVX2");
      return;
    }
    inexact = *nd::avx2_kernels();
    inexact.plane_f32 = plane_f32_fma_inexact;
    kernel.use_kernels(inexact);
#else
    state.SkipWithError("x86 only");
    return;
#endif
  }
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

void BM_f32_nchw_scalar(benchmark::State& s) { run(s, DType::kF32, Layout::kNCHW, Variant::kScalar); }
void BM_f32_nchw_avx2(benchmark::State& s) { run(s, DType::kF32, Layout::kNCHW, Variant::kBest); }
void BM_f32_nchw_avx2_table(benchmark::State& s) { run(s, DType::kF32, Layout::kNCHW, Variant::kTable); }
void BM_f32_nchw_fma_inexact(benchmark::State& s) { run(s, DType::kF32, Layout::kNCHW, Variant::kFmaInexact); }
void BM_f32_nhwc_avx2(benchmark::State& s) { run(s, DType::kF32, Layout::kNHWC, Variant::kBest); }
void BM_f32_nhwc_avx2_table(benchmark::State& s) { run(s, DType::kF32, Layout::kNHWC, Variant::kTable); }
void BM_f16_nchw_scalar(benchmark::State& s) { run(s, DType::kF16, Layout::kNCHW, Variant::kScalar); }
void BM_f16_nchw_avx2(benchmark::State& s) { run(s, DType::kF16, Layout::kNCHW, Variant::kBest); }
void BM_f16_nchw_avx2_table(benchmark::State& s) { run(s, DType::kF16, Layout::kNCHW, Variant::kTable); }
void BM_u8_nchw(benchmark::State& s) { run(s, DType::kU8, Layout::kNCHW, Variant::kBest); }
BENCHMARK(BM_f32_nchw_scalar);
BENCHMARK(BM_f32_nchw_avx2);
BENCHMARK(BM_f32_nchw_avx2_table);
BENCHMARK(BM_f32_nchw_fma_inexact);
BENCHMARK(BM_f32_nhwc_avx2);
BENCHMARK(BM_f32_nhwc_avx2_table);
BENCHMARK(BM_f16_nchw_scalar);
BENCHMARK(BM_f16_nchw_avx2);
BENCHMARK(BM_f16_nchw_avx2_table);
BENCHMARK(BM_u8_nchw);

}  // namespace

BENCHMARK_MAIN();
