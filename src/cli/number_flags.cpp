// CLI11 validators over core::parse_int / parse_uint (number_flags.hpp). CLI11 puts the flag's
// name in front: "--seed: expected an integer from 0 to 18446744073709551615, got \"-1\"".
#include "cli/number_flags.hpp"

#include <string>

#include "sluice/detail/core/numbers.hpp"

namespace sluice::cli {

namespace {

std::string shown(const std::string& text) {
  return "\"" + text.substr(0, 40) + (text.size() > 40 ? "...\"" : "\"");
}

}  // namespace

CLI::Validator integer_in(std::int64_t min, std::int64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        if (core::parse_int(text, min, max)) return {};
        return "expected an integer from " + std::to_string(min) + " to " + std::to_string(max) + ", got " + shown(text);
      },
      "INT in [" + std::to_string(min) + " - " + std::to_string(max) + "]");
}

CLI::Validator unsigned_up_to(std::uint64_t max) {
  return CLI::Validator(
      [max](std::string& text) -> std::string {
        if (core::parse_uint(text, max)) return {};
        return "expected an integer from 0 to " + std::to_string(max) + ", got " + shown(text);
      },
      "UINT in [0 - " + std::to_string(max) + "]");
}

CLI::Validator thread_count(bool allow_auto) {
  return CLI::Validator(
      [allow_auto](std::string& text) -> std::string {
        if (allow_auto && text == "auto") return {};
        const int bound = core::max_threads();
        if (core::parse_int(text, 1, bound)) return {};
        return "expected an integer from 1 to " + std::to_string(bound) +
               " (4 x the hardware threads, at least 1024)" + (allow_auto ? " or auto" : "") + ", got " +
               shown(text);
      },
      allow_auto ? "INT or auto" : "INT");
}

}  // namespace sluice::cli
