// CheckpointPolicy: parsing, printing and segment lengths (the recomputation is Sequential's).
#include "sluice/train/gradient_checkpointing.hpp"

#include <charconv>
#include <cmath>

#include "sluice/core/error.hpp"

namespace sluice::train {
namespace {

[[noreturn]] void bad_policy(std::string_view text, const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument, "checkpoint policy \"" + std::string(text) + "\": " + why +
                                               " (expected none, sqrt or every:K with K >= 1 layers per segment)");
}

}  // namespace

CheckpointPolicy CheckpointPolicy::every_layers(int k) {
  if (k < 1) {
    throw Error(ErrorCode::kInvalidArgument,
                "checkpoint policy every:" + std::to_string(k) + ": a segment needs at least 1 layer");
  }
  return {Kind::kEvery, k};
}

CheckpointPolicy CheckpointPolicy::parse(std::string_view text) {
  if (text == "none") return none();
  if (text == "sqrt") return sqrt();
  constexpr std::string_view prefix = "every:";
  if (text.substr(0, prefix.size()) != prefix) bad_policy(text, "unknown policy");
  const std::string_view number = text.substr(prefix.size());
  if (number.empty()) bad_policy(text, "K is missing");
  long long k = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), k);
  if (ec == std::errc::result_out_of_range) bad_policy(text, "K is too large");
  if (ec != std::errc() || end != number.data() + number.size()) bad_policy(text, "K is not an integer");
  if (k < 1) bad_policy(text, "K must be >= 1");
  if (k > 1'000'000) bad_policy(text, "K is too large");
  return every_layers(static_cast<int>(k));
}

std::size_t CheckpointPolicy::segment_length(std::size_t layers) const {
  switch (kind) {
    case Kind::kNone: return 0;
    case Kind::kSqrt: {
      std::size_t s = static_cast<std::size_t>(std::ceil(std::sqrt(static_cast<double>(layers))));
      while (s * s < layers) ++s;  // exact for any size, whatever sqrt rounds to
      while (s > 1 && (s - 1) * (s - 1) >= layers) --s;
      return s < 1 ? 1 : s;
    }
    case Kind::kEvery: return static_cast<std::size_t>(every);
  }
  return 0;
}

std::string CheckpointPolicy::to_string() const {
  switch (kind) {
    case Kind::kNone: return "none";
    case Kind::kSqrt: return "sqrt";
    case Kind::kEvery: return "every:" + std::to_string(every);
  }
  return "none";
}

}  // namespace sluice::train
