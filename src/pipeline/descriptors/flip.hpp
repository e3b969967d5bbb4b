// The two flips' shared schema: a probability in [0, 1] and an optional seed; the flip folds into
// the sample's mapping (GeometryCanvas), so it costs nothing and is exact. flip_horizontal.cpp and
// flip_vertical.cpp each name their stage and the canvas operation it applies.
#pragma once

#include <string>

#include "pipeline/stage_json.hpp"
#include "pipeline/stage_registry.hpp"

namespace sluice::schema::flip {

using namespace json_fields;

// S is spec::FlipHorizontal or spec::FlipVertical; Mirror is the canvas operation it applies.
template <typename S, void (GeometryCanvas::*Mirror)()>
const StageDescriptor& descriptor(const char* name) {
  static const StageJson json_form{
      [](const json& v, const std::string& p) -> spec::Stage {
        const Object o(v, p, {"probability", "seed"});
        const double probability = o.get("probability", 0.5, [](const json& x, const std::string& xp) {
          return as_number(x, xp, 0, 1, "a number in [0, 1]");
        });
        return S{probability, FlipOptions{o.seed()}};
      },
      [](const spec::Stage& stage) {
        const auto& s = std::get<S>(stage);
        ordered_json j{{"probability", s.probability}};
        write_seed(j, s.options.seed);
        return j;
      }};
  static const GeometryRule mirror_rule{
      .plan = [](const spec::Stage& stage, GeometryCanvas& canvas,
                 CounterRng& rng) { if (rng.bernoulli(std::get<S>(stage).probability)) (canvas.*Mirror)(); },
      .analyse = [](const spec::Stage&, KnownExtent&) {},  // the size stays
      .seed = [](const spec::Stage& stage) -> std::optional<std::uint64_t> { return std::get<S>(stage).options.seed; }};
  static const StageDescriptor d{
      .name = name,
      .order = kImageOpOrder,
      .check = [](const spec::Stage& stage, const std::string& where) {
        const auto& s = std::get<S>(stage);
        if (!(s.probability >= 0 && s.probability <= 1)) {
          refuse(where + ": probability must be in [0, 1], got " + std::to_string(s.probability));
        }
      },
      .json = &json_form,
      .geometry = &mirror_rule};
  return d;
}

}  // namespace sluice::schema::flip
