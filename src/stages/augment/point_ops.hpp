// Per-pixel and histogram ops on 8-bit HWC images, each equal to torchvision's on a PIL image
// (which calls Pillow's ImageOps and ImageEnhance): posterize, solarize, invert, autocontrast,
// equalize, adjust_sharpness. Every channel is processed on its own, as Pillow does per band.
// All run in place (dst may be src itself); src and dst have the same size and channels (1 to 4),
// and zero-size images are a no-op. Bad values throw kInvalidArgument naming them.
#pragma once

#include <cstddef>
#include <span>

#include "sluice/detail/core/image.hpp"

namespace sluice::stages {

// ImageOps.posterize: keeps the top `bits` bits of each value (0 <= bits <= 8).
void posterize(ConstImageView src, ImageView dst, int bits);

// ImageOps.solarize: a value v >= threshold becomes 255 - v. Any threshold (torchvision passes the
// policies' float magnitudes through); above 255 it is the identity.
void solarize(ConstImageView src, ImageView dst, double threshold);

// ImageOps.invert: 255 - v.
void invert(ConstImageView src, ImageView dst);

// ImageOps.autocontrast (cutoff 0): per channel, the darkest value maps to 0 and the lightest to
// 255 by int(v * scale + offset) with scale = 255 / (hi - lo); a flat channel is unchanged.
void autocontrast(ConstImageView src, ImageView dst);

// ImageOps.equalize: per channel, Pillow's lookup table from the cumulative histogram; a channel
// with one value (or too few pixels for a step) is unchanged.
void equalize(ConstImageView src, ImageView dst);

// Bytes of scratch adjust_sharpness needs: two rows of the source (so it can run in place).
std::size_t sharpness_workspace_bytes(Size2 size, int channels);

// ImageEnhance.Sharpness(img).enhance(factor): blends Pillow's SMOOTH filter (3x3, centre 5,
// others 1, over 13; the border rows and columns unfiltered) with the image:
// smooth + factor * (image - smooth) in f32, truncated (clamped to 0..255 outside 0 <= factor <= 1).
// factor >= 0 and finite. An image narrower or shorter than 3 pixels is unchanged, as Pillow's
// filter leaves it.
void adjust_sharpness(ConstImageView src, ImageView dst, float factor, std::span<std::byte> workspace);

}  // namespace sluice::stages
