// AVX2 resample kernels. The horizontal pass shuffles each output pixel's source bytes into 16-bit
// tap pairs and multiplies them with pmaddwd by the weights split into 15-bit halves (see
// resample_kernels.hpp), 4 colour or 8 grey output pixels per step; the vertical pass sums 32
// output bytes per iteration with int32 products. Integer sums are exact, so the results equal
// the scalar kernels (and Pillow) bit for bit. Compiled with per-function target attributes, not
// a file-wide -mavx2, so no AVX2 instruction can leak into code that runs before the CPU check.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "stages/image/resample_kernels.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

namespace sluice::stages::resample_detail {
namespace {

#define SLUICE_AVX2 __attribute__((target("avx2")))

// Loads and shuffles of the horizontal pass. A window is the source bytes of one pixel that two
// units read: 16 bytes (4 colour taps, of which RGB uses 12) or 8 bytes (8 grey taps). The masks
// pick a unit's bytes out of a window and widen them to the 16-bit pairs pmaddwd multiplies.
template <int C>
struct Window {
  static constexpr int kBytes = C == 1 ? 8 : 16;                // read per pixel
  static constexpr int kStep = 2 * taps_per_unit(C) * C;        // between a pixel's windows
};

// The pshufb mask of unit `half` (0 or 1) of a window, for one 128-bit lane.
template <int C>
SLUICE_AVX2 inline __m256i unit_mask(int half) {
  alignas(32) std::int8_t m[32];
  for (int lane = 0; lane < 2; ++lane) {
    std::int8_t* l = m + lane * 16;
    for (int i = 0; i < 16; ++i) l[i] = -1;  // high bit set: zero
    for (int k = 0; k < 4; ++k) {            // int32 lane k: two 16-bit source bytes
      if (C == 1) {  // pixel k / 2 of the lane (window bytes 0 or 8), taps 4 * half + 2 * (k % 2)
        const int base = (k / 2) * 8 + 4 * half + 2 * (k % 2);
        l[4 * k] = static_cast<std::int8_t>(base);
        l[4 * k + 2] = static_cast<std::int8_t>(base + 1);
      } else if (k < C) {  // channel k of taps 2 * half and 2 * half + 1
        l[4 * k] = static_cast<std::int8_t>(2 * half * C + k);
        l[4 * k + 2] = static_cast<std::int8_t>((2 * half + 1) * C + k);
      }
    }
  }
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(m));
}

// The `bytes` (8 or 16) source bytes at `at`, where some lie past the row's end (a full load could
// run past the caller's buffer): the ones before it, then zeros.
SLUICE_AVX2 inline __m128i load_tail(const std::uint8_t* src, std::ptrdiff_t at, int src_bytes,
                                     int bytes) {
  alignas(16) std::uint8_t buf[16] = {};
  const std::ptrdiff_t readable = std::min<std::ptrdiff_t>(src_bytes - at, bytes);
  if (readable > 0) std::memcpy(buf, src + at, static_cast<std::size_t>(readable));
  return _mm_load_si128(reinterpret_cast<const __m128i*>(buf));
}

// One pixel's window at byte `at` of the row. `kTail`: it may cross the row's end.
template <int C, bool kTail>
SLUICE_AVX2 inline __m128i load_one(const std::uint8_t* src, std::ptrdiff_t at, int src_bytes) {
  constexpr int kBytes = Window<C>::kBytes;
  if (kTail && at + kBytes > src_bytes) return load_tail(src, at, src_bytes, kBytes);
  return kBytes == 16 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + at))
                      : _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + at));
}

// Window w of the block's pixels (byte offsets `off`), lane 0 first.
template <int C, bool kTail>
SLUICE_AVX2 inline __m256i load_window(const std::uint8_t* src, const std::ptrdiff_t* off, int w,
                                       int src_bytes) {
  const int shift = w * Window<C>::kStep;
  if constexpr (C == 1) {  // two pixels of 8 bytes per lane
    const __m128i lo = _mm_unpacklo_epi64(load_one<C, kTail>(src, off[0] + shift, src_bytes),
                                          load_one<C, kTail>(src, off[1] + shift, src_bytes));
    const __m128i hi = _mm_unpacklo_epi64(load_one<C, kTail>(src, off[2] + shift, src_bytes),
                                          load_one<C, kTail>(src, off[3] + shift, src_bytes));
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
  } else {
    // Parenthesised: clang defines _mm256_inserti128_si256 as a macro, whose argument list
    // would split at the comma of load_one<C, kTail>.
    return _mm256_inserti128_si256(
        _mm256_castsi128_si256((load_one<C, kTail>(src, off[0] + shift, src_bytes))),
        (load_one<C, kTail>(src, off[1] + shift, src_bytes)), 1);
  }
}

