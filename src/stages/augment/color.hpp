// Colour kernels: torchvision's adjust_brightness, adjust_contrast, adjust_saturation, adjust_hue
// and rgb_to_grayscale as they run on a PIL image (ImageEnhance's Image.blend, convert("L"),
// convert("HSV")), in place on a u8 HWC image at the output size, with Pillow's arithmetic: the
// same float and double operations in the same order, so the bytes are Pillow's
// (tests/unit/stages/augment_color_test.cpp holds them to torchvision on photos).
//
// One or three channels: a one-channel image is PIL's "L" (saturation and hue leave it as it is,
// as torchvision does). None needs a workspace: each runs in the image's own memory.
#pragma once

#include <cstdint>

#include "sluice/detail/core/image.hpp"

namespace sluice::stages {

// Pillow's RGB -> L: ITU-R 601-2 luma in 16-bit fixed point, (19595 R + 38470 G + 7471 B + 2^15) >> 16.
inline std::uint8_t luma(std::uint8_t r, std::uint8_t g, std::uint8_t b) {
  return static_cast<std::uint8_t>((r * 19595u + g * 38470u + b * 7471u + 0x8000u) >> 16);
}

// ImageEnhance.Brightness(img).enhance(factor): blend with black. factor >= 0.
void adjust_brightness(ImageView image, double factor);
// ImageEnhance.Contrast: blend with the grey level of the mean luma (rounded half up).
void adjust_contrast(ImageView image, double factor);
// ImageEnhance.Color: blend with each pixel's own luma.
void adjust_saturation(ImageView image, double factor);
// F.adjust_hue: to HSV, the hue byte shifted by uint8(hue_factor * 255) modulo 256, back to RGB.
// hue_factor in [-0.5, 0.5].
void adjust_hue(ImageView image, double hue_factor);
// rgb_to_grayscale(num_output_channels=3): the luma in each channel.
void grayscale(ImageView image);
// rgb_to_grayscale(num_output_channels=1): the luma packed into one channel over the same memory,
// rows `image.width` bytes apart; returns that view.
ImageView grayscale_to_one_channel(ImageView image);

}  // namespace sluice::stages
