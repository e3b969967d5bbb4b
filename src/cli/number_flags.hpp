// Checks of the numeric flags every command shares, through the one number parser
// (core/numbers.hpp): a whole decimal integer inside a stated range, or a message that names the
// range. CLI11's own conversion would wrap "-1" into 2^64 - 1 for an unsigned flag and accept a
// padding whose sums overflow an int.
#pragma once

#include <cstdint>

#include <CLI/CLI.hpp>

namespace sluice::cli {

// A whole integer from min to max.
CLI::Validator integer_in(std::int64_t min, std::int64_t max);
// A whole non-negative integer up to max (seeds: up to 2^64 - 1).
CLI::Validator unsigned_up_to(std::uint64_t max);
// A worker-thread count: 1 to core::max_threads(), or "auto" when `allow_auto`.
CLI::Validator thread_count(bool allow_auto);

}  // namespace sluice::cli
