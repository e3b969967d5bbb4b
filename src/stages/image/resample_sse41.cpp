// SSE4.1 resample kernels, for x86 CPUs without AVX2: the horizontal pass is the AVX2 one (pmaddwd
// on split weights, same table) one 128-bit lane at a time; the vertical pass sums 16 output
// bytes per iteration with int32 products. Bit-exact with the scalar kernels.
// Per-function target attributes, not a file-wide -msse4.1 (see resample_avx2.cpp).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "stages/image/resample_kernels.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

namespace sluice::stages::resample_detail {
namespace {

#define SLUICE_SSE41 __attribute__((target("sse4.1")))

// The horizontal pass as in resample_avx2.cpp (same table, windows, masks and rounding), one
// 128-bit lane at a time: a block's two lanes are two independent chains.
template <int C>
struct Window {
  static constexpr int kBytes = C == 1 ? 8 : 16;          // read per pixel
  static constexpr int kStep = 2 * taps_per_unit(C) * C;  // between a pixel's windows
};

template <int C>
SLUICE_SSE41 inline __m128i unit_mask(int half) {
  alignas(16) std::int8_t m[16];
  for (int i = 0; i < 16; ++i) m[i] = -1;  // high bit set: zero
  for (int k = 0; k < 4; ++k) {
    if (C == 1) {
      const int base = (k / 2) * 8 + 4 * half + 2 * (k % 2);
      m[4 * k] = static_cast<std::int8_t>(base);
      m[4 * k + 2] = static_cast<std::int8_t>(base + 1);
    } else if (k < C) {
      m[4 * k] = static_cast<std::int8_t>(2 * half * C + k);
      m[4 * k + 2] = static_cast<std::int8_t>((2 * half + 1) * C + k);
    }
  }
  return _mm_load_si128(reinterpret_cast<const __m128i*>(m));
}

SLUICE_SSE41 inline __m128i load_tail(const std::uint8_t* src, std::ptrdiff_t at, int src_bytes,
                                      int bytes) {
  alignas(16) std::uint8_t buf[16] = {};
  const std::ptrdiff_t readable = std::min<std::ptrdiff_t>(src_bytes - at, bytes);
  if (readable > 0) std::memcpy(buf, src + at, static_cast<std::size_t>(readable));
  return _mm_load_si128(reinterpret_cast<const __m128i*>(buf));
}

template <int C, bool kTail>
SLUICE_SSE41 inline __m128i load_one(const std::uint8_t* src, std::ptrdiff_t at, int src_bytes) {
  constexpr int kBytes = Window<C>::kBytes;
  if (kTail && at + kBytes > src_bytes) return load_tail(src, at, src_bytes, kBytes);
  return kBytes == 16 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + at))
                      : _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + at));
}

// Window w of one lane's pixels (one colour pixel, two grey ones).
template <int C, bool kTail>
SLUICE_SSE41 inline __m128i load_window(const std::uint8_t* src, const std::ptrdiff_t* off, int w,
                                        int src_bytes) {
  const int shift = w * Window<C>::kStep;
  if constexpr (C == 1) {
    return _mm_unpacklo_epi64(load_one<C, kTail>(src, off[0] + shift, src_bytes),
                              load_one<C, kTail>(src, off[1] + shift, src_bytes));
  } else {
    return load_one<C, kTail>(src, off[0] + shift, src_bytes);
  }
}

SLUICE_SSE41 inline void add_unit(__m128i v, const std::int32_t* w, __m128i& lo, __m128i& hi) {
  const __m128i wl = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w));
  const __m128i wh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 8));
  lo = _mm_add_epi32(lo, _mm_madd_epi16(v, wl));
  hi = _mm_add_epi32(hi, _mm_madd_epi16(v, wh));
}

// The sums of one lane over `units` units (U > 0: exactly U); `table` points at the lane's words.
// Grey: exact int32 sums; colour: floor(sum / 2^15), as block_sum in resample_avx2.cpp.
template <int C, int U, bool kTail>
SLUICE_SSE41 inline __m128i lane_sum(const std::uint8_t* src, const std::ptrdiff_t* off,
                                     const std::int32_t* table, int units, int src_bytes,
                                     __m128i mask0, __m128i mask1) {
  const int n = U > 0 ? U : units;
  __m128i lo = _mm_setzero_si128();
  __m128i hi = _mm_setzero_si128();
  for (int u = 0; u < n; u += 2) {
    const __m128i win = load_window<C, kTail>(src, off, u / 2, src_bytes);
    add_unit(_mm_shuffle_epi8(win, mask0), table + u * kUnitWords, lo, hi);
    if (u + 1 < n) add_unit(_mm_shuffle_epi8(win, mask1), table + (u + 1) * kUnitWords, lo, hi);
  }
  if constexpr (C == 1) {
    return _mm_add_epi32(lo, _mm_slli_epi32(hi, kSplitBits));
  } else {
    return _mm_add_epi32(hi, _mm_srai_epi32(lo, kSplitBits));
  }
}