// Adds unit `v` (source pairs) times its table words `w` to the lo and hi partial sums.
SLUICE_AVX2 inline void add_unit(__m256i v, const std::int32_t* w, __m256i& lo, __m256i& hi) {
  const __m256i wl = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
  const __m256i wh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 8));
  lo = _mm256_add_epi32(lo, _mm256_madd_epi16(v, wl));
  hi = _mm256_add_epi32(hi, _mm256_madd_epi16(v, wh));
}

// The sums of one block over `units` units (U > 0: exactly U, unrolled), without the rounding
// half. Grey: the exact int32 sums of two grey pixels' halves per lane (a pixel's halves must be
// added before anything is rounded). Colour: per lane a pixel's channels as floor(sum / 2^15) =
// hi + floor(lo / 2^15), which is all step_bytes needs and fits 16 bits where it matters.
template <int C, int U, bool kTail>
SLUICE_AVX2 inline __m256i block_sum(const std::uint8_t* src, const std::ptrdiff_t* off,
                                     const std::int32_t* table, int units, int src_bytes,
                                     __m256i mask0, __m256i mask1) {
  const int n = U > 0 ? U : units;
  __m256i lo = _mm256_setzero_si256();
  __m256i hi = _mm256_setzero_si256();
  for (int u = 0; u < n; u += 2) {
    const __m256i win = load_window<C, kTail>(src, off, u / 2, src_bytes);
    add_unit(_mm256_shuffle_epi8(win, mask0), table + u * kUnitWords, lo, hi);
    if (u + 1 < n) {
      add_unit(_mm256_shuffle_epi8(win, mask1), table + (u + 1) * kUnitWords, lo, hi);
    }
  }
  if constexpr (C == 1) {
    return _mm256_add_epi32(lo, _mm256_slli_epi32(hi, kSplitBits));
  } else {
    return _mm256_add_epi32(hi, _mm256_srai_epi32(lo, kSplitBits));
  }
}

// Exact sums rounded and shifted as clip_fixed; packs/packus then clip as it does.
SLUICE_AVX2 inline __m256i round_shift(__m256i sums) {
  return _mm256_srai_epi32(_mm256_add_epi32(sums, _mm256_set1_epi32(kHalf)), kPrecisionBits);
}

// The result bytes of one step (two blocks): 4 colour pixels in 12 or 16 bytes, or 8 grey pixels
// in 8 bytes.
template <int C>
SLUICE_AVX2 inline __m128i step_bytes(__m256i s0, __m256i s1) {
  if constexpr (C == 1) {
    // Each pixel's taps lie in two int32 lanes; hadd joins them as [p0 p1 p4 p5 | p2 p3 p6 p7],
    // and after packing, unpacking 16-bit pairs of the two lanes puts them in order.
    const __m256i v = round_shift(_mm256_hadd_epi32(s0, s1));
    const __m256i w = _mm256_packs_epi32(v, v);
    const __m256i b = _mm256_packus_epi16(w, w);
    return _mm_unpacklo_epi16(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
  } else {
    // With t = floor(sum / 2^15), Pillow's (sum + 2^21) >> 22 is (t + 64) >> 7, which pmulhrsw
    // by 256 computes ((256 t + 2^14) >> 15) in 16 bits. t >= 32576 (and any t packs saturates)
    // gives 255 or 256, both clipped to 255 by packus as the scalar kernel clips.
    const __m256i t = _mm256_packs_epi32(s0, s1);
    const __m256i words = _mm256_mulhrs_epi16(t, _mm256_set1_epi16(256));
    // packs/packus leave pixels [p0 p2 | p1 p3]; the permute puts them back in order, and for
    // RGB the shuffle drops every 4th byte (the empty lane).
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m128i compact =
        C == 3 ? _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1)
               : _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(words, words), order);
    return _mm_shuffle_epi8(_mm256_castsi256_si128(bytes), compact);
  }
}

