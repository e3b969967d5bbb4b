// mixup(alpha, num_classes) and cutmix(alpha, num_classes): batch-level mixing after batch(),
// torchvision.transforms.v2.MixUp / CutMix (src/stages/augment/batch_mix.hpp). Both in one
// pipeline: each batch picks one of them with equal odds, as torchvision's reference recipe does
// with RandomChoice([MixUp, CutMix]).
#include <cmath>

#include "pipeline/stage_json.hpp"
#include "pipeline/stage_registry.hpp"

namespace sluice::schema {

namespace {

using namespace json_fields;

template <class S>
void check(const spec::Stage& stage, const std::string& where) {
  const auto& s = std::get<S>(stage);
  if (!(s.alpha > 0) || !std::isfinite(s.alpha)) refuse(where + ": alpha must be > 0, got " + std::to_string(s.alpha));
  if (s.num_classes < 1) refuse(where + ": num_classes must be at least 1, got " + std::to_string(s.num_classes));
}

template <class S>
spec::Stage read(const json& v, const std::string& p) {
  const Object o(v, p, {"alpha", "num_classes", "seed"});
  S s;
  s.alpha = o.get("alpha", 1.0, [](const json& x, const std::string& xp) {
    return as_number(x, xp, 1e-300, 1e300, "a number > 0");
  });
  s.num_classes = o.positive("num_classes");
  s.seed = o.seed();
  return s;
}

template <class S>
ordered_json write(const spec::Stage& stage) {
  const auto& s = std::get<S>(stage);
  ordered_json j{{"alpha", s.alpha}, {"num_classes", s.num_classes}};
  write_seed(j, s.seed);
  return j;
}

const StageJson kMixUpJson{read<spec::MixUp>, write<spec::MixUp>};
const StageJson kCutMixJson{read<spec::CutMix>, write<spec::CutMix>};
constexpr OrderRule kOrder{.allowed = {Phase::kBatched},
                           .once = true,
                           .misplaced = "mixup() and cutmix() mix whole batches: put them after batch()"};

}  // namespace

template <>
const StageDescriptor& descriptor_for<spec::MixUp>() {
  static const StageDescriptor d{.name = "mixup", .order = kOrder, .check = check<spec::MixUp>, .json = &kMixUpJson};
  return d;
}

template <>
const StageDescriptor& descriptor_for<spec::CutMix>() {
  static const StageDescriptor d{.name = "cutmix", .order = kOrder, .check = check<spec::CutMix>, .json = &kCutMixJson};
  return d;
}

}  // namespace sluice::schema
