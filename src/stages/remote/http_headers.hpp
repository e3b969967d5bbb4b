// The response headers a transfer acts on, parsed from the lines libcurl hands over one at a time
// (a redirect or a 100-continue starts a new response: reset() then). Bytes from the network:
// fuzzed with the listing parser (fuzz/remote_parsers_fuzzer.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::stages::remote {

struct ResponseHeaders {
  std::string etag;                            // as sent, quotes included
  std::optional<std::uint64_t> content_length;
  std::optional<std::uint64_t> range_start;    // Content-Range: bytes START-END/TOTAL
  std::optional<std::uint64_t> total_size;     // TOTAL of Content-Range, when not '*'
  std::optional<double> retry_after_s;         // delta-seconds, or an HTTP date less now

  // One header line ("Name: value\r\n"); a status line ("HTTP/1.1 200 OK") resets.
  void add_line(std::string_view line, std::int64_t now_unix_s);
  void reset() { *this = ResponseHeaders{}; }
};

// Retry-After's value: delta-seconds or an IMF-fixdate; nullopt when it is neither. Capped at an
// hour so a hostile server cannot park a loader for ever (the caller caps it lower).
std::optional<double> parse_retry_after(std::string_view value, std::int64_t now_unix_s);

}  // namespace sluice::stages::remote
