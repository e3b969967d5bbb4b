// Loops written for the auto-vectoriser (this file is built with -O3; each row function is also
// cloned for AVX2 and picked at load time): int16/int32 arithmetic on whole rows, no tables. The
// colour conversion's interleaved RGB stores defeat the vectoriser, so it has an SSE4.1 version
// of its own, 16 pixels at a time, the same integer arithmetic (exact, so the same bytes).
#include "stages/ycc_planes.hpp"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SLUICE_YCC_SSE41 1
#endif

namespace sluice::stages {
namespace {

// libjpeg's jdcolor.c constants: FIX(x) = x scaled by 2^16 and rounded as it rounds them.
constexpr int fix(double x) { return static_cast<int>(x * 65536.0 + 0.5); }
constexpr int kCrToR = fix(1.40200);
constexpr int kCbToB = fix(1.77200);
constexpr int kCrToG = fix(0.71414);
constexpr int kCbToG = fix(0.34414);
constexpr int kHalf = 1 << 15;

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#define SLUICE_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define SLUICE_VECTOR_CLONES
#endif

// Scratch layout for one output row of `width` pixels: upsampled Cb and Cr (one byte per pixel),
// and the column sums of the two chroma rows (int16, chroma width + 2 with the edges repeated).
struct RowScratch {
  std::uint8_t* cb;
  std::uint8_t* cr;
  std::int16_t* sum_b;
  std::int16_t* sum_r;
};

std::size_t round32(std::size_t n) { return (n + 31) / 32 * 32; }

RowScratch carve(std::uint8_t* scratch, int width) {
  const std::size_t up = round32(static_cast<std::size_t>(width) + 1);
  const std::size_t sums = round32((static_cast<std::size_t>(width) / 2 + 4) * sizeof(std::int16_t));
  return {scratch, scratch + up, reinterpret_cast<std::int16_t*>(scratch + 2 * up),
          reinterpret_cast<std::int16_t*>(scratch + 2 * up + sums)};
}

// jdsample.c's h2v2_fancy_upsample for one output row: `near` is the chroma row nearest to it,
// `far` the next nearest (above for an even output row, below for an odd one). With
// s[i] = 3 * near[i] + far[i] and s repeated at both ends, the output pair of chroma column i is
// (3 s[i] + s[i-1] + 8) >> 4 and (3 s[i] + s[i+1] + 7) >> 4.
SLUICE_VECTOR_CLONES
void upsample_row(const std::uint8_t* near, const std::uint8_t* far, int chroma_width, std::int16_t* sum,
                  std::uint8_t* out) {
  std::int16_t* s = sum + 1;
  for (int i = 0; i < chroma_width; ++i) s[i] = static_cast<std::int16_t>(3 * near[i] + far[i]);
  s[-1] = s[0];
  s[chroma_width] = s[chroma_width - 1];
  for (int i = 0; i < chroma_width; ++i) {
    out[2 * i] = static_cast<std::uint8_t>((3 * s[i] + s[i - 1] + 8) >> 4);
    out[2 * i + 1] = static_cast<std::uint8_t>((3 * s[i] + s[i + 1] + 7) >> 4);
  }
}

// jdcolext.c's ycc_rgb_convert on one row, its tables written out as the expressions they hold:
// R = Y + ((kCrToR * (Cr - 128) + half) >> 16), G = Y + ((-kCbToG (Cb - 128) + half -
// kCrToG (Cr - 128)) >> 16), B = Y + ((kCbToB * (Cb - 128) + half) >> 16), each clamped to 0..255.
void convert_row_scalar(const std::uint8_t* y, const std::uint8_t* cb, const std::uint8_t* cr, int width,
                        std::uint8_t* rgb) {
  for (int x = 0; x < width; ++x) {
    const int luma = y[x];
    const int b = cb[x] - 128;
    const int r = cr[x] - 128;
    const int red = luma + ((kCrToR * r + kHalf) >> 16);
    const int green = luma + ((-kCbToG * b + kHalf - kCrToG * r) >> 16);
    const int blue = luma + ((kCbToB * b + kHalf) >> 16);
    rgb[3 * x] = static_cast<std::uint8_t>(std::clamp(red, 0, 255));
    rgb[3 * x + 1] = static_cast<std::uint8_t>(std::clamp(green, 0, 255));
    rgb[3 * x + 2] = static_cast<std::uint8_t>(std::clamp(blue, 0, 255));
  }
}

#if SLUICE_YCC_SSE41
// Four pixels' worth of one output channel: luma + ((k_b * b + k_r * r + half) >> 16), in 32 bits.
__attribute__((target("sse4.1"))) inline __m128i channel4(__m128i luma, __m128i b, __m128i r, int k_b, int k_r) {
  __m128i sum = _mm_set1_epi32(kHalf);
  if (k_b != 0) sum = _mm_add_epi32(sum, _mm_mullo_epi32(b, _mm_set1_epi32(k_b)));
  if (k_r != 0) sum = _mm_add_epi32(sum, _mm_mullo_epi32(r, _mm_set1_epi32(k_r)));
  return _mm_add_epi32(luma, _mm_srai_epi32(sum, 16));
}

// Sixteen pixels of one channel, clamped to 0..255 by the saturating packs (the values lie in
// -300..600, inside int16).
__attribute__((target("sse4.1"))) inline __m128i channel16(const __m128i luma[4], const __m128i b[4],
                                                           const __m128i r[4], int k_b, int k_r) {
  const __m128i lo = _mm_packs_epi32(channel4(luma[0], b[0], r[0], k_b, k_r), channel4(luma[1], b[1], r[1], k_b, k_r));
  const __m128i hi = _mm_packs_epi32(channel4(luma[2], b[2], r[2], k_b, k_r), channel4(luma[3], b[3], r[3], k_b, k_r));
  return _mm_packus_epi16(lo, hi);
}

// Bytes 0..15 of red, green and blue into 48 interleaved bytes: output byte 3k + c is byte k of
// channel c. Each 16-byte block of the output ors one byte shuffle of each channel; mask
// [block][c][i] names the channel-c byte that lands at output byte 16 block + i (-1: none).
struct InterleaveMasks {
  alignas(16) std::int8_t m[3][3][16];
  constexpr InterleaveMasks() : m{} {
    for (int block = 0; block < 3; ++block) {
      for (int c = 0; c < 3; ++c) {
        for (int i = 0; i < 16; ++i) {
          const int pos = block * 16 + i;
          m[block][c][i] = static_cast<std::int8_t>(pos % 3 == c ? pos / 3 : -1);
        }
      }
    }
  }
};
constexpr InterleaveMasks kInterleave{};

__attribute__((target("sse4.1"))) inline void store_interleaved(__m128i red, __m128i green, __m128i blue,
                                                               std::uint8_t* out) {
  const __m128i channel[3] = {red, green, blue};
  for (int block = 0; block < 3; ++block) {
    __m128i acc = _mm_setzero_si128();
    for (int c = 0; c < 3; ++c) {
      const __m128i mask = _mm_load_si128(reinterpret_cast<const __m128i*>(kInterleave.m[block][c]));
      acc = _mm_or_si128(acc, _mm_shuffle_epi8(channel[c], mask));
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16 * block), acc);
  }
}

__attribute__((target("sse4.1"))) void convert_row_sse41(const std::uint8_t* y, const std::uint8_t* cb,
                                                         const std::uint8_t* cr, int width, std::uint8_t* rgb) {
  int x = 0;
  const __m128i bias = _mm_set1_epi32(128);
  for (; x + 16 <= width; x += 16) {
    const __m128i y16 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(y + x));
    const __m128i b16 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(cb + x));
    const __m128i r16 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(cr + x));
    __m128i luma[4], b[4], r[4];
    for (int q = 0; q < 4; ++q) {
      // Bytes 4q..4q+3 to int32 (a byte shift by a constant needs an immediate, hence the switch).
      __m128i ys, bs, rs;
      switch (q) {
        case 0: ys = y16; bs = b16; rs = r16; break;
        case 1: ys = _mm_srli_si128(y16, 4); bs = _mm_srli_si128(b16, 4); rs = _mm_srli_si128(r16, 4); break;
        case 2: ys = _mm_srli_si128(y16, 8); bs = _mm_srli_si128(b16, 8); rs = _mm_srli_si128(r16, 8); break;
        default: ys = _mm_srli_si128(y16, 12); bs = _mm_srli_si128(b16, 12); rs = _mm_srli_si128(r16, 12); break;
      }
      luma[q] = _mm_cvtepu8_epi32(ys);
      b[q] = _mm_sub_epi32(_mm_cvtepu8_epi32(bs), bias);
      r[q] = _mm_sub_epi32(_mm_cvtepu8_epi32(rs), bias);
    }
    store_interleaved(channel16(luma, b, r, 0, kCrToR), channel16(luma, b, r, -kCbToG, -kCrToG),
                      channel16(luma, b, r, kCbToB, 0), rgb + 3 * x);
  }
  convert_row_scalar(y + x, cb + x, cr + x, width - x, rgb + 3 * x);
}
#endif

