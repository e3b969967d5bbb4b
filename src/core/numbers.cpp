// Checked parsing of integers written by people (numbers.hpp).
#include "sluice/detail/core/numbers.hpp"

#include <charconv>
#include <thread>

namespace sluice::core {

namespace {

std::string quoted(std::string_view text) {
  std::string out = "\"";
  out.append(text.substr(0, 40));
  if (text.size() > 40) out += "...";
  return out + "\"";
}

}  // namespace

std::optional<std::int64_t> parse_int(std::string_view text, std::int64_t min, std::int64_t max) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty() || (text.front() != '-' && (text.front() < '0' || text.front() > '9'))) return std::nullopt;
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  if (value < min || value > max) return std::nullopt;
  return value;
}

std::optional<std::uint64_t> parse_uint(std::string_view text, std::uint64_t max) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty() || text.front() < '0' || text.front() > '9') return std::nullopt;  // no sign to wrap
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value > max) return std::nullopt;
  return value;
}

std::string integer_range_message(std::string_view what, std::string_view text, std::int64_t min, std::int64_t max) {
  return std::string(what) + ": expected an integer from " + std::to_string(min) + " to " + std::to_string(max) +
         ", got " + quoted(text);
}

std::string uint_range_message(std::string_view what, std::string_view text, std::uint64_t max) {
  return std::string(what) + ": expected an integer from 0 to " + std::to_string(max) + ", got " + quoted(text);
}

int max_threads() {
  const unsigned hardware = std::thread::hardware_concurrency();
  const long four = 4L * static_cast<long>(hardware == 0 ? 1 : hardware);
  return static_cast<int>(four > 1024 ? four : 1024);
}

}  // namespace sluice::core
