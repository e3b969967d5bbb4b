// grayscale(num_output_channels) and random_grayscale(probability): torchvision's Grayscale and
// RandomGrayscale, Pillow's convert("L") on the u8 sample after the resampling (a pixel op,
// stages/augment/color.hpp). num_output_channels 1 narrows the sample to one channel; 3 (and
// random_grayscale, which keeps the image's channels as torchvision's does) writes the grey level
// into each.
#include "pipeline/stage_json.hpp"
#include "pipeline/stage_registry.hpp"

namespace sluice::schema {

namespace {

using namespace json_fields;

void check_grey(const spec::Stage& stage, const std::string& where) {
  const int n = std::get<spec::Grayscale>(stage).num_output_channels;
  if (n != 1 && n != 3) refuse(where + ": num_output_channels must be 1 or 3, got " + std::to_string(n));
}

spec::Stage read_grey(const json& v, const std::string& p) {
  const Object o(v, p, {"num_output_channels"});
  const int n = o.get("num_output_channels", 1, [](const json& x, const std::string& xp) {
    return static_cast<int>(as_integer(x, xp, 1, 3, "1 or 3"));
  });
  if (n == 2) expected(o.path("num_output_channels"), "1 or 3", json(n));
  return spec::Grayscale{n};
}

ordered_json write_grey(const spec::Stage& stage) {
  return {{"num_output_channels", std::get<spec::Grayscale>(stage).num_output_channels}};
}

void check_random(const spec::Stage& stage, const std::string& where) {
  const double p = std::get<spec::RandomGrayscale>(stage).probability;
  if (!(p >= 0 && p <= 1)) refuse(where + ": probability must be in [0, 1], got " + std::to_string(p));
}

spec::Stage read_random(const json& v, const std::string& p) {
  const Object o(v, p, {"probability", "seed"});
  const double probability = o.get("probability", 0.1, [](const json& x, const std::string& xp) {
    return as_number(x, xp, 0, 1, "a number in [0, 1]");
  });
  return spec::RandomGrayscale{probability, RandomOptions{o.seed()}};
}

ordered_json write_random(const spec::Stage& stage) {
  const auto& s = std::get<spec::RandomGrayscale>(stage);
  ordered_json j{{"probability", s.probability}};
  write_seed(j, s.options.seed);
  return j;
}

const StageJson kGreyJson{read_grey, write_grey};
const StageJson kRandomJson{read_random, write_random};

}  // namespace

template <>
const StageDescriptor& descriptor_for<spec::Grayscale>() {
  static const StageDescriptor d{.name = "grayscale", .order = kImageOpOrder, .check = check_grey, .json = &kGreyJson};
  return d;
}

template <>
const StageDescriptor& descriptor_for<spec::RandomGrayscale>() {
  static const StageDescriptor d{
      .name = "random_grayscale", .order = kImageOpOrder, .check = check_random, .json = &kRandomJson};
  return d;
}

}  // namespace sluice::schema