using ConvertRow = void (*)(const std::uint8_t*, const std::uint8_t*, const std::uint8_t*, int, std::uint8_t*);

ConvertRow pick_convert_row() {
#if SLUICE_YCC_SSE41
  if (__builtin_cpu_supports("sse4.1")) return convert_row_sse41;
#endif
  return convert_row_scalar;
}

void convert_row(const std::uint8_t* y, const std::uint8_t* cb, const std::uint8_t* cr, int width, std::uint8_t* rgb) {
  static const ConvertRow chosen = pick_convert_row();
  chosen(y, cb, cr, width, rgb);
}

SLUICE_VECTOR_CLONES
void replicate_row(const std::uint8_t* grey, int width, std::uint8_t* rgb) {
  for (int x = 0; x < width; ++x) {
    rgb[3 * x] = rgb[3 * x + 1] = rgb[3 * x + 2] = grey[x];
  }
}

}  // namespace

std::size_t ycc_scratch_bytes(int width) {
  return 2 * round32(static_cast<std::size_t>(width) + 1) +
         2 * round32((static_cast<std::size_t>(width) / 2 + 4) * sizeof(std::int16_t));
}

void ycc_to_rgb(SamplePlane y, SamplePlane cb, SamplePlane cr, ChromaLayout layout, ImageView out,
                std::uint8_t* scratch) {
  if (layout == ChromaLayout::k444) {
    for (int row = 0; row < out.height; ++row) convert_row(y.row(row), cb.row(row), cr.row(row), out.width, out.row(row));
    return;
  }
  const RowScratch s = carve(scratch, out.width);
  const int last = cb.height - 1;
  for (int row = 0; row < out.height; ++row) {
    // Output rows 2k and 2k + 1 take chroma row k; the next nearest is row k - 1 above the even
    // one and k + 1 below the odd one, the edge rows standing in beyond the plane (as libjpeg's
    // context rows do).
    const int near = row / 2;
    const int far = row % 2 == 0 ? std::max(near - 1, 0) : std::min(near + 1, last);
    upsample_row(cb.row(near), cb.row(far), cb.width, s.sum_b, s.cb);
    upsample_row(cr.row(near), cr.row(far), cr.width, s.sum_r, s.cr);
    convert_row(y.row(row), s.cb, s.cr, out.width, out.row(row));
  }
}

void luma_to_output(SamplePlane y, ImageView out) {
  for (int row = 0; row < out.height; ++row) {
    if (out.channels == 1) {
      std::memcpy(out.row(row), y.row(row), static_cast<std::size_t>(out.width));
    } else {
      replicate_row(y.row(row), out.width, out.row(row));
    }
  }
}

}  // namespace sluice::stages
