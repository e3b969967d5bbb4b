// The erase kernel (erase.hpp): one element writer per dtype, walked over the rectangle in either
// layout.
#include "stages/augment/erase.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <numbers>

#include "sluice/detail/core/half.hpp"

namespace sluice::stages {

namespace {

// Calls write(pointer to the element, channel, value index) for every element of `rect`, in C, y,
// x order.
template <class Write>
void for_each_element(const SlotSample& slot, Rect rect, Write write) {
  const std::size_t element = size_of(slot.dtype);
  auto* base = static_cast<std::uint8_t*>(slot.data);
  const std::size_t w = static_cast<std::size_t>(slot.size.width);
  const std::size_t plane = w * static_cast<std::size_t>(slot.size.height);
  for (int c = 0; c < slot.channels; ++c) {
    for (int y = rect.y; y < rect.y + rect.height; ++y) {
      for (int x = rect.x; x < rect.x + rect.width; ++x) {
        const std::size_t pixel = static_cast<std::size_t>(y) * w + static_cast<std::size_t>(x);
        const std::size_t index = slot.layout == Layout::kNCHW
                                      ? static_cast<std::size_t>(c) * plane + pixel
                                      : pixel * static_cast<std::size_t>(slot.channels) + static_cast<std::size_t>(c);
        write(base + index * element, c);
      }
    }
  }
}

void store(std::uint8_t* at, DType dtype, float value) {
  switch (dtype) {
    case DType::kF32: std::memcpy(at, &value, sizeof value); break;
    case DType::kF16: {
      const std::uint16_t h = float_to_f16(value);
      std::memcpy(at, &h, sizeof h);
      break;
    }
    case DType::kBF16: {
      const std::uint16_t h = float_to_bf16(value);
      std::memcpy(at, &h, sizeof h);
      break;
    }
    case DType::kU8: *at = static_cast<std::uint8_t>(value); break;  // resolve_pipeline allows 0..255 only
    case DType::kI32: {
      const auto i = static_cast<std::int32_t>(value);
      std::memcpy(at, &i, sizeof i);
      break;
    }
  }
}

// Writes `count` copies of the `size` bytes at `pattern` from `at`: a memset when every byte is
// the same (RandomErasing's default value 0 is all zero bytes in every dtype), otherwise the
// pattern once and then copies of what is already written, doubling each time.
void fill_pattern(std::uint8_t* at, std::size_t count, const std::uint8_t* pattern, std::size_t size) {
  const std::size_t total = count * size;
  if (total == 0) return;
  bool uniform = true;
  for (std::size_t i = 1; i < size; ++i) uniform = uniform && pattern[i] == pattern[0];
  if (uniform) {
    std::memset(at, pattern[0], total);
    return;
  }
  std::memcpy(at, pattern, size);
  for (std::size_t done = size; done < total;) {
    const std::size_t n = done < total - done ? done : total - done;
    std::memcpy(at + done, at, n);
    done += n;
  }
}

}  // namespace

void erase_constant(const SlotSample& slot, Rect rect, std::span<const float> values) {
  // Each channel's value converted once; then each row of the rectangle is one run of the same
  // element (NCHW: per channel) or of the same pixel (NHWC), filled as a block instead of element
  // by element (a fifth of a 176 px sample, on average, in f32: 65 KB).
  const std::size_t element = size_of(slot.dtype);
  const auto channels = static_cast<std::size_t>(slot.channels);
  std::uint8_t pixel[32] = {};  // one pixel's converted values
  if (channels * element > sizeof pixel) {
    for_each_element(slot, rect, [&](std::uint8_t* at, int c) {
      store(at, slot.dtype, values.size() == 1 ? values[0] : values[static_cast<std::size_t>(c)]);
    });
    return;
  }
  for (std::size_t c = 0; c < channels; ++c) store(pixel + c * element, slot.dtype, values.size() == 1 ? values[0] : values[c]);
  auto* base = static_cast<std::uint8_t*>(slot.data);
  const auto w = static_cast<std::size_t>(slot.size.width);
  const std::size_t plane = w * static_cast<std::size_t>(slot.size.height);
  const auto run = static_cast<std::size_t>(rect.width);
  for (int y = rect.y; y < rect.y + rect.height; ++y) {
    const std::size_t first = static_cast<std::size_t>(y) * w + static_cast<std::size_t>(rect.x);
    if (slot.layout == Layout::kNCHW) {
      for (std::size_t c = 0; c < channels; ++c) fill_pattern(base + (c * plane + first) * element, run, pixel + c * element, element);
    } else {
      fill_pattern(base + first * channels * element, run, pixel, channels * element);
    }
  }
}

void erase_random(const SlotSample& slot, Rect rect, CounterRng& rng) {
  // Box-Muller, both values of each pair used.
  double spare = 0;
  bool has_spare = false;
  for_each_element(slot, rect, [&](std::uint8_t* at, int /*c*/) {
    double z;
    if (has_spare) {
      z = spare;
      has_spare = false;
    } else {
      const double u1 = 1.0 - rng.uniform();  // (0, 1]: the log stays finite
      const double u2 = rng.uniform();
      const double radius = std::sqrt(-2.0 * std::log(u1));
      z = radius * std::cos(2.0 * std::numbers::pi * u2);
      spare = radius * std::sin(2.0 * std::numbers::pi * u2);
      has_spare = true;
    }
    store(at, slot.dtype, static_cast<float>(z));
  });
}

}  // namespace sluice::stages
