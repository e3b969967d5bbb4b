// The automatic policies (policy.hpp): torchvision 0.14's tables, draws and _apply_op.
#include "stages/augment/policy.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "sluice/core/error.hpp"
#include "stages/augment/color.hpp"
#include "stages/augment/point_ops.hpp"

namespace sluice::stages {

namespace {

using enum PolicyOp;

// torch.linspace(start, end, bins)[bin] in float32 (torch's own rounding may differ by one ulp).
double linspace(double start, double end, int bin, int bins) {
  if (bins <= 1) return static_cast<float>(start);
  return static_cast<float>(start + (end - start) * bin / (bins - 1));
}

// 8 - round(bin / ((bins - 1) / steps)): the posterize bits of the bin.
double posterize_bits(int bin, int bins, double steps) {
  if (bins <= 1) return 8;
  return 8 - std::nearbyint(static_cast<float>(bin / ((bins - 1) / steps)));
}

bool is_signed(PolicyOp op) { return op >= kShearX && op <= kSharpness; }
bool has_bins(PolicyOp op) { return op != kIdentity && op != kAutoContrast && op != kEqualize && op != kInvert; }

// TrivialAugmentWide's and RandAugment's op lists, in their _augmentation_space order.
constexpr PolicyOp kWideOps[] = {kIdentity,   kShearX, kShearY,    kTranslateX, kTranslateY,
                                 kRotate,     kBrightness, kColor, kContrast,   kSharpness,
                                 kPosterize,  kSolarize,   kAutoContrast, kEqualize};

struct SubPolicyOp {
  PolicyOp op;
  double probability;
  int bin;  // -1: none
};
using SubPolicy = std::array<SubPolicyOp, 2>;

// AutoAugmentPolicy.IMAGENET, as torchvision's _get_policies lists it.
constexpr SubPolicy kImageNet[] = {
    {{{kPosterize, 0.4, 8}, {kRotate, 0.6, 9}}},        {{{kSolarize, 0.6, 5}, {kAutoContrast, 0.6, -1}}},
    {{{kEqualize, 0.8, -1}, {kEqualize, 0.6, -1}}},     {{{kPosterize, 0.6, 7}, {kPosterize, 0.6, 6}}},
    {{{kEqualize, 0.4, -1}, {kSolarize, 0.2, 4}}},      {{{kEqualize, 0.4, -1}, {kRotate, 0.8, 8}}},
    {{{kSolarize, 0.6, 3}, {kEqualize, 0.6, -1}}},      {{{kPosterize, 0.8, 5}, {kEqualize, 1.0, -1}}},
    {{{kRotate, 0.2, 3}, {kSolarize, 0.6, 8}}},         {{{kEqualize, 0.6, -1}, {kPosterize, 0.4, 6}}},
    {{{kRotate, 0.8, 8}, {kColor, 0.4, 0}}},            {{{kRotate, 0.4, 9}, {kEqualize, 0.6, -1}}},
    {{{kEqualize, 0.0, -1}, {kEqualize, 0.8, -1}}},     {{{kInvert, 0.6, -1}, {kEqualize, 1.0, -1}}},
    {{{kColor, 0.6, 4}, {kContrast, 1.0, 8}}},          {{{kRotate, 0.8, 8}, {kColor, 1.0, 2}}},
    {{{kColor, 0.8, 8}, {kSolarize, 0.8, 7}}},          {{{kSharpness, 0.4, 7}, {kInvert, 0.6, -1}}},
    {{{kShearX, 0.6, 5}, {kEqualize, 1.0, -1}}},        {{{kColor, 0.4, 0}, {kEqualize, 0.6, -1}}},
    {{{kEqualize, 0.4, -1}, {kSolarize, 0.2, 4}}},      {{{kSolarize, 0.6, 5}, {kAutoContrast, 0.6, -1}}},
    {{{kInvert, 0.6, -1}, {kEqualize, 1.0, -1}}},       {{{kColor, 0.6, 4}, {kContrast, 1.0, 8}}},
    {{{kEqualize, 0.8, -1}, {kEqualize, 0.6, -1}}},
};

// AutoAugmentPolicy.CIFAR10.
constexpr SubPolicy kCifar10[] = {
    {{{kInvert, 0.1, -1}, {kContrast, 0.2, 6}}},        {{{kRotate, 0.7, 2}, {kTranslateX, 0.3, 9}}},
    {{{kSharpness, 0.8, 1}, {kSharpness, 0.9, 3}}},     {{{kShearY, 0.5, 8}, {kTranslateY, 0.7, 9}}},
    {{{kAutoContrast, 0.5, -1}, {kEqualize, 0.9, -1}}}, {{{kShearY, 0.2, 7}, {kPosterize, 0.3, 7}}},
    {{{kColor, 0.4, 3}, {kBrightness, 0.6, 7}}},        {{{kSharpness, 0.3, 9}, {kBrightness, 0.7, 9}}},
    {{{kEqualize, 0.6, -1}, {kEqualize, 0.5, -1}}},     {{{kContrast, 0.6, 7}, {kSharpness, 0.6, 5}}},
    {{{kColor, 0.7, 7}, {kTranslateX, 0.5, 8}}},        {{{kEqualize, 0.3, -1}, {kAutoContrast, 0.4, -1}}},
    {{{kTranslateY, 0.4, 3}, {kSharpness, 0.2, 6}}},    {{{kBrightness, 0.9, 6}, {kColor, 0.2, 8}}},
    {{{kSolarize, 0.5, 2}, {kInvert, 0.0, -1}}},        {{{kEqualize, 0.2, -1}, {kAutoContrast, 0.6, -1}}},
    {{{kEqualize, 0.2, -1}, {kEqualize, 0.6, -1}}},     {{{kColor, 0.9, 9}, {kEqualize, 0.6, -1}}},
    {{{kAutoContrast, 0.8, -1}, {kSolarize, 0.2, 8}}},  {{{kBrightness, 0.1, 3}, {kColor, 0.7, 0}}},
    {{{kSolarize, 0.4, 5}, {kAutoContrast, 0.9, -1}}},  {{{kTranslateY, 0.9, 9}, {kTranslateY, 0.7, 9}}},
    {{{kAutoContrast, 0.9, -1}, {kSolarize, 0.8, 3}}},  {{{kEqualize, 0.8, -1}, {kInvert, 0.1, -1}}},
    {{{kTranslateY, 0.7, 9}, {kAutoContrast, 0.9, -1}}},
};

}  // namespace

double trivial_augment_magnitude(PolicyOp op, int bin, int bins) {
  switch (op) {
    case kShearX: case kShearY: case kBrightness: case kColor: case kContrast: case kSharpness:
      return linspace(0.0, 0.99, bin, bins);
    case kTranslateX: case kTranslateY: return linspace(0.0, 32.0, bin, bins);
    case kRotate: return linspace(0.0, 135.0, bin, bins);
    case kPosterize: return posterize_bits(bin, bins, 6);
    case kSolarize: return linspace(255.0, 0.0, bin, bins);
    default: return 0;
  }
}

double rand_augment_magnitude(PolicyOp op, int bin, int bins, Size2 size) {
  switch (op) {
    case kShearX: case kShearY: return linspace(0.0, 0.3, bin, bins);
    case kTranslateX: return linspace(0.0, 150.0 / 331.0 * size.width, bin, bins);
    case kTranslateY: return linspace(0.0, 150.0 / 331.0 * size.height, bin, bins);
    case kRotate: return linspace(0.0, 30.0, bin, bins);
    case kBrightness: case kColor: case kContrast: case kSharpness: return linspace(0.0, 0.9, bin, bins);
    case kPosterize: return posterize_bits(bin, bins, 4);
    case kSolarize: return linspace(255.0, 0.0, bin, bins);
    default: return 0;
  }
}

PolicyStep trivial_augment_wide_step(int bins, CounterRng& rng) {
  const PolicyOp op = kWideOps[rng.below(std::size(kWideOps))];
  double magnitude = 0;
  if (has_bins(op)) magnitude = trivial_augment_magnitude(op, static_cast<int>(rng.below(static_cast<std::uint64_t>(bins))), bins);
  if (is_signed(op) && rng.below(2) == 1) magnitude = -magnitude;
  return {op, magnitude};
}

PolicyStep rand_augment_step(int magnitude, int bins, Size2 size, CounterRng& rng) {
  const PolicyOp op = kWideOps[rng.below(std::size(kWideOps))];
  double m = has_bins(op) ? rand_augment_magnitude(op, magnitude, bins, size) : 0.0;
  if (is_signed(op) && rng.below(2) == 1) m = -m;
  return {op, m};
}

std::array<PolicyStep, 2> auto_augment_steps(AutoAugmentTable table, Size2 size, CounterRng& rng) {
  const std::span<const SubPolicy> policies = table == AutoAugmentTable::kImageNet ? std::span<const SubPolicy>(kImageNet)
                                                                                   : std::span<const SubPolicy>(kCifar10);
  const SubPolicy& chosen = policies[rng.below(policies.size())];
  const double probs[2] = {rng.uniform(), rng.uniform()};
  const bool negative[2] = {rng.below(2) == 0, rng.below(2) == 0};  // torchvision negates on signs[i] == 0
  std::array<PolicyStep, 2> steps{};
  for (int i = 0; i < 2; ++i) {
    const SubPolicyOp& o = chosen[static_cast<std::size_t>(i)];
    if (!(probs[i] <= o.probability)) continue;
    double m = o.bin >= 0 ? rand_augment_magnitude(o.op, o.bin, 10, size) : 0.0;
    if (is_signed(o.op) && negative[i]) m = -m;
    steps[static_cast<std::size_t>(i)] = {o.op, m};
  }
  return steps;
}

std::size_t policy_workspace_bytes(Size2 size, int channels) {
  const std::size_t image = static_cast<std::size_t>(size.width) * size.height * channels;
  return std::max(image, sharpness_workspace_bytes(size, channels));
}

void apply_policy_step(const PolicyStep& step, ImageView image, WarpInterpolation interpolation,
                       std::span<const std::uint8_t> fill, std::span<std::byte> workspace) {
  const double m = step.magnitude;
  const auto warp = [&](const AffineParams& params, bool rotation) {
    const std::size_t row = static_cast<std::size_t>(image.width) * image.channels;
    const ImageView spare{reinterpret_cast<std::uint8_t*>(workspace.data()), image.width, image.height, image.channels,
                          static_cast<std::ptrdiff_t>(row)};
    if (rotation) {
      rotate(image, spare, m, interpolation, fill);
    } else {
      affine(image, spare, params, interpolation, fill);
    }
    for (int y = 0; y < image.height; ++y) std::copy_n(spare.row(y), row, image.row(y));
  };
  const double shear = std::atan(m) * (180.0 / std::numbers::pi);  // math.degrees(math.atan(m)), as CPython rounds it
  AffineParams params;
  switch (step.op) {
    case kShearX:
    case kShearY:
      (step.op == kShearX ? params.shear_x : params.shear_y) = shear;
      params.center_x = 0.0;  // torchvision shears about the top-left corner (center=[0, 0])
      params.center_y = 0.0;
      break;
    case kTranslateX: params.translate_x = static_cast<int>(m); break;  // int(magnitude)
    case kTranslateY: params.translate_y = static_cast<int>(m); break;
    default: break;
  }
  switch (step.op) {
    case kIdentity: break;
    case kShearX: case kShearY: case kTranslateX: case kTranslateY: warp(params, false); break;
    case kRotate: warp(params, true); break;
    case kBrightness: adjust_brightness(image, 1.0 + m); break;
    case kColor: adjust_saturation(image, 1.0 + m); break;
    case kContrast: adjust_contrast(image, 1.0 + m); break;
    case kSharpness: adjust_sharpness(image, image, static_cast<float>(1.0 + m), workspace); break;
    case kPosterize: posterize(image, image, static_cast<int>(m)); break;
    case kSolarize: solarize(image, image, m); break;
    case kAutoContrast: autocontrast(image, image); break;
    case kEqualize: equalize(image, image); break;
    case kInvert: invert(image, image); break;
  }
}

}  // namespace sluice::stages
