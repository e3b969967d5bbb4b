// AVX2 resample kernels: the horizontal pass multiplies one 8-byte tap group (8 grey taps, or 2 RGB
// or RGBA taps) by its 8 lane weights per instruction; the vertical pass sums 32 output bytes per
// iteration. int32 products with Pillow's 22-bit weights, so the results equal the scalar kernels
// (and Pillow) bit for bit. Compiled with per-function target attributes, not a file-wide -mavx2,
// so no AVX2 instruction can leak into code that runs before the CPU check.
#include <cstring>

#include "stages/resample_kernels.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

namespace sluice::stages::resample_detail {
namespace {

#define SLUICE_AVX2 __attribute__((target("avx2")))

// 8 source bytes widened to int32 lanes; `readable` < 8 only at the very end of a source row,
// where a full load could run past the caller's buffer.
SLUICE_AVX2 inline __m256i load_group(const std::uint8_t* p, int readable) {
  if (readable >= kGroupBytes) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  std::uint8_t buf[kGroupBytes] = {};
  std::memcpy(buf, p, static_cast<std::size_t>(readable));
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(buf)));
}

// Four fixed-point sums to the low 4 bytes, clipped to 0..255 (signed then unsigned saturation,
// as clip_fixed).
SLUICE_AVX2 inline __m128i pack4(__m128i sums) {
  const __m128i v = _mm_srai_epi32(_mm_add_epi32(sums, _mm_set1_epi32(kHalf)), kPrecisionBits);
  const __m128i w = _mm_packs_epi32(v, v);
  return _mm_packus_epi16(w, w);
}

SLUICE_AVX2 inline __m256i group_product(const std::uint8_t* p, const std::int32_t* w) {
  const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_mullo_epi32(v, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w)));
}

// Sum over `groups` tap groups (G > 0: exactly G, unrolled) whose loads all stay in the row.
template <int C, int G>
SLUICE_AVX2 inline __m256i pixel_sum(const std::uint8_t* p, const std::int32_t* w, int groups) {
  constexpr int kStep = taps_per_group(C) * C;
  const int n = G > 0 ? G : groups;
  __m256i acc = group_product(p, w);
  for (int g = 1; g < n; ++g) {
    acc = _mm256_add_epi32(acc, group_product(p + g * kStep, w + g * kGroupBytes));
  }
  return acc;
}

// The same at the row's end: groups past the row hold only zero-weight taps and are skipped.
template <int C>
SLUICE_AVX2 inline __m256i pixel_sum_at_end(const std::uint8_t* p, const std::int32_t* w,
                                            int groups, int readable) {
  constexpr int kStep = taps_per_group(C) * C;
  __m256i acc = _mm256_setzero_si256();
  for (int g = 0; g < groups && readable - g * kStep > 0; ++g) {
    const __m256i v = load_group(p + g * kStep, readable - g * kStep);
    const __m256i k = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + g * kGroupBytes));
    acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(v, k));
  }
  return acc;
}

template <int C, int G>
SLUICE_AVX2 void horizontal_cg(const std::uint8_t* src, int src_x0, int src_bytes,
                               const HorizontalTaps& t, std::uint8_t* __restrict dst) {
  constexpr int kStep = taps_per_group(C) * C;
  const int count = t.count;
  const int groups = G > 0 ? G : t.groups;
  const std::int32_t* __restrict first = t.first;
  const std::int32_t* __restrict lanes = t.lanes;
  const std::ptrdiff_t lanes_per_pixel = static_cast<std::ptrdiff_t>(groups) * kGroupBytes;
  const int span = (groups - 1) * kStep + kGroupBytes;  // bytes pixel_sum reads
  for (int o = 0; o < count; ++o) {
    const int offset = (first[o] - src_x0) * C;
    const std::uint8_t* p = src + offset;
    const std::int32_t* w = lanes + o * lanes_per_pixel;
    const __m256i acc = offset + span <= src_bytes
                            ? pixel_sum<C, G>(p, w, groups)
                            : pixel_sum_at_end<C>(p, w, groups, src_bytes - offset);
    const __m128i lo = _mm256_castsi256_si128(acc);
    const __m128i hi = _mm256_extracti128_si256(acc, 1);
    if constexpr (C == 1) {
      __m128i s = _mm_add_epi32(lo, hi);
      s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
      s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
      dst[o] = clip_fixed(_mm_cvtsi128_si32(s) + kHalf);
    } else if constexpr (C == 3) {
      // lanes: lo = [r0 g0 b0 r1], hi = [g1 b1 0 0]; shifting (hi:lo) by 3 lanes lines tap 1 up.
      const __m128i px = pack4(_mm_add_epi32(lo, _mm_alignr_epi8(hi, lo, 12)));
      // The 4th byte lands on the next pixel's first byte, rewritten next iteration.
      if (o + 1 < count) {
        _mm_storeu_si32(dst + o * 3, px);
      } else {
        const std::uint32_t last = static_cast<std::uint32_t>(_mm_cvtsi128_si32(px));
        std::memcpy(dst + o * 3, &last, 3);
      }
    } else {
      _mm_storeu_si32(dst + o * 4, pack4(_mm_add_epi32(lo, hi)));
    }
  }
}

