// erase_constant against an element-by-element reference written here: every dtype, both layouts,
// 1, 3 and 4 channels, one value or one per channel, zero (the memset path) and non-zero values,
// rectangles over the whole sample, inside it, at its corners, of one pixel and empty. The bytes
// outside the rectangle keep a sentinel pattern; the bytes inside are the reference's.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "sluice/detail/core/half.hpp"
#include "stages/augment/erase.hpp"

namespace sluice::stages {
namespace {

// One element's bytes as torch's assignment converts the value (erase.hpp).
std::vector<std::uint8_t> element_bytes(DType dtype, float v) {
  std::vector<std::uint8_t> out(size_of(dtype));
  switch (dtype) {
    case DType::kF32: std::memcpy(out.data(), &v, 4); break;
    case DType::kF16: { const std::uint16_t h = float_to_f16(v); std::memcpy(out.data(), &h, 2); break; }
    case DType::kBF16: { const std::uint16_t h = float_to_bf16(v); std::memcpy(out.data(), &h, 2); break; }
    case DType::kU8: out[0] = static_cast<std::uint8_t>(v); break;
    case DType::kI32: { const auto i = static_cast<std::int32_t>(v); std::memcpy(out.data(), &i, 4); break; }
  }
  return out;
}

// The sample's bytes after erasing, element by element.
std::vector<std::uint8_t> reference(std::vector<std::uint8_t> bytes, const SlotSample& s, Rect r,
                                    const std::vector<float>& values) {
  const std::size_t e = size_of(s.dtype);
  const auto w = static_cast<std::size_t>(s.size.width);
  const std::size_t plane = w * static_cast<std::size_t>(s.size.height);
  for (int c = 0; c < s.channels; ++c) {
    const auto v = element_bytes(s.dtype, values.size() == 1 ? values[0] : values[static_cast<std::size_t>(c)]);
    for (int y = r.y; y < r.y + r.height; ++y) {
      for (int x = r.x; x < r.x + r.width; ++x) {
        const std::size_t pixel = static_cast<std::size_t>(y) * w + static_cast<std::size_t>(x);
        const std::size_t index = s.layout == Layout::kNCHW ? static_cast<std::size_t>(c) * plane + pixel
                                                            : pixel * static_cast<std::size_t>(s.channels) + static_cast<std::size_t>(c);
        std::memcpy(bytes.data() + index * e, v.data(), e);
      }
    }
  }
  return bytes;
}

TEST(Erase, ConstantEqualsElementByElementInEveryDtypeAndLayout) {
  const Size2 size{13, 9};
  const std::vector<Rect> rects{{0, 0, 13, 9}, {3, 2, 5, 4}, {0, 0, 1, 1}, {12, 8, 1, 1}, {8, 0, 5, 9}, {4, 4, 0, 3}};
  int compared = 0;
  for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kU8, DType::kI32}) {
    const bool u8 = dtype == DType::kU8;
    for (const Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
      for (const int channels : {1, 3, 4}) {
        const std::vector<std::vector<float>> value_sets{
            {0.0f}, {u8 ? 200.0f : -1.75f}, {u8 ? 7.0f : 7.5f, 3.0f, u8 ? 11.0f : -0.25f, 0.0f}};
        for (const auto& all_values : value_sets) {
          const std::vector<float> values(all_values.begin(),
                                          all_values.begin() + (all_values.size() == 1 ? 1 : channels));
          for (const Rect& r : rects) {
            const std::size_t bytes = static_cast<std::size_t>(size.width) * size.height * channels * size_of(dtype);
            std::vector<std::uint8_t> got(bytes);
            for (std::size_t i = 0; i < bytes; ++i) got[i] = static_cast<std::uint8_t>(i * 37 + 11);
            const SlotSample slot{got.data(), dtype, layout, channels, size};
            const auto want = reference(got, slot, r, values);
            erase_constant(slot, r, values);
            ASSERT_EQ(got, want) << "dtype " << static_cast<int>(dtype) << " layout " << static_cast<int>(layout)
                                 << " channels " << channels << " values " << values.size() << " first " << values[0]
                                 << " rect " << r.x << "," << r.y << " " << r.width << "x" << r.height;
            ++compared;
          }
        }
      }
    }
  }
  EXPECT_EQ(compared, 5 * 2 * 3 * 3 * 6);
}

}  // namespace
}  // namespace sluice::stages
