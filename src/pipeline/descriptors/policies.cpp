// trivial_augment_wide, rand_augment, auto_augment: torchvision's TrivialAugmentWide(
// num_magnitude_bins), RandAugment(num_ops, magnitude, num_magnitude_bins) and AutoAugment(policy),
// pixel ops on the u8 sample after the resampling (stages/augment/policy.hpp), with the warps'
// "interpolation" (nearest, torchvision's default) and "fill".
#include "pipeline/stage_json.hpp"
#include "pipeline/stage_registry.hpp"

namespace sluice::schema {

namespace {

using namespace json_fields;

constexpr int kMaxBins = 1000;

void check_fill(const std::string& where, const WarpOptions& w) {
  if (w.fill.size() > 1 && w.fill.size() != 3) {
    refuse(where + ": fill must be one grey level or one per channel (3), got " + std::to_string(w.fill.size()) +
           " values");
  }
}

void check_bins(const std::string& where, int bins) {
  if (bins < 2 || bins > kMaxBins) {
    refuse(where + ": num_magnitude_bins must be from 2 to " + std::to_string(kMaxBins) + ", got " + std::to_string(bins));
  }
}

int read_bins(const Object& o) {
  return o.get("num_magnitude_bins", 31, [](const json& x, const std::string& xp) {
    return static_cast<int>(as_integer(x, xp, 2, kMaxBins, "an integer from 2 to 1000"));
  });
}

void check_trivial(const spec::Stage& stage, const std::string& where) {
  const auto& s = std::get<spec::TrivialAugmentWide>(stage);
  check_bins(where, s.num_magnitude_bins);
  check_fill(where, s.options);
}
spec::Stage read_trivial(const json& v, const std::string& p) {
  const Object o(v, p, {"num_magnitude_bins", "interpolation", "fill", "seed"});
  return spec::TrivialAugmentWide{read_bins(o), read_warp(o)};
}
ordered_json write_trivial(const spec::Stage& stage) {
  const auto& s = std::get<spec::TrivialAugmentWide>(stage);
  ordered_json j{{"num_magnitude_bins", s.num_magnitude_bins}};
  write_warp(j, s.options);
  return j;
}

void check_rand(const spec::Stage& stage, const std::string& where) {
  const auto& s = std::get<spec::RandAugment>(stage);
  check_bins(where, s.num_magnitude_bins);
  if (s.num_ops < 0 || s.num_ops > 100) refuse(where + ": num_ops must be from 0 to 100, got " + std::to_string(s.num_ops));
  if (s.magnitude < 0 || s.magnitude >= s.num_magnitude_bins) {
    refuse(where + ": magnitude must be a bin from 0 to num_magnitude_bins - 1 (" +
           std::to_string(s.num_magnitude_bins - 1) + "), got " + std::to_string(s.magnitude));
  }
  check_fill(where, s.options);
}
spec::Stage read_rand(const json& v, const std::string& p) {
  const Object o(v, p, {"num_ops", "magnitude", "num_magnitude_bins", "interpolation", "fill", "seed"});
  spec::RandAugment s;
  s.num_ops = o.get("num_ops", s.num_ops, [](const json& x, const std::string& xp) {
    return static_cast<int>(as_integer(x, xp, 0, 100, "an integer from 0 to 100"));
  });
  s.magnitude = o.get("magnitude", s.magnitude, [](const json& x, const std::string& xp) {
    return static_cast<int>(as_integer(x, xp, 0, kMaxBins - 1, "a bin from 0 to num_magnitude_bins - 1"));
  });
  s.num_magnitude_bins = read_bins(o);
  s.options = read_warp(o);
  return s;
}
ordered_json write_rand(const spec::Stage& stage) {
  const auto& s = std::get<spec::RandAugment>(stage);
  ordered_json j{{"num_ops", s.num_ops}, {"magnitude", s.magnitude}, {"num_magnitude_bins", s.num_magnitude_bins}};
  write_warp(j, s.options);
  return j;
}

void check_auto(const spec::Stage& stage, const std::string& where) {
  check_fill(where, std::get<spec::AutoAugment>(stage).options);
}
spec::Stage read_auto(const json& v, const std::string& p) {
  const Object o(v, p, {"policy", "interpolation", "fill", "seed"});
  spec::AutoAugment s;
  s.policy = o.get("policy", s.policy, [](const json& x, const std::string& xp) {
    return as_choice<AutoAugmentPolicy>(x, xp, {{"imagenet", AutoAugmentPolicy::kImageNet},
                                                 {"cifar10", AutoAugmentPolicy::kCifar10}});
  });
  s.options = read_warp(o);
  return s;
}
ordered_json write_auto(const spec::Stage& stage) {
  const auto& s = std::get<spec::AutoAugment>(stage);
  ordered_json j{{"policy", s.policy == AutoAugmentPolicy::kCifar10 ? "cifar10" : "imagenet"}};
  write_warp(j, s.options);
  return j;
}

const StageJson kTrivialJson{read_trivial, write_trivial};
const StageJson kRandJson{read_rand, write_rand};
const StageJson kAutoJson{read_auto, write_auto};

}  // namespace

template <>
const StageDescriptor& descriptor_for<spec::TrivialAugmentWide>() {
  static const StageDescriptor d{
      .name = "trivial_augment_wide", .order = kImageOpOrder, .check = check_trivial, .json = &kTrivialJson};
  return d;
}

template <>
const StageDescriptor& descriptor_for<spec::RandAugment>() {
  static const StageDescriptor d{.name = "rand_augment", .order = kImageOpOrder, .check = check_rand, .json = &kRandJson};
  return d;
}

template <>
const StageDescriptor& descriptor_for<spec::AutoAugment>() {
  static const StageDescriptor d{.name = "auto_augment", .order = kImageOpOrder, .check = check_auto, .json = &kAutoJson};
  return d;
}

}  // namespace sluice::schema
