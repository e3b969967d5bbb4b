// flip_vertical(probability): mirrors the image top to bottom with that probability
// (torchvision's RandomVerticalFlip). Folds into the sample's mapping as flip_horizontal does: the
// rows are written bottom-up, so it costs nothing and is exact.
#include "pipeline/stage_json.hpp"
#include "pipeline/stage_registry.hpp"

namespace sluice::schema {

namespace {

using namespace json_fields;
using S = spec::FlipVertical;

void check(const spec::Stage& stage, const std::string& where) {
  const auto& s = std::get<S>(stage);
  if (!(s.probability >= 0 && s.probability <= 1)) {
    refuse(where + ": probability must be in [0, 1], got " + std::to_string(s.probability));
  }
}

void plan(const spec::Stage& stage, GeometryCanvas& canvas, CounterRng& rng) {
  if (rng.bernoulli(std::get<S>(stage).probability)) canvas.flip_vertical();
}

void analyse(const spec::Stage& /*stage*/, KnownExtent& /*extent*/) {}  // the size stays

std::optional<std::uint64_t> seed(const spec::Stage& stage) { return std::get<S>(stage).options.seed; }

spec::Stage read(const json& v, const std::string& p) {
  const Object o(v, p, {"probability", "seed"});
  const double probability = o.get("probability", 0.5, [](const json& x, const std::string& xp) {
    return as_number(x, xp, 0, 1, "a number in [0, 1]");
  });
  return S{probability, FlipOptions{o.seed()}};
}

ordered_json write(const spec::Stage& stage) {
  const auto& s = std::get<S>(stage);
  ordered_json j{{"probability", s.probability}};
  write_seed(j, s.options.seed);
  return j;
}

const StageJson kJson{read, write};
const GeometryRule kGeometry{.plan = plan, .analyse = analyse, .seed = seed};

}  // namespace

template <>
const StageDescriptor& descriptor_for<S>() {
  static const StageDescriptor d{
      .name = "flip_vertical", .order = kImageOpOrder, .check = check, .json = &kJson, .geometry = &kGeometry};
  return d;
}

}  // namespace sluice::schema
