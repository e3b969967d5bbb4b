// center_crop(width, height): torchvision's CenterCrop, padding with 0 when the crop is larger.
#include "pipeline/stage_json.hpp"
#include "pipeline/stage_registry.hpp"

namespace sluice::schema {

namespace {

using namespace json_fields;
using S = spec::CenterCrop;

void check(const spec::Stage& stage, const std::string& where) {
  const auto& s = std::get<S>(stage);
  check_extent(where, s.width, s.height);
}

int center_offset(int size, int crop) {
  if (crop > size) return -((crop - size) / 2);  // torchvision pads, then crops the centre
  return round_half_even((size - crop) / 2.0);
}

void plan(const spec::Stage& stage, GeometryCanvas& canvas, CounterRng& /*rng*/) {
  const auto& s = std::get<S>(stage);
  canvas.crop(center_offset(canvas.width(), s.width), center_offset(canvas.height(), s.height), s.width, s.height);
}

void analyse(const spec::Stage& stage, KnownExtent& extent) {
  const auto& s = std::get<S>(stage);
  if (extent.crop_fits("center_crop", s.width, s.height, 0)) extent.fix(s.width, s.height);
}

spec::Stage read(const json& v, const std::string& p) {
  const Object o(v, p, {"size", "width", "height"});
  const auto [w, h] = read_extent(o);
  return S{w, h};
}

ordered_json write(const spec::Stage& stage) {
  const auto& s = std::get<S>(stage);
  ordered_json j = ordered_json::object();
  write_extent(j, s.width, s.height);
  return j;
}

const StageJson kJson{read, write};
const GeometryRule kGeometry{.plan = plan, .analyse = analyse};

}  // namespace

template <>
const StageDescriptor& descriptor_for<S>() {
  static const StageDescriptor d{
      .name = "center_crop", .order = kImageOpOrder, .check = check, .json = &kJson, .geometry = &kGeometry};
  return d;
}

}  // namespace sluice::schema
