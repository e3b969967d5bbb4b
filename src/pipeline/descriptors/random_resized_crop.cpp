// random_resized_crop(width, height): torchvision's RandomResizedCrop: area fraction in
// [scale_min, scale_max], aspect ratio log-uniform in [ratio_min, ratio_max], 10 tries, then a
// centre crop clamped to the ratio range; the crop is resized to the output size.
#include <cmath>

#include "pipeline/stage_json.hpp"
#include "pipeline/stage_registry.hpp"

namespace sluice::schema {

namespace {

using namespace json_fields;
using S = spec::RandomResizedCrop;

void check(const spec::Stage& stage, const std::string& where) {
  const auto& s = std::get<S>(stage);
  check_extent(where, s.width, s.height);
  const auto& r = s.options;
  if (!(r.scale_min > 0 && r.scale_min <= r.scale_max)) {
    refuse(where + ": scale range must satisfy 0 < scale_min <= scale_max, got [" + std::to_string(r.scale_min) +
           ", " + std::to_string(r.scale_max) + "]");
  }
  if (!(r.ratio_min > 0 && r.ratio_min <= r.ratio_max)) {
    refuse(where + ": ratio range must satisfy 0 < ratio_min <= ratio_max, got [" + std::to_string(r.ratio_min) +
           ", " + std::to_string(r.ratio_max) + "]");
  }
}

void plan(const spec::Stage& stage, GeometryCanvas& p, CounterRng& rng) {
  const auto& op = std::get<S>(stage);
  const int width = p.width();
  const int height = p.height();
  const double area = static_cast<double>(width) * height;
  const auto& o = op.options;
  const double log_lo = std::log(o.ratio_min);
  const double log_hi = std::log(o.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.uniform(o.scale_min, o.scale_max);
    const double aspect = std::exp(rng.uniform(log_lo, log_hi));
    const int w = round_half_even(std::sqrt(target * aspect));
    const int h = round_half_even(std::sqrt(target / aspect));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const int top = static_cast<int>(rng.below(static_cast<std::uint64_t>(height - h + 1)));
      const int left = static_cast<int>(rng.below(static_cast<std::uint64_t>(width - w + 1)));
      p.crop(left, top, w, h);
      p.resize(op.width, op.height, o.resize);
      return;
    }
  }
  // torchvision's fallback: the largest centred crop within the ratio range.
  const double in_ratio = static_cast<double>(width) / height;
  int w = width;
  int h = height;
  if (in_ratio < o.ratio_min) {
    h = round_half_even(w / o.ratio_min);
  } else if (in_ratio > o.ratio_max) {
    w = round_half_even(h * o.ratio_max);
  }
  p.crop((width - w) / 2, (height - h) / 2, w, h);
  p.resize(op.width, op.height, o.resize);
}

void analyse(const spec::Stage& stage, KnownExtent& extent) {
  const auto& s = std::get<S>(stage);
  extent.fix(s.width, s.height);
}

std::optional<std::uint64_t> seed(const spec::Stage& stage) { return std::get<S>(stage).options.seed; }

spec::Stage read(const json& v, const std::string& p) {
  const Object o(v, p, {"size", "width", "height", "scale", "ratio", "filter", "antialias", "seed"});
  const auto [w, h] = read_extent(o);
  RandomResizedCropOptions r;
  std::tie(r.scale_min, r.scale_max) = o.get("scale", std::pair{r.scale_min, r.scale_max}, read_range);
  std::tie(r.ratio_min, r.ratio_max) = o.get("ratio", std::pair{r.ratio_min, r.ratio_max}, read_range);
  r.resize = read_resize(o);
  r.seed = o.seed();
  return S{w, h, r};
}

ordered_json write(const spec::Stage& stage) {
  const auto& s = std::get<S>(stage);
  ordered_json j = ordered_json::object();
  write_extent(j, s.width, s.height);
  j["scale"] = {s.options.scale_min, s.options.scale_max};
  j["ratio"] = {s.options.ratio_min, s.options.ratio_max};
  write_resize(j, s.options.resize);
  write_seed(j, s.options.seed);
  return j;
}

const StageJson kJson{read, write};
const GeometryRule kGeometry{.plan = plan, .analyse = analyse, .seed = seed};

}  // namespace

template <>
const StageDescriptor& descriptor_for<S>() {
  static const StageDescriptor d{
      .name = "random_resized_crop", .order = kImageOpOrder, .check = check, .json = &kJson, .geometry = &kGeometry};
  return d;
}

}  // namespace sluice::schema