// One row, a step of two blocks (4 colour or 8 grey pixels) per iteration: two independent
// chains, one pack and one store. The main loop runs while every load of the step stays in the
// row and its full-width store stays in dst (the bytes past the step belong to pixels the next
// step rewrites); the last steps take the careful loop, which clamps, pads and stores exactly.
template <int C, int U>
SLUICE_AVX2 void horizontal_cu(const std::uint8_t* src, int src_x0, int src_bytes,
                               const HorizontalTaps& t, std::uint8_t* __restrict dst) {
  constexpr int kPixels = 2 * pixels_per_block(C);  // per step
  constexpr int kBlock = pixels_per_block(C);       // the second block's pixels start here
  constexpr int kStore = C == 1 ? 8 : 16;           // bytes the main loop's store writes
  constexpr int kFull = (kStore + C - 1) / C;       // pixels left for that store to fit
  const int count = t.count;
  const int units = U > 0 ? U : t.units;
  const int span = ((units + 1) / 2 - 1) * Window<C>::kStep + Window<C>::kBytes;  // per pixel
  const std::int32_t* __restrict first = t.first;
  const std::ptrdiff_t block_words = static_cast<std::ptrdiff_t>(units) * kUnitWords;
  const __m256i mask0 = unit_mask<C>(0);
  const __m256i mask1 = unit_mask<C>(1);
  const std::int32_t* table = t.lanes;
  // A pixel whose first tap is at most `limit` reads only bytes of the row.
  const int limit = src_x0 + (src_bytes >= span ? (src_bytes - span) / C : -1);
  const __m256i limits = _mm256_set1_epi32(limit);
  const std::ptrdiff_t x0_bytes = static_cast<std::ptrdiff_t>(src_x0) * C;
  // Where source pixel 0 would be, so the main loop's addresses are first * C from it (one lea);
  // in integers, as it may lie before the buffer.
  const auto* origin = reinterpret_cast<const std::uint8_t*>(reinterpret_cast<std::uintptr_t>(src) -
                                                             static_cast<std::uintptr_t>(x0_bytes));
  int o = 0;
  for (; o + std::max(kPixels, kFull) <= count; o += kPixels, table += 2 * block_words) {
    const __m256i firsts =
        kPixels == 8 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(first + o))
                     : _mm256_castsi128_si256(
                           _mm_loadu_si128(reinterpret_cast<const __m128i*>(first + o)));
    const int past = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(firsts, limits)));
    if ((past & ((1 << kPixels) - 1)) != 0) break;
    std::ptrdiff_t off[kPixels];
    for (int i = 0; i < kPixels; ++i) off[i] = std::ptrdiff_t{first[o + i]} * C;
    const __m256i s0 = block_sum<C, U, false>(origin, off, table, units, src_bytes, mask0, mask1);
    const __m256i s1 =
        block_sum<C, U, false>(origin, off + kBlock, table + block_words, units, src_bytes, mask0,
                               mask1);
    const __m128i px = step_bytes<C>(s0, s1);
    if constexpr (kStore == 8) {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + o * C), px);
    } else {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + o * C), px);
    }
  }
  for (; o < count; o += kPixels, table += 2 * block_words) {
    std::ptrdiff_t off[kPixels];  // past the row's last pixel: that pixel again
    for (int i = 0; i < kPixels; ++i) {
      off[i] = std::ptrdiff_t{first[std::min(o + i, count - 1)]} * C - x0_bytes;
    }
    const __m256i s0 = block_sum<C, U, true>(src, off, table, units, src_bytes, mask0, mask1);
    const __m256i s1 =
        block_sum<C, U, true>(src, off + kBlock, table + block_words, units, src_bytes, mask0,
                              mask1);
    alignas(16) std::uint8_t buf[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(buf), step_bytes<C>(s0, s1));
    std::memcpy(dst + o * C, buf, static_cast<std::size_t>(std::min(count - o, kPixels) * C));
  }
}

// The unit count is fixed per row: the common counts get their own unrolled loop.
template <int C>
SLUICE_AVX2 void horizontal_c(const std::uint8_t* src, int src_x0, int src_bytes,
                              const HorizontalTaps& t, std::uint8_t* dst) {
  switch (t.units) {
    case 1: return horizontal_cu<C, 1>(src, src_x0, src_bytes, t, dst);
    case 2: return horizontal_cu<C, 2>(src, src_x0, src_bytes, t, dst);
    case 3: return horizontal_cu<C, 3>(src, src_x0, src_bytes, t, dst);
    case 4: return horizontal_cu<C, 4>(src, src_x0, src_bytes, t, dst);
    default: return horizontal_cu<C, 0>(src, src_x0, src_bytes, t, dst);
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
