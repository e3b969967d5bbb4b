// The JSON field readers and writers (stage_json.hpp).
#include "pipeline/stage_json.hpp"

#include <cctype>
#include <climits>
#include <cmath>
#include <limits>

#include "pipeline/json_limits.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"

namespace sluice::json_fields {

void bad(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

// What a bad value was, short enough for one line of a message: only that much is serialised
// (json_limits.hpp), however large the value.
std::string describe(const json& value) { return json_limits::describe(value); }

void expected(const std::string& path, const std::string& what, const json& got) {
  bad(path + ": expected " + what + ", got " + describe(got));
}

std::string join(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& n : names) text += (text.empty() ? "" : ", ") + n;
  return text;
}

std::int64_t as_integer(const json& v, const std::string& path, std::int64_t min, std::int64_t max,
                        const std::string& what) {
  if (v.is_number_unsigned()) {  // nlohmann reads every non-negative integer as unsigned
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(max) || static_cast<std::int64_t>(u) < min) expected(path, what, v);
    return static_cast<std::int64_t>(u);
  }
  if (!v.is_number_integer()) expected(path, what, v);
  const auto i = v.get<std::int64_t>();
  if (i < min || i > max) expected(path, what, v);
  return i;
}

int as_positive_int(const json& v, const std::string& path) {
  return static_cast<int>(as_integer(v, path, 1, INT_MAX, "a positive integer"));
}

std::uint64_t as_seed(const json& v, const std::string& path) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0) return static_cast<std::uint64_t>(v.get<std::int64_t>());
  expected(path, "a non-negative integer", v);
}

double as_number(const json& v, const std::string& path, double min, double max, const std::string& what) {
  if (!v.is_number()) expected(path, what, v);
  const double d = v.get<double>();
  if (!(d >= min && d <= max)) expected(path, what, v);
  return d;
}

bool as_bool(const json& v, const std::string& path) {
  if (!v.is_boolean()) expected(path, "true or false", v);
  return v.get<bool>();
}

std::string as_string(const json& v, const std::string& path) {
  if (!v.is_string() || v.get_ref<const std::string&>().empty()) expected(path, "a non-empty string", v);
  return v.get<std::string>();
}

std::uint64_t as_size(const json& v, const std::string& path) {
  constexpr const char* kWhat = "a size (a non-negative integer of bytes or a string like \"4GiB\")";
  if (v.is_string()) {
    if (const auto bytes = parse_size(v.get<std::string>())) return *bytes;
    expected(path, kWhat, v);
  }
  return static_cast<std::uint64_t>(as_integer(v, path, 0, INT64_MAX, kWhat));
}



DeviceId as_device(const json& v, const std::string& path) {
  constexpr const char* kWhat = "\"host\" or \"cuda:N\"";
  if (!v.is_string()) expected(path, kWhat, v);
  const std::string s = v.get<std::string>();
  if (s == "host") return host();
  if (s == "cuda") return cuda(0);
  if (s.rfind("cuda:", 0) == 0 && s.size() > 5 && s.size() < 15 &&
      std::all_of(s.begin() + 5, s.end(), [](unsigned char c) { return std::isdigit(c) != 0; })) {
    return cuda(std::stoi(s.substr(5)));
  }
  expected(path, kWhat, v);
}

std::pair<int, int> read_extent(const Object& o) {
  const bool size = o.find("size") != nullptr;
  const bool wh = o.find("width") != nullptr || o.find("height") != nullptr;
  if (size && wh) bad(o.path() + ": give \"size\" or \"width\" and \"height\", not both");
  if (size) {
    const int s = o.positive("size");
    return {s, s};
  }
  if (!wh) bad(o.path("size") + ": missing (expected a positive integer, or \"width\" and \"height\")");
  return {o.positive("width"), o.positive("height")};
}

ResizeOptions read_resize(const Object& o) {
  ResizeOptions r;
  r.filter = o.get("filter", r.filter, [](const json& v, const std::string& p) {
    return as_choice<Filter>(v, p, {{"bilinear", Filter::kBilinear}, {"area", Filter::kArea}});
  });
  r.antialias = o.flag("antialias", r.antialias);
  return r;
}

