// color_jitter(brightness, contrast, saturation, hue): torchvision's ColorJitter, a pixel op on
// the u8 sample after the resampling (stages/augment/color.hpp). Each option is torchvision's: a
// number b gives the range [max(0, 1 - b), 1 + b] (hue: h gives [-h, h]), or [min, max] itself.
#include <cmath>

#include "pipeline/descriptors/ranges.hpp"
#include "pipeline/stage_json.hpp"
#include "pipeline/stage_registry.hpp"

namespace sluice::schema {

namespace {

using namespace json_fields;
using S = spec::ColorJitter;

// Brightness, contrast and saturation factors are at least 0; this bound only keeps them finite.
constexpr double kMaxFactor = 1e6;

void check(const spec::Stage& stage, const std::string& where) {
  const ColorJitterOptions& o = std::get<S>(stage).options;
  ranges::check(where, "brightness", o.brightness, 0, kMaxFactor);
  ranges::check(where, "contrast", o.contrast, 0, kMaxFactor);
  ranges::check(where, "saturation", o.saturation, 0, kMaxFactor);
  ranges::check(where, "hue", o.hue, -0.5, 0.5);
}

// torchvision's _check_input: a number around `center`, or [min, max] inside [lo, hi].
FactorRange read_range_of(const json& v, const std::string& p, double center, double lo, double hi) {
  if (v.is_number()) {
    const double spread = as_number(v, p, 0, center == 0 ? hi : kMaxFactor, "a non-negative number or [min, max]");
    return FactorRange{std::max(lo, center - spread), center + spread};
  }
  if (!v.is_array() || v.size() != 2) expected(p, "a non-negative number or [min, max]", v);
  const std::string what = "a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  const FactorRange r{as_number(v[0], p + "[0]", lo, hi, what), as_number(v[1], p + "[1]", lo, hi, what)};
  if (r.min > r.max) bad(p + ": expected [min, max] with min <= max, got " + describe(v));
  return r;
}

spec::Stage read(const json& v, const std::string& p) {
  const Object o(v, p, {"brightness", "contrast", "saturation", "hue", "seed"});
  ColorJitterOptions c;
  const auto factor = [](const json& x, const std::string& xp) { return read_range_of(x, xp, 1, 0, kMaxFactor); };
  c.brightness = o.get("brightness", c.brightness, factor);
  c.contrast = o.get("contrast", c.contrast, factor);
  c.saturation = o.get("saturation", c.saturation, factor);
  c.hue = o.get("hue", c.hue, [](const json& x, const std::string& xp) { return read_range_of(x, xp, 0, -0.5, 0.5); });
  c.seed = o.seed();
  return S{c};
}

ordered_json write(const spec::Stage& stage) {
  const ColorJitterOptions& c = std::get<S>(stage).options;
  const auto pair = [](const FactorRange& r) { return ordered_json::array({r.min, r.max}); };
  ordered_json j{{"brightness", pair(c.brightness)}, {"contrast", pair(c.contrast)},
                 {"saturation", pair(c.saturation)}, {"hue", pair(c.hue)}};
  write_seed(j, c.seed);
  return j;
}

const StageJson kJson{read, write};

}  // namespace

template <>
const StageDescriptor& descriptor_for<S>() {
  static const StageDescriptor d{.name = "color_jitter", .order = kImageOpOrder, .check = check, .json = &kJson};
  return d;
}

}  // namespace sluice::schema
