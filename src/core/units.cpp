// Size parsing and formatting shared by the CLI, the JSON spec and error messages.
#include "sluice/core/units.hpp"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <utility>

namespace sluice {

std::optional<std::uint64_t> parse_size(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  std::size_t digits = 0;
  while (digits < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.')) {
    ++digits;
  }
  if (digits == 0) return std::nullopt;
  double value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + digits, value);
  if (ec != std::errc{} || ptr != text.data() + digits || value < 0) return std::nullopt;

  std::string unit;
  for (char c : text.substr(digits)) {
    if (!std::isspace(static_cast<unsigned char>(c))) unit += static_cast<char>(std::tolower(c));
  }
  static constexpr std::array<std::pair<std::string_view, double>, 14> kUnits{{
      {"", 1.0}, {"b", 1.0},
      {"k", 0x1p10}, {"kib", 0x1p10}, {"kb", 1e3},
      {"m", 0x1p20}, {"mib", 0x1p20}, {"mb", 1e6},
      {"g", 0x1p30}, {"gib", 0x1p30}, {"gb", 1e9},
      {"t", 0x1p40}, {"tib", 0x1p40}, {"tb", 1e12},
  }};
  for (const auto& [name, scale] : kUnits) {
    if (unit == name) {
      const double bytes = std::round(value * scale);
      if (bytes > 0x1p63) return std::nullopt;
      return static_cast<std::uint64_t>(bytes);
    }
  }
  return std::nullopt;
}

std::string format_bytes(std::uint64_t bytes) {
  static constexpr std::array<const char*, 5> kNames{"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  std::size_t i = 0;
  while (value >= 1024.0 && i + 1 < kNames.size()) {
    value /= 1024.0;
    ++i;
  }
  char text[32];
  if (i == 0) {
    std::snprintf(text, sizeof text, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(text, sizeof text, "%.2f %s", value, kNames[i]);
  }
  return text;
}

}  // namespace sluice
