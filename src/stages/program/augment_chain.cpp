// The augmentation chain (augment_chain.hpp): each op's draws, torchvision's, then its kernel.
#include "stages/program/augment_chain.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>

#include "sluice/core/error.hpp"
#include "sluice/core/rng.hpp"
#include "stages/augment/blur.hpp"
#include "stages/augment/color.hpp"
#include "stages/augment/point_ops.hpp"
#include "stages/augment/policy.hpp"

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

WarpInterpolation interpolation_of(const WarpOptions& w) {
  return w.interpolation == WarpFilter::kBilinear ? WarpInterpolation::kBilinear : WarpInterpolation::kNearest;
}

// A warp into the workspace's second image, copied back: the kernels take no overlap.
template <class Warp>
void warp_in_place(ImageView image, std::span<std::byte> workspace, Warp warp) {
  const std::size_t row = static_cast<std::size_t>(image.width) * image.channels;
  const ImageView spare{reinterpret_cast<std::uint8_t*>(workspace.data()), image.width, image.height, image.channels,
                        static_cast<std::ptrdiff_t>(row)};
  warp(ConstImageView(image), spare);
  for (int y = 0; y < image.height; ++y) std::memcpy(image.row(y), spare.row(y), row);
}

// torchvision's RandomAffine.get_params, then F.affine.
void random_affine(const spec::RandomAffine& s, ImageView image, std::span<std::byte> workspace, CounterRng& rng) {
  const RandomAffineOptions& o = s.options;
  AffineParams p;
  p.angle = rng.uniform(s.degrees.min, s.degrees.max);
  if (o.translate_x != 0 || o.translate_y != 0) {
    const double max_dx = o.translate_x * image.width;
    const double max_dy = o.translate_y * image.height;
    p.translate_x = std::nearbyint(rng.uniform(-max_dx, max_dx));  // int(round(...))
    p.translate_y = std::nearbyint(rng.uniform(-max_dy, max_dy));
  }
  if (!(o.scale.min == 1 && o.scale.max == 1)) p.scale = rng.uniform(o.scale.min, o.scale.max);
  if (!(o.shear_x.min == 0 && o.shear_x.max == 0)) p.shear_x = rng.uniform(o.shear_x.min, o.shear_x.max);
  if (!(o.shear_y.min == 0 && o.shear_y.max == 0)) p.shear_y = rng.uniform(o.shear_y.min, o.shear_y.max);
  p.center_x = o.center_x;
  p.center_y = o.center_y;
  warp_in_place(image, workspace, [&](ConstImageView src, ImageView dst) {
    affine(src, dst, p, interpolation_of(o.warp), o.warp.fill);
  });
}

// The random point ops and the blur: a draw, then the kernel in place.
bool point_op(const spec::Stage& op, ImageView image, std::span<std::byte> workspace, CounterRng& rng) {
  if (const auto* s = std::get_if<spec::RandomPosterize>(&op)) {
    if (rng.uniform() < s->probability) posterize(image, image, s->bits);
  } else if (const auto* s = std::get_if<spec::RandomSolarize>(&op)) {
    if (rng.uniform() < s->probability) solarize(image, image, s->threshold);
  } else if (const auto* s = std::get_if<spec::RandomInvert>(&op)) {
    if (rng.uniform() < s->probability) invert(image, image);
  } else if (const auto* s = std::get_if<spec::RandomAutocontrast>(&op)) {
    if (rng.uniform() < s->probability) autocontrast(image, image);
  } else if (const auto* s = std::get_if<spec::RandomEqualize>(&op)) {
    if (rng.uniform() < s->probability) equalize(image, image);
  } else if (const auto* s = std::get_if<spec::RandomAdjustSharpness>(&op)) {
    if (rng.uniform() < s->probability) {
      adjust_sharpness(image, image, static_cast<float>(s->sharpness_factor), workspace);
    }
  } else if (const auto* s = std::get_if<spec::GaussianBlur>(&op)) {
    const double sigma = rng.uniform(s->sigma.min, s->sigma.max);
    gaussian_blur(image, image, GaussianBlurParams{s->kernel_width, s->kernel_height, sigma, sigma}, workspace);
  } else {
    return false;
  }
  return true;
}

// The policies: each draws its steps, then torchvision's _apply_op for each.
bool policy(const spec::Stage& op, ImageView image, std::span<std::byte> workspace, CounterRng& rng) {
  const Size2 size{image.width, image.height};
  if (const auto* s = std::get_if<spec::TrivialAugmentWide>(&op)) {
    apply_policy_step(trivial_augment_wide_step(s->num_magnitude_bins, rng), image, interpolation_of(s->options),
                      s->options.fill, workspace);
  } else if (const auto* s = std::get_if<spec::RandAugment>(&op)) {
    for (int i = 0; i < s->num_ops; ++i) {
      apply_policy_step(rand_augment_step(s->magnitude, s->num_magnitude_bins, size, rng), image,
                        interpolation_of(s->options), s->options.fill, workspace);
    }
  } else if (const auto* s = std::get_if<spec::AutoAugment>(&op)) {
    const auto table = s->policy == AutoAugmentPolicy::kCifar10 ? AutoAugmentTable::kCifar10 : AutoAugmentTable::kImageNet;
    for (const PolicyStep& step : auto_augment_steps(table, size, rng)) {
      apply_policy_step(step, image, interpolation_of(s->options), s->options.fill, workspace);
    }
  } else {
    return false;
  }
  return true;
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

std::size_t pixel_ops_workspace_bytes(const std::vector<AugmentStep>& pixel_ops, Size2 size, int channels) {
  const std::size_t image = static_cast<std::size_t>(size.width) * size.height * channels;
  std::size_t most = 0;
  for (const AugmentStep& step : pixel_ops) {
    std::size_t need = 0;
    if (std::holds_alternative<spec::RandomRotation>(step.op) || std::holds_alternative<spec::RandomAffine>(step.op)) {
      need = image;
    } else if (const auto* blur = std::get_if<spec::GaussianBlur>(&step.op)) {
      need = gaussian_blur_workspace_bytes(size, channels, {blur->kernel_width, blur->kernel_height, 1.0, 1.0});
    } else if (std::holds_alternative<spec::RandomAdjustSharpness>(step.op)) {
      need = sharpness_workspace_bytes(size, channels);
    } else if (std::holds_alternative<spec::TrivialAugmentWide>(step.op) ||
               std::holds_alternative<spec::RandAugment>(step.op) || std::holds_alternative<spec::AutoAugment>(step.op)) {
      need = policy_workspace_bytes(size, channels);
    }
    most = std::max(most, need);
  }
  return most;
}

ImageView run_pixel_ops(const std::vector<AugmentStep>& pixel_ops, ImageView image, std::span<std::byte> workspace,
                        const SampleKey& key) {
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
    } else if (const auto* rotation = std::get_if<spec::RandomRotation>(&step.op)) {
      const double angle = rng.uniform(rotation->degrees.min, rotation->degrees.max);
      const RandomRotationOptions& o = rotation->options;
      warp_in_place(image, workspace, [&](ConstImageView src, ImageView dst) {
        rotate(src, dst, angle, interpolation_of(o.warp), o.warp.fill, o.center_x, o.center_y);
      });
    } else if (const auto* affine_op = std::get_if<spec::RandomAffine>(&step.op)) {
      random_affine(*affine_op, image, workspace, rng);
    } else if (!point_op(step.op, image, workspace, rng) && !policy(step.op, image, workspace, rng)) {
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
