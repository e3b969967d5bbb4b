// Element types and memory layouts of the tensors sluice hands out, with their sizes and names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace sluice {

enum class DType : std::uint8_t { kU8, kI32, kF16, kBF16, kF32 };

constexpr std::size_t size_of(DType t) {
  switch (t) {
    case DType::kU8: return 1;
    case DType::kF16:
    case DType::kBF16: return 2;
    case DType::kI32:
    case DType::kF32: return 4;
  }
  return 0;
}

std::string_view to_string(DType t);
// Accepts "u8", "i32", "f16", "bf16", "f32" (case-insensitive).
std::optional<DType> parse_dtype(std::string_view name);

// Layout of an image batch: NHWC keeps a pixel's channels together (what decoders produce), NCHW
// keeps each channel plane together (what most training frameworks consume).
enum class Layout : std::uint8_t { kNHWC, kNCHW };

std::string_view to_string(Layout l);

}  // namespace sluice
