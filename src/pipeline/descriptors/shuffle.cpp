// shuffle(buffer): a seeded shuffle buffer over each epoch's order (stages/source/epoch_order.cpp).
#include "pipeline/stage_json.hpp"
#include "pipeline/stage_registry.hpp"

namespace sluice::schema {

namespace {

using namespace json_fields;

void check(const spec::Stage& stage, const std::string& where) {
  const auto& s = std::get<spec::Shuffle>(stage);
  if (s.buffer < 1) refuse(where + ": buffer must be >= 1, got " + std::to_string(s.buffer));
}

spec::Stage read(const json& v, const std::string& p) {
  const Object o(v, p, {"buffer", "seed"});
  return spec::Shuffle{o.require<std::int64_t>("buffer", "a positive integer",
                                               [](const json& x, const std::string& xp) {
                                                 return as_integer(x, xp, 1, INT64_MAX, "a positive integer");
                                               }),
                       ShuffleOptions{o.seed()}};
}

ordered_json write(const spec::Stage& stage) {
  const auto& s = std::get<spec::Shuffle>(stage);
  ordered_json j{{"buffer", s.buffer}};
  write_seed(j, s.options.seed);
  return j;
}

const StageJson kJson{read, write};

}  // namespace

template <>
const StageDescriptor& descriptor_for<spec::Shuffle>() {
  static const StageDescriptor d{
      // Anywhere before batch(): it reorders samples, which per-sample stages do not see.
      .name = "shuffle",
      .order = {.allowed = Phases::all_but(Phase::kBatched),
                .once = true,
                .misplaced = "shuffle() must come before batch(): it reorders samples"},
      .check = check,
      .json = &kJson,
  };
  return d;
}

}  // namespace sluice::schema
