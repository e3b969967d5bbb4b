// gaussian_blur(kernel_size, sigma): torchvision's GaussianBlur, a pixel op on the u8 sample after
// the resampling (stages/augment/blur.hpp); sigma drawn uniformly from [min, max] per sample (a
// number: that sigma), the same on both axes as torchvision's.
#include <cmath>

#include "pipeline/descriptors/ranges.hpp"
#include "pipeline/stage_json.hpp"
#include "pipeline/stage_registry.hpp"

namespace sluice::schema {

namespace {

using namespace json_fields;
using S = spec::GaussianBlur;

constexpr int kMaxKernel = 1023;

void check(const spec::Stage& stage, const std::string& where) {
  const auto& s = std::get<S>(stage);
  for (const int k : {s.kernel_width, s.kernel_height}) {
    if (k < 1 || k > kMaxKernel || k % 2 == 0) {
      refuse(where + ": kernel_size must be odd, from 1 to " + std::to_string(kMaxKernel) + ", got " + std::to_string(k));
    }
  }
  ranges::check_positive(where, "sigma", s.sigma);
}

spec::Stage read(const json& v, const std::string& p) {
  const Object o(v, p, {"kernel_size", "sigma", "seed"});
  S s;
  const json* k = o.find("kernel_size");
  if (k == nullptr) bad(o.path("kernel_size") + ": missing (expected an odd integer or [width, height])");
  const std::string kp = o.path("kernel_size");
  if (k->is_array() && k->size() == 2) {
    s.kernel_width = as_positive_int((*k)[0], kp + "[0]");
    s.kernel_height = as_positive_int((*k)[1], kp + "[1]");
  } else {
    s.kernel_width = s.kernel_height = as_positive_int(*k, kp);
  }
  s.sigma = o.get("sigma", s.sigma, [](const json& x, const std::string& xp) {
    return read_number_range(x, xp, 1e-9, 1e6, Single::kFixed);
  });
  s.options.seed = o.seed();
  return s;
}

ordered_json write(const spec::Stage& stage) {
  const auto& s = std::get<S>(stage);
  ordered_json j{{"kernel_size", ordered_json::array({s.kernel_width, s.kernel_height})}, {"sigma", write_range(s.sigma)}};
  write_seed(j, s.options.seed);
  return j;
}

const StageJson kJson{read, write};

}  // namespace

template <>
const StageDescriptor& descriptor_for<S>() {
  static const StageDescriptor d{.name = "gaussian_blur", .order = kImageOpOrder, .check = check, .json = &kJson};
  return d;
}

}  // namespace sluice::schema
