// resize_shorter(size): torchvision's Resize(int): the shorter side becomes `size`, the longer
// int(size * long / short).
#include "pipeline/stage_json.hpp"
#include "pipeline/stage_registry.hpp"

namespace sluice::schema {

namespace {

using namespace json_fields;
using S = spec::ResizeShorter;

void check(const spec::Stage& stage, const std::string& where) {
  const auto& s = std::get<S>(stage);
  check_extent(where, s.size, s.size);
}

void plan(const spec::Stage& stage, GeometryCanvas& canvas, CounterRng& /*rng*/) {
  const auto& s = std::get<S>(stage);
  const int w = canvas.width();
  const int h = canvas.height();
  if (w <= h) {
    canvas.resize(s.size, static_cast<int>(static_cast<std::int64_t>(s.size) * h / w), s.options);
  } else {
    canvas.resize(static_cast<int>(static_cast<std::int64_t>(s.size) * w / h), s.size, s.options);
  }
}

void analyse(const spec::Stage& stage, KnownExtent& extent) {
  extent.size.reset();
  extent.shorter = std::get<S>(stage).size;
}

spec::Stage read(const json& v, const std::string& p) {
  const Object o(v, p, {"size", "filter", "antialias"});
  return S{o.positive("size"), read_resize(o)};
}

ordered_json write(const spec::Stage& stage) {
  const auto& s = std::get<S>(stage);
  ordered_json j{{"size", s.size}};
  write_resize(j, s.options);
  return j;
}

const StageJson kJson{read, write};
const GeometryRule kGeometry{.plan = plan, .analyse = analyse};

}  // namespace

template <>
const StageDescriptor& descriptor_for<S>() {
  static const StageDescriptor d{
      .name = "resize_shorter", .order = kImageOpOrder, .check = check, .json = &kJson, .geometry = &kGeometry};
  return d;
}

}  // namespace sluice::schema