// The result bytes of one block: 2 colour pixels in 6 or 8 bytes, or 4 grey pixels in 4 bytes.
template <int C>
SLUICE_SSE41 inline __m128i block_bytes(__m128i s0, __m128i s1) {
  if constexpr (C == 1) {  // each pixel's taps over two int32 lanes: hadd gives [p0 p1 p2 p3]
    const __m128i v = _mm_srai_epi32(_mm_add_epi32(_mm_hadd_epi32(s0, s1), _mm_set1_epi32(kHalf)),
                                     kPrecisionBits);
    const __m128i w = _mm_packs_epi32(v, v);
    return _mm_packus_epi16(w, w);
  } else {  // (t + 64) >> 7 by pmulhrsw, see step_bytes in resample_avx2.cpp
    const __m128i words = _mm_mulhrs_epi16(_mm_packs_epi32(s0, s1), _mm_set1_epi16(256));
    const __m128i compact =
        C == 3 ? _mm_setr_epi8(0, 1, 2, 4, 5, 6, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1)
               : _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, -1, -1, -1, -1, -1, -1, -1, -1);
    return _mm_shuffle_epi8(_mm_packus_epi16(words, words), compact);
  }
}

// One block (2 colour or 4 grey pixels) per iteration; a main loop and a careful one, as
// horizontal_cu in resample_avx2.cpp.
template <int C, int U>
SLUICE_SSE41 void horizontal_cu(const std::uint8_t* src, int src_x0, int src_bytes,
                                const HorizontalTaps& t, std::uint8_t* __restrict dst) {
  constexpr int kPixels = pixels_per_block(C);
  constexpr int kLane = kPixels / 2;             // pixels of the second lane start here
  constexpr int kStore = C == 1 ? 4 : 8;         // bytes the main loop's store writes
  constexpr int kFull = (kStore + C - 1) / C;    // pixels left for that store to fit
  const int count = t.count;
  const int units = U > 0 ? U : t.units;
  const int span = ((units + 1) / 2 - 1) * Window<C>::kStep + Window<C>::kBytes;
  const std::int32_t* __restrict first = t.first;
  const std::ptrdiff_t block_words = static_cast<std::ptrdiff_t>(units) * kUnitWords;
  const __m128i mask0 = unit_mask<C>(0);
  const __m128i mask1 = unit_mask<C>(1);
  const std::int32_t* table = t.lanes;
  const int limit = src_x0 + (src_bytes >= span ? (src_bytes - span) / C : -1);
  const __m128i limits = _mm_set1_epi32(limit);
  const std::ptrdiff_t x0_bytes = static_cast<std::ptrdiff_t>(src_x0) * C;
  const auto* origin = reinterpret_cast<const std::uint8_t*>(reinterpret_cast<std::uintptr_t>(src) -
                                                             static_cast<std::uintptr_t>(x0_bytes));
  int o = 0;
  for (; o + std::max(kPixels, kFull) <= count; o += kPixels, table += block_words) {
    const __m128i firsts = kPixels == 4
                               ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(first + o))
                               : _mm_loadl_epi64(reinterpret_cast<const __m128i*>(first + o));
    const int past = _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpgt_epi32(firsts, limits)));
    if ((past & ((1 << kPixels) - 1)) != 0) break;
    std::ptrdiff_t off[kPixels];
    for (int i = 0; i < kPixels; ++i) off[i] = std::ptrdiff_t{first[o + i]} * C;
    const __m128i s0 = lane_sum<C, U, false>(origin, off, table, units, src_bytes, mask0, mask1);
    const __m128i s1 =
        lane_sum<C, U, false>(origin, off + kLane, table + 4, units, src_bytes, mask0, mask1);
    const __m128i px = block_bytes<C>(s0, s1);
    if constexpr (kStore == 4) {
      _mm_storeu_si32(dst + o * C, px);
    } else {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + o * C), px);
    }
  }
  for (; o < count; o += kPixels, table += block_words) {
    std::ptrdiff_t off[kPixels];  // past the row's last pixel: that pixel again
    for (int i = 0; i < kPixels; ++i) {
      off[i] = std::ptrdiff_t{first[std::min(o + i, count - 1)]} * C - x0_bytes;
    }
    const __m128i s0 = lane_sum<C, U, true>(src, off, table, units, src_bytes, mask0, mask1);
    const __m128i s1 =
        lane_sum<C, U, true>(src, off + kLane, table + 4, units, src_bytes, mask0, mask1);
    alignas(16) std::uint8_t buf[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(buf), block_bytes<C>(s0, s1));
    std::memcpy(dst + o * C, buf, static_cast<std::size_t>(std::min(count - o, kPixels) * C));
  }
}

// The unit count is fixed per row: the common counts get their own unrolled loop.
template <int C>
SLUICE_SSE41 void horizontal_c(const std::uint8_t* src, int src_x0, int src_bytes,
                               const HorizontalTaps& t, std::uint8_t* dst) {
  switch (t.units) {
    case 1: return horizontal_cu<C, 1>(src, src_x0, src_bytes, t, dst);
    case 2: return horizontal_cu<C, 2>(src, src_x0, src_bytes, t, dst);
    case 3: return horizontal_cu<C, 3>(src, src_x0, src_bytes, t, dst);
    case 4: return horizontal_cu<C, 4>(src, src_x0, src_bytes, t, dst);
    default: return horizontal_cu<C, 0>(src, src_x0, src_bytes, t, dst);
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