std::pair<double, double> read_range(const json& v, const std::string& path) {
  constexpr const char* kWhat = "[min, max], two positive numbers with min <= max";
  if (!v.is_array() || v.size() != 2 || !v[0].is_number() || !v[1].is_number()) expected(path, kWhat, v);
  const double lo = v[0].get<double>();
  const double hi = v[1].get<double>();
  if (!(lo > 0 && lo <= hi)) expected(path, kWhat, v);
  return {lo, hi};
}

std::vector<float> read_floats(const json& v, const std::string& path, Sign sign) {
  const bool positive = sign == Sign::kPositive;
  const std::string what = positive ? "an array of positive numbers" : "an array of numbers";
  if (!v.is_array()) expected(path, what, v);
  std::vector<float> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string p = path + "[" + std::to_string(i) + "]";
    if (!v[i].is_number()) expected(p, "a number", v[i]);
    const double d = v[i].get<double>();
    if (positive && !(d > 0)) expected(p, "a positive number", v[i]);
    // Kept as float: a value past float's range would become infinity (written back as null), and
    // a positive one below its smallest normal would divide samples into infinities.
    const float f = static_cast<float>(d);
    if (!std::isfinite(f)) expected(p, "a number within float's range (|x| <= 3.4e38)", v[i]);
    if (positive && !(f >= std::numeric_limits<float>::min())) {
      expected(p, "a positive number of at least 1.2e-38 (float's smallest normal)", v[i]);
    }
    out.push_back(f);
  }
  return out;
}

const char* name_of(Filter f) { return f == Filter::kArea ? "area" : "bilinear"; }

void write_extent(ordered_json& j, int width, int height) {
  if (width == height) {
    j["size"] = width;
  } else {
    j["width"] = width;
    j["height"] = height;
  }
}

void write_resize(ordered_json& j, const ResizeOptions& r) {
  j["filter"] = name_of(r.filter);
  j["antialias"] = r.antialias;
}

void write_seed(ordered_json& j, const std::optional<std::uint64_t>& seed) {
  if (seed) j["seed"] = *seed;
}

WarpOptions read_warp(const Object& o) {
  WarpOptions w;
  w.interpolation = o.get("interpolation", w.interpolation, [](const json& v, const std::string& p) {
    return as_choice<WarpFilter>(v, p, {{"nearest", WarpFilter::kNearest}, {"bilinear", WarpFilter::kBilinear}});
  });
  w.fill = o.get("fill", w.fill, [](const json& v, const std::string& p) {
    std::vector<std::uint8_t> fill;
    if (v.is_number()) return std::vector<std::uint8_t>{static_cast<std::uint8_t>(as_integer(v, p, 0, 255, "0-255"))};
    if (!v.is_array() || v.size() > 4) expected(p, "a grey level 0-255, one per channel, or [] (0)", v);
    for (std::size_t i = 0; i < v.size(); ++i) {
      fill.push_back(static_cast<std::uint8_t>(as_integer(v[i], p + "[" + std::to_string(i) + "]", 0, 255, "0-255")));
    }
    return fill;
  });
  w.seed = o.seed();
  return w;
}

FactorRange read_number_range(const json& v, const std::string& path, double lo, double hi, Single single) {
  const std::string what = "a number or [min, max] within [" + describe(json(lo)) + ", " + describe(json(hi)) + "]";
  if (v.is_number()) {
    const double x = as_number(v, path, single == Single::kSymmetric ? 0 : lo, hi, what);
    return single == Single::kSymmetric ? FactorRange{-x, x} : FactorRange{x, x};
  }
  if (!v.is_array() || v.size() != 2) expected(path, what, v);
  const FactorRange r{as_number(v[0], path + "[0]", lo, hi, what), as_number(v[1], path + "[1]", lo, hi, what)};
  if (r.min > r.max) bad(path + ": expected [min, max] with min <= max, got " + describe(v));
  return r;
}

void write_warp(ordered_json& j, const WarpOptions& w) {
  j["interpolation"] = w.interpolation == WarpFilter::kBilinear ? "bilinear" : "nearest";
  j["fill"] = w.fill;
  write_seed(j, w.seed);
}

ordered_json write_range(const FactorRange& r) { return ordered_json::array({r.min, r.max}); }

}  // namespace sluice::json_fields
