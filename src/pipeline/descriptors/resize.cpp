// resize(width, height): to exactly that size, whatever the aspect ratio.
#include "pipeline/stage_json.hpp"
#include "pipeline/stage_registry.hpp"

namespace sluice::schema {

namespace {

using namespace json_fields;
using S = spec::Resize;

void check(const spec::Stage& stage, const std::string& where) {
  const auto& s = std::get<S>(stage);
  check_extent(where, s.width, s.height);
}

void plan(const spec::Stage& stage, GeometryCanvas& canvas, CounterRng& /*rng*/) {
  const auto& s = std::get<S>(stage);
  canvas.resize(s.width, s.height, s.options);
}

void analyse(const spec::Stage& stage, KnownExtent& extent) {
  const auto& s = std::get<S>(stage);
  extent.fix(s.width, s.height);
}

spec::Stage read(const json& v, const std::string& p) {
  const Object o(v, p, {"size", "width", "height", "filter", "antialias"});
  const auto [w, h] = read_extent(o);
  return S{w, h, read_resize(o)};
}

ordered_json write(const spec::Stage& stage) {
  const auto& s = std::get<S>(stage);
  ordered_json j = ordered_json::object();
  write_extent(j, s.width, s.height);
  write_resize(j, s.options);
  return j;
}

const StageJson kJson{read, write};
const GeometryRule kGeometry{.plan = plan, .analyse = analyse};

}  // namespace

template <>
const StageDescriptor& descriptor_for<S>() {
  static const StageDescriptor d{
      .name = "resize", .order = kImageOpOrder, .check = check, .json = &kJson, .geometry = &kGeometry};
  return d;
}

}  // namespace sluice::schema
