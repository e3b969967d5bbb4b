// normalize(): (x / 255 - mean) / std into the output layout and dtype (stages/image/normalize.cpp).
#include "pipeline/stage_json.hpp"
#include "pipeline/stage_registry.hpp"

namespace sluice::schema {

namespace {

using namespace json_fields;

spec::Stage read(const json& v, const std::string& p) {
  const Object o(v, p, {"mean", "std", "layout", "dtype"});
  NormalizeOptions n;
  n.mean = o.get("mean", n.mean, [](const json& x, const std::string& xp) { return read_floats(x, xp, Sign::kAny); });
  n.std = o.get("std", n.std, [](const json& x, const std::string& xp) { return read_floats(x, xp, Sign::kPositive); });
  n.layout = o.get("layout", n.layout, [](const json& x, const std::string& xp) {
    return as_choice<Layout>(x, xp, {{"nchw", Layout::kNCHW}, {"nhwc", Layout::kNHWC}});
  });
  n.dtype = o.get("dtype", n.dtype, [](const json& x, const std::string& xp) {
    return as_choice<DType>(x, xp, {{"u8", DType::kU8}, {"f32", DType::kF32}, {"f16", DType::kF16},
                                    {"bf16", DType::kBF16}});
  });
  return spec::Normalize{n};
}

ordered_json write(const spec::Stage& stage) {
  const NormalizeOptions& n = std::get<spec::Normalize>(stage).options;
  return {{"mean", n.mean}, {"std", n.std}, {"layout", n.layout == Layout::kNCHW ? "nchw" : "nhwc"},
          {"dtype", std::string(to_string(n.dtype))}};
}

const StageJson kJson{read, write};

}  // namespace

template <>
const StageDescriptor& descriptor_for<spec::Normalize>() {
  static const StageDescriptor d{
      .name = "normalize",
      .order = {.allowed = {Phase::kDecoded, Phase::kTransformed},
                .enters = Phase::kNormalized,
                .misplaced = "normalize() must follow decode() and the image ops, once"},
      .json = &kJson,
  };
  return d;
}

}  // namespace sluice::schema
