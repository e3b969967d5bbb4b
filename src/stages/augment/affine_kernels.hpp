// The bilinear warp's kernels, shared by affine.cpp (the scalar reference and the dispatch) and
// affine_avx2.cpp (four output pixels per step in AVX2 doubles). Both compute Pillow's bilinear
// filter (libImaging/Geometry.c) with the same double operations in the same order, so their
// bytes are equal; affine_avx2.cpp is built with -ffp-contract=off so that no multiply-add is fused.
#pragma once

#include <cmath>
#include <cstdint>

#include "sluice/detail/core/image.hpp"
#include "stages/augment/affine.hpp"

namespace sluice::stages::affine_detail {

// One output pixel of Pillow's bilinear affine filter: the centre (u + 0.5, yc) mapped through
// `m` (a*x + b*y + c, in that order), taps clamped at the border, the result truncated. Returns
// false, writing nothing, when the point falls outside the source (the pixel keeps the fill).
template <int C>
inline bool bilinear_pixel(ConstImageView src, const AffineMatrix& m, int u, double yc, std::uint8_t* out) {
  const int w = src.width;
  const int h = src.height;
  const double xc = u + 0.5;
  double xin = m.a * xc + m.b * yc + m.c;
  double yin = m.d * xc + m.e * yc + m.f;
  if (xin < 0.0 || xin >= w || yin < 0.0 || yin >= h) return false;
  xin -= 0.5;
  yin -= 0.5;
  // Pillow's FLOOR: truncation at or above zero, floor below; the same as floor here.
  const int x = xin < 0.0 ? static_cast<int>(std::floor(xin)) : static_cast<int>(xin);
  const int y = yin < 0.0 ? static_cast<int>(std::floor(yin)) : static_cast<int>(yin);
  const double dx = xin - x;
  const double dy = yin - y;
  const auto clip_x = [w](int i) { return i < 0 ? 0 : (i < w ? i : w - 1); };
  const std::uint8_t* row0 = src.row(y < 0 ? 0 : (y < h ? y : h - 1));
  const bool has_row1 = y + 1 >= 0 && y + 1 < h;
  const std::uint8_t* row1 = has_row1 ? src.row(y + 1) : row0;
  const int x0 = clip_x(x) * C;
  const int x1 = clip_x(x + 1) * C;
  for (int k = 0; k < C; ++k) {
    double v1 = row0[x0 + k] + (row0[x1 + k] - row0[x0 + k]) * dx;
    double v2 = v1;
    if (has_row1) v2 = row1[x0 + k] + (row1[x1 + k] - row1[x0 + k]) * dx;
    v1 = v1 + (v2 - v1) * dy;
    out[k] = static_cast<std::uint8_t>(v1);
  }
  return true;
}

// Whether this CPU runs bilinear_avx2 (checked once).
bool avx2_supported();

// Whether bilinear_avx2 takes this source: it addresses bytes with 32-bit offsets, so the
// source's bytes (rows times stride) must stay below 2^31 - 8 and the stride must be positive.
bool avx2_fits(ConstImageView src);

// The whole bilinear warp of src into dst, which already holds the fill (fill_pixel: the fill's
// bytes packed little-endian, channel 0 lowest). Call only when avx2_supported() and avx2_fits(src).
void bilinear_avx2(ConstImageView src, ImageView dst, const AffineMatrix& m, std::uint32_t fill_pixel);

}  // namespace sluice::stages::affine_detail
