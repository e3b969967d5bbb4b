// SSE4.1 resample kernels, for x86 CPUs without AVX2: the same 8-byte tap groups and lane weights
// as the AVX2 kernels, taken as two 4-lane halves; the vertical pass sums 16 output bytes per
// iteration. int32 products with Pillow's 22-bit weights: bit-exact with the scalar kernels.
// Per-function target attributes, not a file-wide -msse4.1 (see resample_avx2.cpp).
#include <cstring>

#include "stages/resample_kernels.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

namespace sluice::stages::resample_detail {
namespace {

#define SLUICE_SSE41 __attribute__((target("sse4.1")))

// 8 source bytes; `readable` < 8 only at the very end of a source row (see resample_avx2.cpp).
SLUICE_SSE41 inline __m128i load_group(const std::uint8_t* p, int readable) {
  if (readable >= kGroupBytes) return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  std::uint8_t buf[kGroupBytes] = {};
  std::memcpy(buf, p, static_cast<std::size_t>(readable));
  return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(buf));
}

SLUICE_SSE41 inline __m128i pack4(__m128i sums) {
  const __m128i v = _mm_srai_epi32(_mm_add_epi32(sums, _mm_set1_epi32(kHalf)), kPrecisionBits);
  const __m128i w = _mm_packs_epi32(v, v);
  return _mm_packus_epi16(w, w);
}

// One tap group times its lanes, as two 4-lane halves.
SLUICE_SSE41 inline void add_group(__m128i v, const std::int32_t* w, __m128i& lo, __m128i& hi) {
  const __m128i k0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w));
  const __m128i k1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 4));
  lo = _mm_add_epi32(lo, _mm_mullo_epi32(_mm_cvtepu8_epi32(v), k0));
  hi = _mm_add_epi32(hi, _mm_mullo_epi32(_mm_cvtepu8_epi32(_mm_srli_si128(v, 4)), k1));
}

template <int C, int G>
SLUICE_SSE41 void horizontal_cg(const std::uint8_t* src, int src_x0, int src_bytes,
                                const HorizontalTaps& t, std::uint8_t* __restrict dst) {
  constexpr int kStep = taps_per_group(C) * C;
  const int count = t.count;
  const int groups = G > 0 ? G : t.groups;
  const std::int32_t* __restrict first = t.first;
  const std::int32_t* __restrict lanes = t.lanes;
  const std::ptrdiff_t lanes_per_pixel = static_cast<std::ptrdiff_t>(groups) * kGroupBytes;
  const int span = (groups - 1) * kStep + kGroupBytes;  // bytes the in-row loop reads
  for (int o = 0; o < count; ++o) {
    const int offset = (first[o] - src_x0) * C;
    const std::uint8_t* p = src + offset;
    const std::int32_t* w = lanes + o * lanes_per_pixel;
    __m128i lo = _mm_setzero_si128();
    __m128i hi = _mm_setzero_si128();
    if (offset + span <= src_bytes) {
      for (int g = 0; g < groups; ++g) {
        add_group(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + g * kStep)),
                  w + g * kGroupBytes, lo, hi);
      }
    } else {  // at the row's end: groups past it hold only zero-weight taps
      const int readable = src_bytes - offset;
      for (int g = 0; g < groups && readable - g * kStep > 0; ++g) {
        add_group(load_group(p + g * kStep, readable - g * kStep), w + g * kGroupBytes, lo, hi);
      }
    }
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
SLUICE_SSE41 void horizontal_c(const std::uint8_t* src, int src_x0, int src_bytes,
                               const HorizontalTaps& t, std::uint8_t* dst) {
  switch (t.groups) {
    case 1: return horizontal_cg<C, 1>(src, src_x0, src_bytes, t, dst);
    case 2: return horizontal_cg<C, 2>(src, src_x0, src_bytes, t, dst);
    case 3: return horizontal_cg<C, 3>(src, src_x0, src_bytes, t, dst);
    case 4: return horizontal_cg<C, 4>(src, src_x0, src_bytes, t, dst);
    default: return horizontal_cg<C, 0>(src, src_x0, src_bytes, t, dst);
  }
}

SLUICE_SSE41 inline __m128i weighted(const std::uint8_t* p, __m128i w) {
  std::int32_t four;
  std::memcpy(&four, p, 4);
  return _mm_mullo_epi32(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(four)), w);
}

SLUICE_SSE41 inline __m128i shift_sums(__m128i acc) { return _mm_srai_epi32(acc, kPrecisionBits); }

}  // namespace

SLUICE_SSE41 void horizontal_sse41(const std::uint8_t* src, int src_x0, int src_bytes,
                                   const HorizontalTaps& taps, std::uint8_t* dst) {
  switch (taps.channels) {
    case 1: return horizontal_c<1>(src, src_x0, src_bytes, taps, dst);
    case 3: return horizontal_c<3>(src, src_x0, src_bytes, taps, dst);
    default: return horizontal_c<4>(src, src_x0, src_bytes, taps, dst);
  }
}

SLUICE_SSE41 void vertical_sse41(const std::uint8_t* rows, std::ptrdiff_t stride,
                                 const std::int32_t* weights, int taps, int bytes,
                                 std::uint8_t* dst) {
  const __m128i half = _mm_set1_epi32(kHalf);
  int x = 0;
  for (; x + 16 <= bytes; x += 16) {
    __m128i a0 = half, a1 = half, a2 = half, a3 = half;
    const std::uint8_t* p = rows + x;
    for (int t = 0; t < taps; ++t, p += stride) {
      const __m128i w = _mm_set1_epi32(weights[t]);
      a0 = _mm_add_epi32(a0, weighted(p, w));
      a1 = _mm_add_epi32(a1, weighted(p + 4, w));
      a2 = _mm_add_epi32(a2, weighted(p + 8, w));
      a3 = _mm_add_epi32(a3, weighted(p + 12, w));
    }
    const __m128i s01 = _mm_packs_epi32(shift_sums(a0), shift_sums(a1));
    const __m128i s23 = _mm_packs_epi32(shift_sums(a2), shift_sums(a3));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + x), _mm_packus_epi16(s01, s23));
  }
  for (; x + 4 <= bytes; x += 4) {
    __m128i a = half;
    const std::uint8_t* p = rows + x;
    for (int t = 0; t < taps; ++t, p += stride) {
      a = _mm_add_epi32(a, weighted(p, _mm_set1_epi32(weights[t])));
    }
    const __m128i s = _mm_packs_epi32(shift_sums(a), shift_sums(a));
    const std::uint32_t px = static_cast<std::uint32_t>(_mm_cvtsi128_si32(_mm_packus_epi16(s, s)));
    std::memcpy(dst + x, &px, 4);
  }
  for (; x < bytes; ++x) {  // the last few bytes: no load may pass the row's end
    std::int32_t sum = kHalf;
    const std::uint8_t* p = rows + x;
    for (int t = 0; t < taps; ++t, p += stride) sum += *p * weights[t];
    dst[x] = clip_fixed(sum);
  }
}

#undef SLUICE_SSE41

}  // namespace sluice::stages::resample_detail

#endif  // x86
