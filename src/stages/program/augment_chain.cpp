// The augmentation chain (augment_chain.hpp): each op's draws, torchvision's, then its kernel.
#include "stages/program/augment_chain.hpp"

#include <array>
#include <cmath>
#include <utility>

#include "sluice/core/error.hpp"
#include "sluice/core/rng.hpp"
#include "stages/augment/color.hpp"

namespace sluice::stages {

namespace {

CounterRng rng_for(const AugmentStep& step, const SampleKey& key) {
  const std::uint64_t op_key = key.attempt == 0 ? step.key : derive_key(step.key, key.attempt);
  return CounterRng(op_key, static_cast<std::uint64_t>(key.item), static_cast<std::uint32_t>(key.epoch));
}

bool is_off(const FactorRange& r, double center) { return r.min == center && r.max == center; }

// torchvision's ColorJitter.forward: a random order of the four adjustments (fn_idx), then each
// factor drawn uniformly from its range, the ranges left out drawing nothing.
void color_jitter(const ColorJitterOptions& o, ImageView image, CounterRng& rng) {
  std::array<int, 4> order{0, 1, 2, 3};
  for (int i = 3; i > 0; --i) {
    std::swap(order[static_cast<std::size_t>(i)], order[rng.below(static_cast<std::uint64_t>(i) + 1)]);
  }
  const auto draw = [&rng](const FactorRange& r, double center) {
    return is_off(r, center) ? std::nan("") : rng.uniform(r.min, r.max);
  };
  const double brightness = draw(o.brightness, 1);
  const double contrast = draw(o.contrast, 1);
  const double saturation = draw(o.saturation, 1);
  const double hue = draw(o.hue, 0);
  for (const int op : order) {
    if (op == 0 && !std::isnan(brightness)) adjust_brightness(image, brightness);
    if (op == 1 && !std::isnan(contrast)) adjust_contrast(image, contrast);
    if (op == 2 && !std::isnan(saturation)) adjust_saturation(image, saturation);
    if (op == 3 && !std::isnan(hue)) adjust_hue(image, hue);
  }
}

// torchvision's RandomErasing.get_params: 10 tries at a rectangle inside the image, else none.
void random_erasing(const RandomErasingOptions& o, const SlotSample& slot, CounterRng& rng) {
  if (!rng.bernoulli(o.probability)) return;
  const int height = slot.size.height;
  const int width = slot.size.width;
  const double area = static_cast<double>(height) * width;
  const double log_lo = std::log(o.ratio.min);
  const double log_hi = std::log(o.ratio.max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double erase_area = area * rng.uniform(o.scale.min, o.scale.max);
    const double aspect = std::exp(rng.uniform(log_lo, log_hi));
    const int h = static_cast<int>(std::nearbyint(std::sqrt(erase_area * aspect)));  // Python's round()
    const int w = static_cast<int>(std::nearbyint(std::sqrt(erase_area / aspect)));
    if (!(h < height && w < width)) continue;
    const int top = static_cast<int>(rng.below(static_cast<std::uint64_t>(height - h + 1)));
    const int left = static_cast<int>(rng.below(static_cast<std::uint64_t>(width - w + 1)));
    const Rect rect{left, top, w, h};
    if (o.value.empty()) {
      erase_random(slot, rect, rng);
    } else {
      erase_constant(slot, rect, o.value);
    }
    return;
  }
}

[[noreturn]] void not_a_pixel_op(const spec::Stage& op) {
  throw Error(ErrorCode::kInternal, std::string("augment chain: ") + spec::name_of(op) + " is not an op of this chain");
}

}  // namespace

int channels_after(const std::vector<AugmentStep>& pixel_ops, int channels) {
  for (const AugmentStep& step : pixel_ops) {
    if (const auto* g = std::get_if<spec::Grayscale>(&step.op); g != nullptr && g->num_output_channels == 1) {
      channels = 1;
    }
  }
  return channels;
}

ImageView run_pixel_ops(const std::vector<AugmentStep>& pixel_ops, ImageView image, const SampleKey& key) {
  for (const AugmentStep& step : pixel_ops) {
    CounterRng rng = rng_for(step, key);
    if (const auto* jitter = std::get_if<spec::ColorJitter>(&step.op)) {
      color_jitter(jitter->options, image, rng);
    } else if (const auto* grey = std::get_if<spec::Grayscale>(&step.op)) {
      if (grey->num_output_channels == 1) {
        image = grayscale_to_one_channel(image);
      } else {
        grayscale(image);
      }
    } else if (const auto* random_grey = std::get_if<spec::RandomGrayscale>(&step.op)) {
      if (rng.bernoulli(random_grey->probability)) grayscale(image);  // keeps the channels, as torchvision
    } else {
      not_a_pixel_op(step.op);
    }
  }
  return image;
}

void run_slot_ops(const std::vector<AugmentStep>& slot_ops, const SlotSample& slot, const SampleKey& key) {
  for (const AugmentStep& step : slot_ops) {
    CounterRng rng = rng_for(step, key);
    if (const auto* erasing = std::get_if<spec::RandomErasing>(&step.op)) {
      random_erasing(erasing->options, slot, rng);
    } else {
      not_a_pixel_op(step.op);
    }
  }
}

}  // namespace sluice::stages
