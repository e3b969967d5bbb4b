// Two sets of loops, held to the same bytes by tests/unit/stages/ycc_planes_test.cpp:
//  - portable: plain loops for the vectoriser (this file is built with -O3, and upsample_row and
//    replicate_row are also cloned for AVX2 and picked at load time);
//  - SSE4.1, picked at run time: a 4:2:0 row is upsampled and converted in one pass through
//    registers, 16 pixels at a time, in 16-bit lanes with pmaddwd. On a 32-pixel row the
//    portable path's three calls, its trips through memory and the store-forwarding stalls of
//    re-reading just-stored column sums cost more than the arithmetic.
#include "stages/decode/ycc_planes.hpp"

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

// The conversion in 16-bit lanes. Each constant above 2^15 splits into a multiple of 2^16, which
// passes through the >> 16 whole, and a remainder that fits int16, so pmaddwd can form the sums
// exactly (the "+ half" rides along as 16384 x 2):
//   R = Y + r + ((26345 r + 16384 * 2) >> 16)                    91881 = 65536 + 26345
//   G = Y - r + ((-22554 b + 18734 r + 32768) >> 16)             -46802 = -65536 + 18734
//   B = Y + 2b + ((-14942 b + 16384 * 2) >> 16)                  116130 = 131072 - 14942
constexpr int kRedRest = kCrToR - 65536;
constexpr int kGreenRest = 65536 - kCrToG;
constexpr int kBlueRest = kCbToB - 131072;
static_assert(kRedRest > 0 && kRedRest < 32768 && kGreenRest > 0 && kGreenRest < 32768 && kBlueRest < 0 &&
              kBlueRest > -32768 && kCbToG < 32768 && kHalf == 2 * 16384);

// Two 16-bit coefficients as pmaddwd's pair (first for the even lane, second for the odd one).
constexpr int pair(int even, int odd) {
  return static_cast<int>((static_cast<unsigned>(odd & 0xFFFF) << 16) | static_cast<unsigned>(even & 0xFFFF));
}

// ((pairs . coefficients + add) >> 16) for eight pixels whose operand pairs are lo (pixels 0-3)
// and hi (pixels 4-7).
__attribute__((target("sse4.1"))) inline __m128i high16(__m128i lo, __m128i hi, int coefficients, int add = 0) {
  const __m128i k = _mm_set1_epi32(coefficients);
  const __m128i a = _mm_set1_epi32(add);
  return _mm_packs_epi32(_mm_srai_epi32(_mm_add_epi32(_mm_madd_epi16(lo, k), a), 16),
                         _mm_srai_epi32(_mm_add_epi32(_mm_madd_epi16(hi, k), a), 16));
}

struct Rgb8 {
  __m128i red, green, blue;  // eight int16 each, not yet clamped
};

// Eight pixels: luma, b = Cb - 128 and r = Cr - 128 as int16.
__attribute__((target("sse4.1"))) inline Rgb8 convert8(__m128i luma, __m128i b, __m128i r) {
  const __m128i two = _mm_set1_epi16(2);
  const __m128i red = high16(_mm_unpacklo_epi16(r, two), _mm_unpackhi_epi16(r, two), pair(kRedRest, 16384));
  const __m128i green =
      high16(_mm_unpacklo_epi16(b, r), _mm_unpackhi_epi16(b, r), pair(-kCbToG, kGreenRest), kHalf);
  const __m128i blue = high16(_mm_unpacklo_epi16(b, two), _mm_unpackhi_epi16(b, two), pair(kBlueRest, 16384));
  return {_mm_add_epi16(_mm_add_epi16(luma, r), red), _mm_sub_epi16(_mm_add_epi16(luma, green), r),
          _mm_add_epi16(_mm_add_epi16(luma, _mm_add_epi16(b, b)), blue)};
}

// Sixteen pixels: luma, Cb and Cr bytes in, 48 RGB bytes out.
__attribute__((target("sse4.1"))) inline void convert16(__m128i y16, __m128i b16, __m128i r16, std::uint8_t* rgb) {
  const __m128i zero = _mm_setzero_si128();
  const __m128i bias = _mm_set1_epi16(128);
  const Rgb8 lo = convert8(_mm_cvtepu8_epi16(y16), _mm_sub_epi16(_mm_cvtepu8_epi16(b16), bias),
                           _mm_sub_epi16(_mm_cvtepu8_epi16(r16), bias));
  const Rgb8 hi = convert8(_mm_unpackhi_epi8(y16, zero), _mm_sub_epi16(_mm_unpackhi_epi8(b16, zero), bias),
                           _mm_sub_epi16(_mm_unpackhi_epi8(r16, zero), bias));
  // The saturating packs clamp to 0..255 as libjpeg's range limit does.
  store_interleaved(_mm_packus_epi16(lo.red, hi.red), _mm_packus_epi16(lo.green, hi.green),
                    _mm_packus_epi16(lo.blue, hi.blue), rgb);
}

__attribute__((target("sse4.1"))) void convert_row_sse41(const std::uint8_t* y, const std::uint8_t* cb,
                                                         const std::uint8_t* cr, int width, std::uint8_t* rgb) {
  int x = 0;
  for (; x + 16 <= width; x += 16) {
    convert16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + x)),
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(cb + x)),
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(cr + x)), rgb + 3 * x);
  }
  convert_row_scalar(y + x, cb + x, cr + x, width - x, rgb + 3 * x);
}

// Column sums 3 near[c] + far[c] of chroma columns c..c+7, as int16.
__attribute__((target("sse4.1"))) inline __m128i sums8(const std::uint8_t* near, const std::uint8_t* far) {
  const __m128i n = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(near)));
  const __m128i f = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(far)));
  return _mm_add_epi16(_mm_mullo_epi16(n, _mm_set1_epi16(3)), f);
}

