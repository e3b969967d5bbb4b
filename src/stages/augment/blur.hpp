// Gaussian blur of an 8-bit HWC image, torchvision's GaussianBlur / F.gaussian_blur: a kernel of
// kernel_x by kernel_y taps whose weights are exp(-x^2 / (2 sigma^2)) at x = -(k-1)/2 .. (k-1)/2,
// normalised to sum 1; the border reflects (torch's "reflect" padding: the edge pixel is not
// repeated); the result is rounded half to even. torchvision runs this on a PIL image too (it
// converts the image to a tensor and back), so its tensor path is the reference on both.
//
// torchvision convolves with the 2-D kernel in f32; the kernel here is applied as two 1-D passes in
// f32 (a row pass into the workspace, then a column pass), which differs from it by a few f32 ulps
// and so, after rounding, by at most one level where a value lands next to .5 (measured against
// torchvision 0.14: at most 0.07% of the bytes, tests/unit/stages/augment/blur_test.cpp).
//
// A kernel wider or taller than the image: torch's reflect padding refuses a pad of the image's
// size or more; here the reflection repeats (period 2 * (n - 1)), and a one-pixel axis is
// constant, so any odd size is accepted.
#pragma once

#include <cstddef>
#include <span>

#include "sluice/detail/core/image.hpp"

namespace sluice::stages {

struct GaussianBlurParams {
  int kernel_x = 3;  // odd, >= 1 (torchvision's kernel_size[0], the width)
  int kernel_y = 3;  // odd, >= 1
  double sigma_x = 1.0;  // > 0
  double sigma_y = 1.0;  // > 0
};

// Throws kInvalidArgument naming the value: an even or non-positive kernel size, a sigma that is
// not > 0 and finite.
void check_gaussian_blur(const GaussianBlurParams& params);

// Bytes of scratch gaussian_blur needs for an image of `size` with `channels` channels: the row
// pass's f32 image, one output row, one source row in f32 with its border, the two 1-D kernels.
std::size_t gaussian_blur_workspace_bytes(Size2 size, int channels, const GaussianBlurParams& params);

// Blurs src into dst (same size and channels; dst may be src itself: every source pixel is read
// before the first is written). workspace: at least gaussian_blur_workspace_bytes(), any alignment.
void gaussian_blur(ConstImageView src, ImageView dst, const GaussianBlurParams& params,
                   std::span<std::byte> workspace);

}  // namespace sluice::stages
