// Loops written for the auto-vectoriser (this file is built with -O3; each row function is also
// cloned for AVX2 and picked at load time): int16/int32 arithmetic on whole rows, no tables.
#include "stages/ycc_planes.hpp"

#include <algorithm>
#include <cstring>

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
SLUICE_VECTOR_CLONES
void convert_row(const std::uint8_t* y, const std::uint8_t* cb, const std::uint8_t* cr, int width,
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
