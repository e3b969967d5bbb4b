// The random point ops, torchvision's RandomPosterize(bits, p), RandomSolarize(threshold, p),
// RandomInvert(p), RandomAutocontrast(p), RandomEqualize(p), RandomAdjustSharpness(factor, p):
// pixel ops on the u8 sample after the resampling, each applied with its probability
// (stages/augment/point_ops.hpp).
#include <cmath>

#include "pipeline/stage_json.hpp"
#include "pipeline/stage_registry.hpp"

namespace sluice::schema {

namespace {

using namespace json_fields;

void check_probability(const std::string& where, double p) {
  if (!(p >= 0 && p <= 1)) refuse(where + ": probability must be in [0, 1], got " + std::to_string(p));
}

double read_probability(const Object& o) {
  return o.get("probability", 0.5, [](const json& x, const std::string& xp) {
    return as_number(x, xp, 0, 1, "a number in [0, 1]");
  });
}

ordered_json probability_json(double probability, const std::optional<std::uint64_t>& seed) {
  ordered_json j{{"probability", probability}};
  write_seed(j, seed);
  return j;
}

// The three that take a probability only.
template <class S>
void check_plain(const spec::Stage& stage, const std::string& where) {
  check_probability(where, std::get<S>(stage).probability);
}
template <class S>
spec::Stage read_plain(const json& v, const std::string& p) {
  const Object o(v, p, {"probability", "seed"});
  return S{read_probability(o), RandomOptions{o.seed()}};
}
template <class S>
ordered_json write_plain(const spec::Stage& stage) {
  const auto& s = std::get<S>(stage);
  return probability_json(s.probability, s.options.seed);
}

void check_posterize(const spec::Stage& stage, const std::string& where) {
  const auto& s = std::get<spec::RandomPosterize>(stage);
  if (s.bits < 0 || s.bits > 8) refuse(where + ": bits must be from 0 to 8, got " + std::to_string(s.bits));
  check_probability(where, s.probability);
}
spec::Stage read_posterize(const json& v, const std::string& p) {
  const Object o(v, p, {"bits", "probability", "seed"});
  const int bits = o.require<int>("bits", "an integer from 0 to 8", [](const json& x, const std::string& xp) {
    return static_cast<int>(as_integer(x, xp, 0, 8, "an integer from 0 to 8"));
  });
  return spec::RandomPosterize{bits, read_probability(o), RandomOptions{o.seed()}};
}
ordered_json write_posterize(const spec::Stage& stage) {
  const auto& s = std::get<spec::RandomPosterize>(stage);
  ordered_json j{{"bits", s.bits}};
  j.update(probability_json(s.probability, s.options.seed));
  return j;
}

void check_solarize(const spec::Stage& stage, const std::string& where) {
  const auto& s = std::get<spec::RandomSolarize>(stage);
  if (!std::isfinite(s.threshold)) refuse(where + ": threshold must be finite, got " + std::to_string(s.threshold));
  check_probability(where, s.probability);
}
spec::Stage read_solarize(const json& v, const std::string& p) {
  const Object o(v, p, {"threshold", "probability", "seed"});
  const double threshold = o.require<double>("threshold", "a number", [](const json& x, const std::string& xp) {
    return as_number(x, xp, -1e9, 1e9, "a number");
  });
  return spec::RandomSolarize{threshold, read_probability(o), RandomOptions{o.seed()}};
}
ordered_json write_solarize(const spec::Stage& stage) {
  const auto& s = std::get<spec::RandomSolarize>(stage);
  ordered_json j{{"threshold", s.threshold}};
  j.update(probability_json(s.probability, s.options.seed));
  return j;
}

void check_sharpness(const spec::Stage& stage, const std::string& where) {
  const auto& s = std::get<spec::RandomAdjustSharpness>(stage);
  if (!(s.sharpness_factor >= 0 && std::isfinite(s.sharpness_factor))) {
    refuse(where + ": sharpness_factor must be a finite number >= 0, got " + std::to_string(s.sharpness_factor));
  }
  check_probability(where, s.probability);
}
spec::Stage read_sharpness(const json& v, const std::string& p) {
  const Object o(v, p, {"sharpness_factor", "probability", "seed"});
  const double factor = o.require<double>("sharpness_factor", "a number >= 0", [](const json& x, const std::string& xp) {
    return as_number(x, xp, 0, 1e6, "a number >= 0");
  });
  return spec::RandomAdjustSharpness{factor, read_probability(o), RandomOptions{o.seed()}};
}
ordered_json write_sharpness(const spec::Stage& stage) {
  const auto& s = std::get<spec::RandomAdjustSharpness>(stage);
  ordered_json j{{"sharpness_factor", s.sharpness_factor}};
  j.update(probability_json(s.probability, s.options.seed));
  return j;
}

const StageJson kPosterizeJson{read_posterize, write_posterize};
const StageJson kSolarizeJson{read_solarize, write_solarize};
const StageJson kInvertJson{read_plain<spec::RandomInvert>, write_plain<spec::RandomInvert>};
const StageJson kAutocontrastJson{read_plain<spec::RandomAutocontrast>, write_plain<spec::RandomAutocontrast>};
const StageJson kEqualizeJson{read_plain<spec::RandomEqualize>, write_plain<spec::RandomEqualize>};
const StageJson kSharpnessJson{read_sharpness, write_sharpness};

}  // namespace

template <>
const StageDescriptor& descriptor_for<spec::RandomPosterize>() {
  static const StageDescriptor d{
      .name = "random_posterize", .order = kImageOpOrder, .check = check_posterize, .json = &kPosterizeJson};
  return d;
}

template <>
const StageDescriptor& descriptor_for<spec::RandomSolarize>() {
  static const StageDescriptor d{
      .name = "random_solarize", .order = kImageOpOrder, .check = check_solarize, .json = &kSolarizeJson};
  return d;
}

template <>
const StageDescriptor& descriptor_for<spec::RandomInvert>() {
  static const StageDescriptor d{
      .name = "random_invert", .order = kImageOpOrder, .check = check_plain<spec::RandomInvert>, .json = &kInvertJson};
  return d;
}

template <>
const StageDescriptor& descriptor_for<spec::RandomAutocontrast>() {
  static const StageDescriptor d{.name = "random_autocontrast",
                                 .order = kImageOpOrder,
                                 .check = check_plain<spec::RandomAutocontrast>,
                                 .json = &kAutocontrastJson};
  return d;
}

template <>
const StageDescriptor& descriptor_for<spec::RandomEqualize>() {
  static const StageDescriptor d{.name = "random_equalize",
                                 .order = kImageOpOrder,
                                 .check = check_plain<spec::RandomEqualize>,
                                 .json = &kEqualizeJson};
  return d;
}

template <>
const StageDescriptor& descriptor_for<spec::RandomAdjustSharpness>() {
  static const StageDescriptor d{
      .name = "random_adjust_sharpness", .order = kImageOpOrder, .check = check_sharpness, .json = &kSharpnessJson};
  return d;
}

}  // namespace sluice::schema