// Upsampled chroma of output pixels 2c..2c+15 from the sums of columns c-1..c+6, c..c+7 and
// c+1..c+8: even pixels (3 cur + prev + 8) >> 4, odd ones (3 cur + next + 7) >> 4.
__attribute__((target("sse4.1"))) inline __m128i upsample16(__m128i prev, __m128i cur, __m128i next) {
  const __m128i cur3 = _mm_mullo_epi16(cur, _mm_set1_epi16(3));
  const __m128i even = _mm_srai_epi16(_mm_add_epi16(_mm_add_epi16(cur3, prev), _mm_set1_epi16(8)), 4);
  const __m128i odd = _mm_srai_epi16(_mm_add_epi16(_mm_add_epi16(cur3, next), _mm_set1_epi16(7)), 4);
  return _mm_unpacklo_epi8(_mm_packus_epi16(even, even), _mm_packus_epi16(odd, odd));
}

// Chroma columns c..c+7 of one plane, upsampled: the neighbours' sums are loaded one column to
// each side (reading the planes again, never sums this code has just stored: an unaligned load
// across recent stores stalls on store forwarding), and at the plane's edges they repeat the edge
// column, as libjpeg's first- and last-column cases do.
__attribute__((target("sse4.1"))) inline __m128i chroma16(const std::uint8_t* near, const std::uint8_t* far, int c,
                                                          int chroma_width) {
  const __m128i cur = sums8(near + c, far + c);
  const __m128i prev = c > 0 ? sums8(near + c - 1, far + c - 1) : _mm_blend_epi16(_mm_slli_si128(cur, 2), cur, 0x01);
  const __m128i next = c + 8 < chroma_width ? sums8(near + c + 1, far + c + 1)
                                            : _mm_blend_epi16(_mm_srli_si128(cur, 2), cur, 0x80);
  return upsample16(prev, cur, next);
}

// One 4:2:0 output row: upsampling and conversion in one pass, 16 pixels at a time, through
// registers (the generic path goes through memory three times and pays three calls per row,
// which on a 32-pixel row cost more than the arithmetic).
__attribute__((target("sse4.1"))) void row420_sse41(const std::uint8_t* y, const std::uint8_t* cb_near,
                                                    const std::uint8_t* cb_far, const std::uint8_t* cr_near,
                                                    const std::uint8_t* cr_far, int chroma_width, int width,
                                                    const RowScratch& scratch, std::uint8_t* rgb) {
  int x = 0;
  for (; x + 16 <= width; x += 16) {
    const int c = x / 2;
    convert16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + x)), chroma16(cb_near, cb_far, c, chroma_width),
              chroma16(cr_near, cr_far, c, chroma_width), rgb + 3 * x);
  }
  // The last pixels one at a time, with the same edge rule.
  const auto sum = [&](const std::uint8_t* near, const std::uint8_t* far, int c) {
    c = std::clamp(c, 0, chroma_width - 1);
    return 3 * near[c] + far[c];
  };
  for (int p = x; p < width; ++p) {
    const int c = p / 2;
    const int side = p % 2 == 0 ? c - 1 : c + 1;
    const int round = p % 2 == 0 ? 8 : 7;
    scratch.cb[p] = static_cast<std::uint8_t>((3 * sum(cb_near, cb_far, c) + sum(cb_near, cb_far, side) + round) >> 4);
    scratch.cr[p] = static_cast<std::uint8_t>((3 * sum(cr_near, cr_far, c) + sum(cr_near, cr_far, side) + round) >> 4);
  }
  convert_row_scalar(y + x, scratch.cb + x, scratch.cr + x, width - x, rgb + 3 * x);
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

void row420_generic(const std::uint8_t* y, const std::uint8_t* cb_near, const std::uint8_t* cb_far,
                    const std::uint8_t* cr_near, const std::uint8_t* cr_far, int chroma_width, int width,
                    const RowScratch& scratch, std::uint8_t* rgb) {
  upsample_row(cb_near, cb_far, chroma_width, scratch.sum_b, scratch.cb);
  upsample_row(cr_near, cr_far, chroma_width, scratch.sum_r, scratch.cr);
  convert_row_scalar(y, scratch.cb, scratch.cr, width, rgb);
}

using Row420 = void (*)(const std::uint8_t*, const std::uint8_t*, const std::uint8_t*, const std::uint8_t*,
                        const std::uint8_t*, int, int, const RowScratch&, std::uint8_t*);

Row420 pick_row420() {
#if SLUICE_YCC_SSE41
  if (__builtin_cpu_supports("sse4.1")) return row420_sse41;
#endif
  return row420_generic;
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
                std::uint8_t* scratch, YccLoops loops) {
  const bool portable = loops == YccLoops::kPortable;
  if (layout == ChromaLayout::k444) {
    for (int row = 0; row < out.height; ++row) {
      (portable ? convert_row_scalar : convert_row)(y.row(row), cb.row(row), cr.row(row), out.width, out.row(row));
    }
    return;
  }
  static const Row420 fastest = pick_row420();
  const Row420 row420 = portable ? row420_generic : fastest;
  const RowScratch s = carve(scratch, out.width);
  const int last = cb.height - 1;
  for (int row = 0; row < out.height; ++row) {
    // Output rows 2k and 2k + 1 take chroma row k; the next nearest is row k - 1 above the even
    // one and k + 1 below the odd one, the edge rows standing in beyond the plane (as libjpeg's
    // context rows do).
    const int near = row / 2;
    const int far = row % 2 == 0 ? std::max(near - 1, 0) : std::min(near + 1, last);
    row420(y.row(row), cb.row(near), cb.row(far), cr.row(near), cr.row(far), cb.width, out.width, s, out.row(row));
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
