// Response header lines: ETag, Content-Length, Content-Range, Retry-After.
#include "stages/remote/http_headers.hpp"

#include <charconv>
#include <ctime>
#include <string>

namespace sluice::stages::remote {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

std::optional<std::uint64_t> number(std::string_view s) {
  std::uint64_t v = 0;
  if (s.empty() || s.size() > 19) return std::nullopt;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

}  // namespace

std::optional<double> parse_retry_after(std::string_view value, std::int64_t now_unix_s) {
  constexpr double kMaxSeconds = 3600;
  value = trim(value);
  if (const std::optional<std::uint64_t> s = number(value)) return std::min(static_cast<double>(*s), kMaxSeconds);
  if (value.size() > 64) return std::nullopt;
  std::tm tm{};
  const std::string text(value);
  const char* end = ::strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  const std::int64_t at = ::timegm(&tm);
  if (at <= now_unix_s) return 0.0;
  return std::min(static_cast<double>(at - now_unix_s), kMaxSeconds);
}

void ResponseHeaders::add_line(std::string_view line, std::int64_t now_unix_s) {
  if (line.starts_with("HTTP/")) {
    reset();
    return;
  }
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos) return;
  const std::string_view name = trim(line.substr(0, colon));
  const std::string_view value = trim(line.substr(colon + 1));
  if (iequals(name, "etag")) {
    etag = std::string(value.substr(0, 1024));
  } else if (iequals(name, "content-length")) {
    content_length = number(value);
  } else if (iequals(name, "retry-after")) {
    retry_after_s = parse_retry_after(value, now_unix_s);
  } else if (iequals(name, "content-range") && value.starts_with("bytes ")) {
    const std::string_view spec = value.substr(6);
    const std::size_t dash = spec.find('-');
    const std::size_t slash = spec.find('/');
    if (dash == std::string_view::npos || slash == std::string_view::npos || dash > slash) return;
    range_start = number(spec.substr(0, dash));
    total_size = number(spec.substr(slash + 1));
  }
}

}  // namespace sluice::stages::remote
