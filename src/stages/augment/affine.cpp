// Affine warps as Pillow's Image.transform(AFFINE) computes them (libImaging/Geometry.c), so that
// outputs equal torchvision's on a PIL image: nearest goes through a per-column table when the
// matrix only scales and translates, else through 16.16 fixed point stepped along each row (or
// doubles when a corner falls outside fixed point's range); bilinear maps each pixel centre and
// interpolates in double with clamped taps, truncating the result. Pixels mapped outside the
// source keep the fill.
#include "stages/augment/affine.hpp"

#include "stages/augment/affine_kernels.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numbers>
#include <string>

#include "sluice/core/error.hpp"

namespace sluice::stages {
namespace {

constexpr int kMaxChannels = 4;
using Fill = std::array<std::uint8_t, kMaxChannels>;

// Pillow's COORD and FLOOR: -1 (or the floor) below zero, truncation above.
inline int coord(double v) { return v < 0.0 ? -1 : static_cast<int>(v); }
inline int pil_floor(double v) { return v < 0.0 ? static_cast<int>(std::floor(v)) : static_cast<int>(v); }

double radians(double degrees) { return degrees * (std::numbers::pi / 180.0); }

// Python's round(x, 15): the exact binary value rounded to 15 decimals, half to even, which is
// what glibc's printf does; strtod reads it back correctly rounded as Python does.
double round15(double x) {
  char text[64];
  std::snprintf(text, sizeof text, "%.15f", x);
  return std::strtod(text, nullptr);
}

Fill fill_values(std::span<const std::uint8_t> fill, int channels) {
  Fill out{};
  if (fill.empty()) return out;
  if (fill.size() == 1) {
    out.fill(fill[0]);
    return out;
  }
  if (fill.size() != static_cast<std::size_t>(channels)) {
    throw Error(ErrorCode::kInvalidArgument, "affine: fill needs one value per channel (" + std::to_string(channels) +
                                                 ") or one for all, got " + std::to_string(fill.size()));
  }
  for (int k = 0; k < channels; ++k) out[k] = fill[k];
  return out;
}

void check_views(ConstImageView src, ImageView dst) {
  if (src.channels != dst.channels) {
    throw Error(ErrorCode::kInvalidArgument, "affine: source and destination differ in channels");
  }
  if (src.channels < 1 || src.channels > kMaxChannels) {
    throw Error(ErrorCode::kInvalidArgument, "affine: 1 to 4 channels, got " + std::to_string(src.channels));
  }
  if (src.width <= 0 || src.height <= 0 || dst.width <= 0 || dst.height <= 0) return;
  const auto* s0 = src.data;
  const auto* s1 = src.row(src.height - 1) + static_cast<std::ptrdiff_t>(src.width) * src.channels;
  const auto* d0 = static_cast<const std::uint8_t*>(dst.data);
  const auto* d1 = d0 + (dst.height - 1) * dst.stride + static_cast<std::ptrdiff_t>(dst.width) * dst.channels;
  if (s0 < d1 && d0 < s1) {
    throw Error(ErrorCode::kInvalidArgument, "affine: source and destination overlap (the warp cannot run in place)");
  }
}

// The first row pixel by pixel, the others copies of it.
void fill_image(ImageView dst, const Fill& fill) {
  const int c = dst.channels;
  std::uint8_t* first = dst.row(0);
  for (int x = 0; x < dst.width; ++x) {
    for (int k = 0; k < c; ++k) first[x * c + k] = fill[static_cast<std::size_t>(k)];
  }
  const std::size_t bytes = static_cast<std::size_t>(dst.width) * static_cast<std::size_t>(c);
  for (int y = 1; y < dst.height; ++y) std::memcpy(dst.row(y), first, bytes);
}

// C channels, known at compile time (the engines are instantiated for 1 to 4).
template <int C>
inline void copy_pixel(const std::uint8_t* in, std::uint8_t* out) {
  for (int k = 0; k < C; ++k) out[k] = in[k];
}

// ImagingScaleAffine: a matrix without rotation or shear.
template <int C>
void scale_affine(ConstImageView src, ImageView dst, const AffineMatrix& m) {
  constexpr int c = C;
  double xo = m.c + m.a * 0.5;
  double yo = m.f + m.e * 0.5;
  int xmin = dst.width;
  int xmax = 0;
  // The source column of each output column; a linear map keeps the valid ones contiguous.
  constexpr int kChunk = 1024;
  std::array<int, kChunk> table{};
  for (int x0 = 0; x0 < dst.width; x0 += kChunk) {
    // Recomputed per chunk exactly as Pillow's single loop steps (xo accumulates).
    const int n = std::min(kChunk, dst.width - x0);
    int lo = n;
    int hi = 0;
    for (int i = 0; i < n; ++i) {
      const int xin = coord(xo);
      if (xin >= 0 && xin < src.width) {
        hi = i + 1;
        lo = std::min(lo, i);
        table[i] = xin;
      }
      xo += m.a;
    }
    xmin = lo;
    xmax = hi;
    double y_step = yo;
    for (int y = 0; y < dst.height; ++y) {
      const int yi = coord(y_step);
      if (yi >= 0 && yi < src.height) {
        const std::uint8_t* in = src.row(yi);
        std::uint8_t* out = dst.row(y) + static_cast<std::ptrdiff_t>(x0) * c;
        for (int i = xmin; i < xmax; ++i) copy_pixel<C>(in + table[i] * c, out + i * c);
      }
      y_step += m.e;
    }
  }
}

bool fits_fixed(const AffineMatrix& m, int x, int y) {
  return std::fabs(x * m.a + y * m.b + m.c) < 32768.0 && std::fabs(x * m.d + y * m.e + m.f) < 32768.0;
}

// affine_fixed: 16.16 fixed point, stepped along rows and columns.
template <int C>
void fixed_affine(ConstImageView src, ImageView dst, const AffineMatrix& m) {
  constexpr int c = C;
  const auto fix = [](double v) { return pil_floor(v * 65536.0 + 0.5); };
  const int a0 = fix(m.a);
  const int a1 = fix(m.b);
  const int a3 = fix(m.d);
  const int a4 = fix(m.e);
  int a2 = fix(m.c + m.a * 0.5 + m.b * 0.5);
  int a5 = fix(m.f + m.d * 0.5 + m.e * 0.5);
  for (int y = 0; y < dst.height; ++y) {
    int xx = a2;
    int yy = a5;
    std::uint8_t* out = dst.row(y);
    for (int x = 0; x < dst.width; ++x) {
      const int xin = xx >> 16;
      if (xin >= 0 && xin < src.width) {
        const int yin = yy >> 16;
        if (yin >= 0 && yin < src.height) copy_pixel<C>(src.row(yin) + xin * c, out + x * c);
      }
      xx += a0;
      yy += a3;
    }
    a2 += a1;
    a5 += a4;
  }
}

// Pillow's floating-point fallback for matrices beyond fixed point's range.
template <int C>
void float_affine(ConstImageView src, ImageView dst, const AffineMatrix& m) {
  constexpr int c = C;
  double xo = m.c + m.b * 0.5 + m.a * 0.5;
  double yo = m.f + m.e * 0.5 + m.d * 0.5;
  for (int y = 0; y < dst.height; ++y) {
    double xx = xo;
    double yy = yo;
    std::uint8_t* out = dst.row(y);
    for (int x = 0; x < dst.width; ++x) {
      const int xin = coord(xx);
      if (xin >= 0 && xin < src.width) {
        const int yin = coord(yy);
        if (yin >= 0 && yin < src.height) copy_pixel<C>(src.row(yin) + xin * c, out + x * c);
      }
      xx += m.a;
      yy += m.d;
    }
    xo += m.b;
    yo += m.e;
  }
}

// ImagingGenericTransform with affine_transform and the bilinear filter, pixel by pixel: the
// reference the AVX2 kernel (affine_avx2.cpp) is held to.
template <int C>
void bilinear_affine(ConstImageView src, ImageView dst, const AffineMatrix& m) {
  for (int v = 0; v < dst.height; ++v) {
    std::uint8_t* out = dst.row(v);
    const double yc = v + 0.5;
    for (int u = 0; u < dst.width; ++u) affine_detail::bilinear_pixel<C>(src, m, u, yc, out + u * C);
  }
}

// Pillow's choice of engine (ImagingTransformAffine) for C channels.
template <int C>
void run_engine(ConstImageView src, ImageView dst, const AffineMatrix& m, WarpInterpolation interpolation) {
  if (interpolation == WarpInterpolation::kBilinear) {
    bilinear_affine<C>(src, dst, m);
  } else if (m.b == 0 && m.d == 0) {
    scale_affine<C>(src, dst, m);
  } else if (fits_fixed(m, 0, 0) && fits_fixed(m, dst.width, dst.height) && fits_fixed(m, 0, dst.height) &&
             fits_fixed(m, dst.width, 0)) {
    fixed_affine<C>(src, dst, m);
  } else {
    float_affine<C>(src, dst, m);
  }
}

// A matrix that moves by whole pixels only (a = e = 1, b = d = 0, c and f integers:
// TrivialAugmentWide's and RandAugment's translations, their zero shears, RandomAffine's integer
// translations) gives output pixel (u, v) the source pixel (u + c, v + f) in both of Pillow's
// engines, or the fill where that is outside: bilinear maps the centre to u + c + 0.5, so both
// weights are 0 and the interpolation returns the tap; nearest's column table holds u + c and its
// row u + f. The inside part of each row is then one copy. False (nothing written) for any other
// matrix. dst already holds the fill.
bool whole_pixel_shift(ConstImageView src, ImageView dst, const AffineMatrix& m) {
  constexpr double kMaxShift = 1 << 30;  // far beyond any image; keeps the sums below in range
  if (!(m.a == 1.0 && m.e == 1.0 && m.b == 0.0 && m.d == 0.0 && std::abs(m.c) < kMaxShift &&
        std::abs(m.f) < kMaxShift && m.c == std::trunc(m.c) && m.f == std::trunc(m.f))) {
    return false;
  }
  const auto dx = static_cast<std::int64_t>(m.c);
  const auto dy = static_cast<std::int64_t>(m.f);
  const std::int64_t u0 = std::max<std::int64_t>(0, -dx);
  const std::int64_t u1 = std::min<std::int64_t>(dst.width, src.width - dx);
  if (u0 >= u1) return true;  // every column outside: the fill
  const std::int64_t c = src.channels;
  const auto bytes = static_cast<std::size_t>((u1 - u0) * c);
  for (int v = 0; v < dst.height; ++v) {
    const std::int64_t y = v + dy;
    if (y < 0 || y >= src.height) continue;
    std::memcpy(dst.row(v) + u0 * c, src.row(static_cast<int>(y)) + (u0 + dx) * c, bytes);
  }
  return true;
}

// Pillow's transposes: ROTATE_180, and ROTATE_90 / ROTATE_270 (counter-clockwise) on a square.
void transpose(ConstImageView src, ImageView dst, int quarter_turns) {
  const int c = src.channels;
  const int w = src.width;
  const int h = src.height;
  for (int r = 0; r < h; ++r) {
    std::uint8_t* out = dst.row(r);
    for (int col = 0; col < w; ++col) {
      const std::uint8_t* in = nullptr;
      if (quarter_turns == 2) in = src.row(h - 1 - r) + (w - 1 - col) * c;
      else if (quarter_turns == 1) in = src.row(col) + (w - 1 - r) * c;
      else in = src.row(h - 1 - col) + r * c;
      for (int k = 0; k < c; ++k) out[col * c + k] = in[k];
    }
  }
}

void check_finite(std::initializer_list<double> values, const char* what) {
  for (double v : values) {
    if (!std::isfinite(v)) throw Error(ErrorCode::kInvalidArgument, std::string(what) + ": a parameter is not finite");
  }
}

}  // namespace

AffineMatrix affine_matrix(const AffineParams& p, Size2 size) {
  const double cx = p.center_x.value_or(size.width * 0.5);
  const double cy = p.center_y.value_or(size.height * 0.5);
  check_finite({p.angle, p.translate_x, p.translate_y, p.scale, p.shear_x, p.shear_y, cx, cy}, "affine");
  if (!(p.scale > 0.0)) {
    throw Error(ErrorCode::kInvalidArgument, "affine: scale must be > 0, got " + std::to_string(p.scale));
  }
  // torchvision's _get_inverse_affine_matrix, operation for operation.
  const double rot = radians(p.angle);
  const double sx = radians(p.shear_x);
  const double sy = radians(p.shear_y);
  const double a = std::cos(rot - sy) / std::cos(sy);
  const double b = -std::cos(rot - sy) * std::tan(sx) / std::cos(sy) - std::sin(rot);
  const double c = std::sin(rot - sy) / std::cos(sy);
  const double d = -std::sin(rot - sy) * std::tan(sx) / std::cos(sy) + std::cos(rot);
  std::array<double, 6> m{d, -b, 0.0, -c, a, 0.0};
  for (double& v : m) v /= p.scale;
  m[2] += m[0] * (-cx - p.translate_x) + m[1] * (-cy - p.translate_y);
  m[5] += m[3] * (-cx - p.translate_x) + m[4] * (-cy - p.translate_y);
  m[2] += cx;
  m[5] += cy;
  return {m[0], m[1], m[2], m[3], m[4], m[5]};
}

AffineMatrix rotation_matrix(double angle, Size2 size, std::optional<double> center_x, std::optional<double> center_y) {
  const double cx = center_x.value_or(size.width / 2.0);
  const double cy = center_y.value_or(size.height / 2.0);
  check_finite({angle, cx, cy}, "rotate");
  // Pillow's Image.rotate, operation for operation (angle % 360 first, as Python's modulo).
  double turned = std::fmod(angle, 360.0);
  if (turned < 0) turned += 360.0;
  const double r = -radians(turned);
  AffineMatrix m{round15(std::cos(r)), round15(std::sin(r)), 0.0, round15(-std::sin(r)), round15(std::cos(r)), 0.0};
  const double x = -cx - 0.0;
  const double y = -cy - 0.0;
  m.c = m.a * x + m.b * y + 0.0;
  m.f = m.d * x + m.e * y + 0.0;
  m.c += cx;
  m.f += cy;
  return m;
}

bool warp_isa_available(WarpIsa isa) { return isa != WarpIsa::kAvx2 || affine_detail::avx2_supported(); }

void warp_affine(ConstImageView src, ImageView dst, const AffineMatrix& m, WarpInterpolation interpolation,
                 std::span<const std::uint8_t> fill, WarpIsa isa) {
  check_views(src, dst);
  check_finite({m.a, m.b, m.c, m.d, m.e, m.f}, "affine");
  const Fill values = fill_values(fill, src.channels);
  if (!warp_isa_available(isa)) throw Error(ErrorCode::kInvalidArgument, "affine: this CPU has no AVX2");
  if (dst.width <= 0 || dst.height <= 0) return;
  fill_image(dst, values);
  if (src.width <= 0 || src.height <= 0) return;
  if (isa != WarpIsa::kScalar && whole_pixel_shift(src, dst, m)) return;
  const bool vector = interpolation == WarpInterpolation::kBilinear && isa != WarpIsa::kScalar &&
                      affine_detail::avx2_supported() && affine_detail::avx2_fits(src);
  if (vector) {
    std::uint32_t fill_pixel = 0;
    for (int k = 0; k < src.channels; ++k) fill_pixel |= std::uint32_t{values[static_cast<std::size_t>(k)]} << (8 * k);
    affine_detail::bilinear_avx2(src, dst, m, fill_pixel);
    return;
  }
  switch (src.channels) {
    case 1: run_engine<1>(src, dst, m, interpolation); break;
    case 2: run_engine<2>(src, dst, m, interpolation); break;
    case 3: run_engine<3>(src, dst, m, interpolation); break;
    default: run_engine<4>(src, dst, m, interpolation); break;
  }
}

void rotate(ConstImageView src, ImageView dst, double angle, WarpInterpolation interpolation,
            std::span<const std::uint8_t> fill, std::optional<double> center_x, std::optional<double> center_y) {
  if (src.width != dst.width || src.height != dst.height) {
    throw Error(ErrorCode::kInvalidArgument, "rotate: the destination must have the source's size");
  }
  check_views(src, dst);
  check_finite({angle}, "rotate");
  (void)fill_values(fill, src.channels);
  double turned = std::fmod(angle, 360.0);
  if (turned < 0) turned += 360.0;
  if (!center_x && !center_y && src.width > 0 && src.height > 0) {
    const bool square = src.width == src.height;
    if (turned == 0.0 || turned == 180.0 || (square && (turned == 90.0 || turned == 270.0))) {
      if (turned == 0.0) {
        for (int y = 0; y < src.height; ++y) std::memcpy(dst.row(y), src.row(y), static_cast<std::size_t>(src.width) * src.channels);
      } else {
        transpose(src, dst, static_cast<int>(turned / 90.0));
      }
      return;
    }
  }
  warp_affine(src, dst, rotation_matrix(angle, {src.width, src.height}, center_x, center_y), interpolation, fill);
}

void affine(ConstImageView src, ImageView dst, const AffineParams& params, WarpInterpolation interpolation,
            std::span<const std::uint8_t> fill) {
  if (src.width != dst.width || src.height != dst.height) {
    throw Error(ErrorCode::kInvalidArgument, "affine: the destination must have the source's size");
  }
  warp_affine(src, dst, affine_matrix(params, {src.width, src.height}), interpolation, fill);
}

}  // namespace sluice::stages
