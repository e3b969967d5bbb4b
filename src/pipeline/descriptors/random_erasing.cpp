// random_erasing(probability, scale, ratio, value): torchvision's RandomErasing on the normalised
// sample in its batch slot, after normalize() as torchvision's follows Normalize
// (stages/augment/erase.hpp). value: a number, one number per channel, or "random".
#include <cmath>

#include "pipeline/descriptors/ranges.hpp"
#include "pipeline/stage_json.hpp"
#include "pipeline/stage_registry.hpp"

namespace sluice::schema {

namespace {

using namespace json_fields;
using S = spec::RandomErasing;

void check(const spec::Stage& stage, const std::string& where) {
  const RandomErasingOptions& o = std::get<S>(stage).options;
  if (!(o.probability >= 0 && o.probability <= 1)) {
    refuse(where + ": probability must be in [0, 1], got " + std::to_string(o.probability));
  }
  ranges::check(where, "scale", o.scale, 0, 1);
  ranges::check_positive(where, "ratio", o.ratio);
  for (const float v : o.value) {
    if (!std::isfinite(v)) refuse(where + ": value must be finite, got " + std::to_string(v));
  }
}

FactorRange read_scale(const json& v, const std::string& p) {
  const std::string what = "a number in [0, 1]";
  if (!v.is_array() || v.size() != 2) expected(p, "[min, max]", v);
  const FactorRange r{as_number(v[0], p + "[0]", 0, 1, what), as_number(v[1], p + "[1]", 0, 1, what)};
  if (r.min > r.max) bad(p + ": expected [min, max] with min <= max, got " + describe(v));
  return r;
}

std::vector<float> read_value(const json& v, const std::string& p) {
  if (v.is_string()) {
    if (v.get<std::string>() == "random") return {};
    expected(p, "a number, a list of numbers or \"random\"", v);
  }
  if (v.is_number()) return {static_cast<float>(as_number(v, p, -1e30, 1e30, "a finite number"))};
  if (!v.is_array() || v.empty()) expected(p, "a number, a list of numbers or \"random\"", v);
  return read_floats(v, p, Sign::kAny);
}

spec::Stage read(const json& v, const std::string& p) {
  const Object o(v, p, {"probability", "scale", "ratio", "value", "seed"});
  RandomErasingOptions r;
  r.probability = o.get("probability", r.probability, [](const json& x, const std::string& xp) {
    return as_number(x, xp, 0, 1, "a number in [0, 1]");
  });
  r.scale = o.get("scale", r.scale, read_scale);
  r.ratio = o.get("ratio", r.ratio, [](const json& x, const std::string& xp) {
    const auto [lo, hi] = read_range(x, xp);
    return FactorRange{lo, hi};
  });
  r.value = o.get("value", r.value, read_value);
  r.seed = o.seed();
  return S{r};
}

ordered_json write(const spec::Stage& stage) {
  const RandomErasingOptions& r = std::get<S>(stage).options;
  ordered_json j{{"probability", r.probability},
                 {"scale", ordered_json::array({r.scale.min, r.scale.max})},
                 {"ratio", ordered_json::array({r.ratio.min, r.ratio.max})}};
  if (r.value.empty()) {
    j["value"] = "random";
  } else {
    j["value"] = r.value;
  }
  write_seed(j, r.seed);
  return j;
}

const StageJson kJson{read, write};

}  // namespace

template <>
const StageDescriptor& descriptor_for<S>() {
  static const StageDescriptor d{
      .name = "random_erasing",
      .order = {.allowed = {Phase::kNormalized},
                .misplaced = "random_erasing() must follow normalize(): it erases the normalised sample, as "
                             "torchvision's RandomErasing follows Normalize"},
      .check = check,
      .json = &kJson,
  };
  return d;
}

}  // namespace sluice::schema
