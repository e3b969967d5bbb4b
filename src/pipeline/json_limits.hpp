// Bounds on JSON pipeline specs: what a spec from elsewhere may cost to parse and to
// report. Checked on the text before nlohmann-json sees it (a single pass, no allocation), so a
// hostile or broken spec fails with a short message instead of exhausting the stack or memory,
// and messages quote a bounded prefix of a bad value instead of serialising it whole.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace sluice::json_limits {

inline constexpr std::size_t kMaxSpecBytes = std::size_t{256} << 20;  // an items list of ~3M paths
inline constexpr int kMaxDepth = 64;                                  // specs nest 4 levels deep
inline constexpr std::size_t kMaxStringBytes = std::size_t{64} << 10; // paths are <= 4096 bytes

// Throws sluice::Error(kInvalidArgument) "spec: ..." naming the limit and the byte offset where
// the text exceeds it. Strings and escapes are followed, so brackets inside strings do not count.
void check_text(std::string_view text);

// At most `max_chars` characters of the value's JSON text and "..." when cut, never inside a
// UTF-8 sequence (messages reach Python, which decodes strictly); only what is shown is
// serialised.
std::string describe(const nlohmann::json& value, std::size_t max_chars = 60);

// A text cut the same way (a parser message quoting a long token).
std::string clip(std::string text, std::size_t max_chars);

// A string (an object key) quoted for a message, cut the same way.
std::string quote(const std::string& text, std::size_t max_chars = 60);

}  // namespace sluice::json_limits
