// Non-owning views of 8-bit interleaved images (HWC), the currency between the decode and
// image-op kernels. A view never allocates; whoever owns the pixels outlives the view.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sluice {

struct Size2 {
  int width = 0;
  int height = 0;
  friend bool operator==(const Size2&, const Size2&) = default;
};

// A rectangle in pixel coordinates: [x, x + width) x [y, y + height).
struct Rect {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
  friend bool operator==(const Rect&, const Rect&) = default;
};

struct ImageView {
  std::uint8_t* data = nullptr;
  int width = 0;
  int height = 0;
  int channels = 0;
  std::ptrdiff_t stride = 0;  // bytes from one row to the next

  std::uint8_t* row(int y) const { return data + y * stride; }
};

struct ConstImageView {
  const std::uint8_t* data = nullptr;
  int width = 0;
  int height = 0;
  int channels = 0;
  std::ptrdiff_t stride = 0;

  ConstImageView() = default;
  ConstImageView(const std::uint8_t* d, int w, int h, int c, std::ptrdiff_t s)
      : data(d), width(w), height(h), channels(c), stride(s) {}
  ConstImageView(const ImageView& v)  // NOLINT: a mutable view is usable wherever a const one is
      : data(v.data), width(v.width), height(v.height), channels(v.channels), stride(v.stride) {}

  const std::uint8_t* row(int y) const { return data + y * stride; }
};

}  // namespace sluice
