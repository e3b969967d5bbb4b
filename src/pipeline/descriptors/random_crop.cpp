// random_crop(width, height): torchvision's RandomCrop(size, padding, fill): pad every side, then
// crop at a random offset.
#include "sluice/detail/core/numbers.hpp"
#include "pipeline/stage_json.hpp"
#include "pipeline/stage_registry.hpp"
#include "sluice/core/error.hpp"

namespace sluice::schema {

namespace {

using namespace json_fields;
using S = spec::RandomCrop;

void check(const spec::Stage& stage, const std::string& where) {
  const auto& s = std::get<S>(stage);
  check_extent(where, s.width, s.height);
  // Bounded so that an image's side plus twice the padding stays far inside an int.
  if (s.options.padding < 0 || s.options.padding > core::kMaxImageSide) {
    refuse(where + ": padding must be from 0 to " + std::to_string(core::kMaxImageSide) + ", got " +
           std::to_string(s.options.padding));
  }
}

void plan(const spec::Stage& stage, GeometryCanvas& canvas, CounterRng& rng) {
  const auto& op = std::get<S>(stage);
  const int pad = op.options.padding;
  const int padded_w = canvas.width() + 2 * pad;
  const int padded_h = canvas.height() + 2 * pad;
  if (op.width > padded_w || op.height > padded_h) {
    throw Error(ErrorCode::kInvalidArgument,
                "random_crop(" + std::to_string(op.width) + "x" + std::to_string(op.height) + ") is larger than the " +
                    std::to_string(padded_w) + "x" + std::to_string(padded_h) + " image it follows (after padding " +
                    std::to_string(pad) + ")");
  }
  const int top = static_cast<int>(rng.below(static_cast<std::uint64_t>(padded_h - op.height + 1)));
  const int left = static_cast<int>(rng.below(static_cast<std::uint64_t>(padded_w - op.width + 1)));
  canvas.crop(left - pad, top - pad, op.width, op.height);
  canvas.set_fill(op.options.fill);
}

void analyse(const spec::Stage& stage, KnownExtent& extent) {
  const auto& s = std::get<S>(stage);
  if (extent.crop_fits("random_crop", s.width, s.height, s.options.padding)) extent.fix(s.width, s.height);
}

std::optional<std::uint64_t> seed(const spec::Stage& stage) { return std::get<S>(stage).options.seed; }

spec::Stage read(const json& v, const std::string& p) {
  const Object o(v, p, {"size", "width", "height", "padding", "fill", "seed"});
  const auto [w, h] = read_extent(o);
  RandomCropOptions r;
  r.padding = o.get("padding", r.padding, [](const json& x, const std::string& xp) {
    return static_cast<int>(as_integer(x, xp, 0, core::kMaxImageSide, "an integer from 0 to 1048576"));
  });
  r.fill = o.get("fill", r.fill, [](const json& x, const std::string& xp) {
    return static_cast<std::uint8_t>(as_integer(x, xp, 0, 255, "an integer in [0, 255]"));
  });
  r.seed = o.seed();
  return S{w, h, r};
}

ordered_json write(const spec::Stage& stage) {
  const auto& s = std::get<S>(stage);
  ordered_json j = ordered_json::object();
  write_extent(j, s.width, s.height);
  j["padding"] = s.options.padding;
  j["fill"] = s.options.fill;
  write_seed(j, s.options.seed);
  return j;
}

const StageJson kJson{read, write};
const GeometryRule kGeometry{.plan = plan, .analyse = analyse, .seed = seed};

}  // namespace

template <>
const StageDescriptor& descriptor_for<S>() {
  static const StageDescriptor d{
      .name = "random_crop", .order = kImageOpOrder, .check = check, .json = &kJson, .geometry = &kGeometry};
  return d;
}

}  // namespace sluice::schema
