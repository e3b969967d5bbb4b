// The one parser of numbers written by people (command-line flags; JSON specs and Python check
// the same ranges with the same bounds): a whole decimal integer within a stated range, or a
// message that says the range. "-1", "18446744073709551616" and "1e23" are refused for a seed
// instead of wrapping to 2^64 - 1; "2147483647" is refused for a padding whose sums would wrap.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::core {

// A whole decimal integer: an optional '-' (or '+'), digits, nothing else (no spaces, no
// exponent, no hex). nullopt when the text is not one or is outside [min, max].
std::optional<std::int64_t> parse_int(std::string_view text, std::int64_t min, std::int64_t max);
std::optional<std::uint64_t> parse_uint(std::string_view text, std::uint64_t max);

// "<what>: expected an integer from <min> to <max>, got \"<text>\"" (the text cut to 40
// characters), for the caller's error.
std::string integer_range_message(std::string_view what, std::string_view text, std::int64_t min, std::int64_t max);
std::string uint_range_message(std::string_view what, std::string_view text, std::uint64_t max);

// The most worker threads a pipeline or the training loop may ask for: 4 x the hardware threads,
// and at least 1,024. Far past it the process runs out of stacks and thread-local arenas
// (100,000 crashed inside the allocator).
int max_threads();

// Sizes a pipeline's geometry may take (an output side, a padding, a crop): every sum of two and
// product with a channel count stays far inside 32 and 64 bits.
inline constexpr std::int64_t kMaxImageSide = 1 << 20;

}  // namespace sluice::core
