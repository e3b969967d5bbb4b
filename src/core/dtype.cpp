// Names of element types and layouts, for messages, the CLI and the JSON spec.
#include "sluice/core/dtype.hpp"

#include <algorithm>
#include <cctype>
#include <string>

namespace sluice {

std::string_view to_string(DType t) {
  switch (t) {
    case DType::kU8: return "u8";
    case DType::kI32: return "i32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kF32: return "f32";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (DType t : {DType::kU8, DType::kI32, DType::kF16, DType::kBF16, DType::kF32}) {
    if (lower == to_string(t)) return t;
  }
  return std::nullopt;
}

std::string_view to_string(Layout l) { return l == Layout::kNHWC ? "NHWC" : "NCHW"; }

}  // namespace sluice
