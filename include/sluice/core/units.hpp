// Byte-size literals (4_GiB), parsing of sizes written by people ("512MiB", "1.5GB", "4096"),
// and formatting for messages.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sluice {

inline namespace literals {
constexpr std::uint64_t operator""_KiB(unsigned long long n) { return n << 10; }
constexpr std::uint64_t operator""_MiB(unsigned long long n) { return n << 20; }
constexpr std::uint64_t operator""_GiB(unsigned long long n) { return n << 30; }
}  // namespace literals

// Accepts an integer or decimal followed by an optional unit: B, K/KiB, M/MiB, G/GiB, T/TiB
// (powers of 1024) or KB, MB, GB, TB (powers of 1000). Case-insensitive; no unit means bytes.
std::optional<std::uint64_t> parse_size(std::string_view text);

// "1.50 GiB", "512.0 KiB", "17 B".
std::string format_bytes(std::uint64_t bytes);

}  // namespace sluice