// The group count is fixed per row: the common counts get their own unrolled loop.
template <int C>
SLUICE_AVX2 void horizontal_c(const std::uint8_t* src, int src_x0, int src_bytes,
                              const HorizontalTaps& t, std::uint8_t* dst) {
  switch (t.groups) {
    case 1: return horizontal_cg<C, 1>(src, src_x0, src_bytes, t, dst);
    case 2: return horizontal_cg<C, 2>(src, src_x0, src_bytes, t, dst);
    case 3: return horizontal_cg<C, 3>(src, src_x0, src_bytes, t, dst);
    case 4: return horizontal_cg<C, 4>(src, src_x0, src_bytes, t, dst);
    default: return horizontal_cg<C, 0>(src, src_x0, src_bytes, t, dst);
  }
}

SLUICE_AVX2 inline __m256i weighted(const std::uint8_t* p, __m256i w) {
  return _mm256_mullo_epi32(
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))), w);
}

SLUICE_AVX2 inline __m256i shift_sums(__m256i acc) {
  return _mm256_srai_epi32(acc, kPrecisionBits);
}

}  // namespace

SLUICE_AVX2 void horizontal_avx2(const std::uint8_t* src, int src_x0, int src_bytes,
                                 const HorizontalTaps& taps, std::uint8_t* dst) {
  switch (taps.channels) {
    case 1: return horizontal_c<1>(src, src_x0, src_bytes, taps, dst);
    case 3: return horizontal_c<3>(src, src_x0, src_bytes, taps, dst);
    default: return horizontal_c<4>(src, src_x0, src_bytes, taps, dst);
  }
}

SLUICE_AVX2 void vertical_avx2(const std::uint8_t* rows, std::ptrdiff_t stride,
                               const std::int32_t* weights, int taps, int bytes,
                               std::uint8_t* dst) {
  const __m256i half = _mm256_set1_epi32(kHalf);
  // packs/packus work within 128-bit halves; this puts the four 8-byte runs back in order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  int x = 0;
  for (; x + 32 <= bytes; x += 32) {
    __m256i a0 = half, a1 = half, a2 = half, a3 = half;
    const std::uint8_t* p = rows + x;
    for (int t = 0; t < taps; ++t, p += stride) {
      const __m256i w = _mm256_set1_epi32(weights[t]);
      a0 = _mm256_add_epi32(a0, weighted(p, w));
      a1 = _mm256_add_epi32(a1, weighted(p + 8, w));
      a2 = _mm256_add_epi32(a2, weighted(p + 16, w));
      a3 = _mm256_add_epi32(a3, weighted(p + 24, w));
    }
    const __m256i s01 = _mm256_packs_epi32(shift_sums(a0), shift_sums(a1));
    const __m256i s23 = _mm256_packs_epi32(shift_sums(a2), shift_sums(a3));
    const __m256i bytes32 = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(s01, s23), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + x), bytes32);
  }
  for (; x + 8 <= bytes; x += 8) {
    __m256i a = half;
    const std::uint8_t* p = rows + x;
    for (int t = 0; t < taps; ++t, p += stride) {
      a = _mm256_add_epi32(a, weighted(p, _mm256_set1_epi32(weights[t])));
    }
    a = shift_sums(a);
    const __m128i s = _mm_packs_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + x), _mm_packus_epi16(s, s));
  }
  for (; x < bytes; ++x) {  // the last few bytes: no load may pass the row's end
    std::int32_t sum = kHalf;
    const std::uint8_t* p = rows + x;
    for (int t = 0; t < taps; ++t, p += stride) sum += *p * weights[t];
    dst[x] = clip_fixed(sum);
  }
}

#undef SLUICE_AVX2

}  // namespace sluice::stages::resample_detail

#endif  // x86
