// Affine warps of an 8-bit HWC image (rotate, affine, shear, translate): torchvision's matrix from
// (angle, translate, scale, shear, center) and Pillow's Image.transform(AFFINE) engine, nearest and
// bilinear, so that an output equals torchvision's on a PIL image (RandomRotation, RandomAffine and
// the geometric ops of AutoAugment, RandAugment and TrivialAugmentWide).
//
// Pillow's engine is reproduced step for step because its rounding is what the reference recipes
// train on: nearest uses 16.16 fixed point along each row (or a per-column table when the matrix
// only scales and translates), bilinear maps each pixel centre in double precision, clamps the taps
// at the border and truncates the result. A pixel whose source point falls outside the image takes
// the fill value of its channel.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "sluice/detail/core/image.hpp"

namespace sluice::stages {

enum class WarpInterpolation : std::uint8_t { kNearest, kBilinear };

// Which kernel runs: kAuto takes AVX2 for bilinear where the CPU has it and copies rows for a
// whole-pixel shift (the bytes are the same), kScalar Pillow's engines pixel by pixel for every
// matrix (the reference), kAvx2 the vector kernel (tests hold both shortcuts to the reference).
enum class WarpIsa : std::uint8_t { kAuto, kScalar, kAvx2 };

// Whether `isa` runs on this CPU (kAuto and kScalar always do).
bool warp_isa_available(WarpIsa isa);

// The inverse map, output to source, as Pillow takes it: the output pixel (u, v), whose centre is
// (u + 0.5, v + 0.5), samples the source at (a*x + b*y + c, d*x + e*y + f) for (x, y) that centre,
// in pixel coordinates where source pixel i covers [i, i + 1).
struct AffineMatrix {
  double a = 1, b = 0, c = 0;
  double d = 0, e = 1, f = 0;
};

// torchvision's RandomAffine / F.affine parameters; angles in degrees, clockwise as torchvision.
struct AffineParams {
  double angle = 0;
  double translate_x = 0;  // pixels, after rotation
  double translate_y = 0;
  double scale = 1;        // > 0
  double shear_x = 0;      // degrees, parallel to the x axis
  double shear_y = 0;
  // The fixed point of the rotation in pixels; torchvision's PIL path uses (width/2, height/2)
  // when none is given.
  std::optional<double> center_x;
  std::optional<double> center_y;
};

// torchvision's _get_inverse_affine_matrix for an image of `size` (F.affine on a PIL image).
// Throws kInvalidArgument for scale <= 0 or a non-finite parameter.
AffineMatrix affine_matrix(const AffineParams& params, Size2 size);

// Pillow's Image.rotate matrix (F.rotate on a PIL image, expand=False): counter-clockwise degrees
// about `center` (default (width/2, height/2)), its cosines rounded to 15 decimals as Pillow does.
AffineMatrix rotation_matrix(double angle, Size2 size, std::optional<double> center_x = {},
                             std::optional<double> center_y = {});

// Warps src into dst (dst's size may differ; Pillow's output size) through `m`. fill holds one
// value per channel (or one for all; empty means 0). src and dst must not overlap: the caller
// holds a second image, no other scratch is needed. Throws kInvalidArgument for different channel
// counts, a fill of the wrong size, overlapping views, an `isa` this CPU lacks. Zero-size images
// are a no-op. `isa` picks the kernel (see WarpIsa).
void warp_affine(ConstImageView src, ImageView dst, const AffineMatrix& m,
                 WarpInterpolation interpolation, std::span<const std::uint8_t> fill = {},
                 WarpIsa isa = WarpIsa::kAuto);

// F.rotate on a PIL image (expand=False): the angle is taken modulo 360 and, as Pillow does when no
// center is given, 0 and 180 degrees (and 90 and 270 on a square image) are exact transposes;
// every other angle warps through rotation_matrix. dst has src's size.
void rotate(ConstImageView src, ImageView dst, double angle, WarpInterpolation interpolation,
            std::span<const std::uint8_t> fill = {}, std::optional<double> center_x = {},
            std::optional<double> center_y = {});

// F.affine on a PIL image: warp_affine through affine_matrix(params, src size). dst has src's size.
void affine(ConstImageView src, ImageView dst, const AffineParams& params,
            WarpInterpolation interpolation, std::span<const std::uint8_t> fill = {});

}  // namespace sluice::stages
