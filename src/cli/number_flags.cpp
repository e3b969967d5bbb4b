// CLI11 validators over core::parse_int / parse_uint (number_flags.hpp).
#include "cli/number_flags.hpp"

#include <string>

#include "core/numbers.hpp"

namespace sluice::cli {

CLI::Validator integer_in(std::int64_t min, std::int64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        if (core::parse_int(text, min, max)) return {};
        return core::integer_range_message("value", text, min, max);
      },
      "INT in [" + std::to_string(min) + " - " + std::to_string(max) + "]");
}

CLI::Validator unsigned_up_to(std::uint64_t max) {
  return CLI::Validator(
      [max](std::string& text) -> std::string {
        if (core::parse_uint(text, max)) return {};
        return core::uint_range_message("value", text, max);
      },
      "UINT in [0 - " + std::to_string(max) + "]");
}

CLI::Validator thread_count(bool allow_auto) {
  return CLI::Validator(
      [allow_auto](std::string& text) -> std::string {
        if (allow_auto && text == "auto") return {};
        const int bound = core::max_threads();
        if (core::parse_int(text, 1, bound)) return {};
        return core::integer_range_message("threads", text, 1, bound) +
               " (at most 4 x the hardware threads, and at least 1024 may be asked for)" +
               (allow_auto ? ", or auto" : "");
      },
      allow_auto ? "INT or auto" : "INT");
}

}  // namespace sluice::cli
