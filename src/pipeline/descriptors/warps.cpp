// random_rotation(degrees) and random_affine(degrees, translate, scale, shear): torchvision's
// RandomRotation (expand=False) and RandomAffine, pixel ops on the u8 sample after the resampling
// with Pillow's warp (stages/augment/affine.hpp); "interpolation" nearest (torchvision's
// default) or bilinear, "fill" a grey level or one per channel, "center" [x, y] in pixels.
#include <cmath>

#include "pipeline/descriptors/ranges.hpp"
#include "pipeline/stage_json.hpp"
#include "pipeline/stage_registry.hpp"

namespace sluice::schema {

namespace {

using namespace json_fields;

constexpr double kMaxDegrees = 1e6;

void check_warp(const std::string& where, const WarpOptions& w) {
  if (w.fill.size() > 1 && w.fill.size() != 3) {
    refuse(where + ": fill must be one grey level or one per channel (3), got " + std::to_string(w.fill.size()) +
           " values");
  }
}

void check_center(const std::string& where, const std::optional<double>& x, const std::optional<double>& y) {
  if (x.has_value() != y.has_value() || (x && !(std::isfinite(*x) && std::isfinite(*y)))) {
    refuse(where + ": center must be two finite numbers [x, y]");
  }
}

void read_center(const Object& o, std::optional<double>& x, std::optional<double>& y) {
  const json* v = o.find("center");
  if (v == nullptr) return;
  const std::string p = o.path("center");
  if (!v->is_array() || v->size() != 2) expected(p, "[x, y] in pixels", *v);
  x = as_number((*v)[0], p + "[0]", -1e9, 1e9, "a number");
  y = as_number((*v)[1], p + "[1]", -1e9, 1e9, "a number");
}

void write_center(ordered_json& j, const std::optional<double>& x, const std::optional<double>& y) {
  if (x && y) j["center"] = ordered_json::array({*x, *y});
}

FactorRange read_degrees(const Object& o) {
  return o.require<FactorRange>("degrees", "a number or [min, max]", [](const json& x, const std::string& xp) {
    return read_number_range(x, xp, -kMaxDegrees, kMaxDegrees, Single::kSymmetric);
  });
}

void check_rotation(const spec::Stage& stage, const std::string& where) {
  const auto& s = std::get<spec::RandomRotation>(stage);
  ranges::check(where, "degrees", s.degrees, -kMaxDegrees, kMaxDegrees);
  check_center(where, s.options.center_x, s.options.center_y);
  check_warp(where, s.options.warp);
}

spec::Stage read_rotation(const json& v, const std::string& p) {
  const Object o(v, p, {"degrees", "center", "interpolation", "fill", "seed"});
  spec::RandomRotation s{read_degrees(o), {}};
  read_center(o, s.options.center_x, s.options.center_y);
  s.options.warp = read_warp(o);
  return s;
}

ordered_json write_rotation(const spec::Stage& stage) {
  const auto& s = std::get<spec::RandomRotation>(stage);
  ordered_json j{{"degrees", write_range(s.degrees)}};
  write_center(j, s.options.center_x, s.options.center_y);
  write_warp(j, s.options.warp);
  return j;
}

void check_affine(const spec::Stage& stage, const std::string& where) {
  const auto& s = std::get<spec::RandomAffine>(stage);
  const RandomAffineOptions& o = s.options;
  ranges::check(where, "degrees", s.degrees, -kMaxDegrees, kMaxDegrees);
  if (!(o.translate_x >= 0 && o.translate_x <= 1 && o.translate_y >= 0 && o.translate_y <= 1)) {
    refuse(where + ": translate must be two fractions in [0, 1], got [" + std::to_string(o.translate_x) + ", " +
           std::to_string(o.translate_y) + "]");
  }
  ranges::check_positive(where, "scale", o.scale);
  ranges::check(where, "shear_x", o.shear_x, -kMaxDegrees, kMaxDegrees);
  ranges::check(where, "shear_y", o.shear_y, -kMaxDegrees, kMaxDegrees);
  check_center(where, o.center_x, o.center_y);
  check_warp(where, o.warp);
}

// torchvision's shear: a number s (x in [-s, s]), [a, b] (x), or [a, b, c, d] (x, then y).
void read_shear(const Object& o, RandomAffineOptions& a) {
  const json* v = o.find("shear");
  if (v == nullptr) return;
  const std::string p = o.path("shear");
  if (v->is_number()) {
    a.shear_x = read_number_range(*v, p, -kMaxDegrees, kMaxDegrees, Single::kSymmetric);
    return;
  }
  if (!v->is_array() || (v->size() != 2 && v->size() != 4)) expected(p, "a number, [min, max] or [x_min, x_max, y_min, y_max]", *v);
  a.shear_x = read_number_range(json::array({(*v)[0], (*v)[1]}), p, -kMaxDegrees, kMaxDegrees, Single::kSymmetric);
  if (v->size() == 4) {
    a.shear_y = read_number_range(json::array({(*v)[2], (*v)[3]}), p, -kMaxDegrees, kMaxDegrees, Single::kSymmetric);
  }
}

spec::Stage read_affine(const json& v, const std::string& p) {
  const Object o(v, p, {"degrees", "translate", "scale", "shear", "center", "interpolation", "fill", "seed"});
  spec::RandomAffine s{read_degrees(o), {}};
  RandomAffineOptions& a = s.options;
  if (const json* t = o.find("translate")) {
    const std::string tp = o.path("translate");
    if (!t->is_array() || t->size() != 2) expected(tp, "[a, b], fractions of the width and height", *t);
    a.translate_x = as_number((*t)[0], tp + "[0]", 0, 1, "a number in [0, 1]");
    a.translate_y = as_number((*t)[1], tp + "[1]", 0, 1, "a number in [0, 1]");
  }
  if (const json* sc = o.find("scale")) {
    const auto [lo, hi] = read_range(*sc, o.path("scale"));
    a.scale = FactorRange{lo, hi};
  }
  read_shear(o, a);
  read_center(o, a.center_x, a.center_y);
  a.warp = read_warp(o);
  return s;
}

ordered_json write_affine(const spec::Stage& stage) {
  const auto& s = std::get<spec::RandomAffine>(stage);
  const RandomAffineOptions& a = s.options;
  ordered_json j{{"degrees", write_range(s.degrees)},
                 {"translate", ordered_json::array({a.translate_x, a.translate_y})},
                 {"scale", write_range(a.scale)},
                 {"shear", ordered_json::array({a.shear_x.min, a.shear_x.max, a.shear_y.min, a.shear_y.max})}};
  write_center(j, a.center_x, a.center_y);
  write_warp(j, a.warp);
  return j;
}

const StageJson kRotationJson{read_rotation, write_rotation};
const StageJson kAffineJson{read_affine, write_affine};

}  // namespace

template <>
const StageDescriptor& descriptor_for<spec::RandomRotation>() {
  static const StageDescriptor d{
      .name = "random_rotation", .order = kImageOpOrder, .check = check_rotation, .json = &kRotationJson};
  return d;
}

template <>
const StageDescriptor& descriptor_for<spec::RandomAffine>() {
  static const StageDescriptor d{.name = "random_affine", .order = kImageOpOrder, .check = check_affine, .json = &kAffineJson};
  return d;
}

}  // namespace sluice::schema
