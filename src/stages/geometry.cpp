// Geometry planning: the per-axis affine state (source = offset + current * scale), the valid
// source range, and torchvision's parameter draws.
#include "stages/geometry.hpp"

#include <algorithm>
#include <cmath>

#include "sluice/core/error.hpp"
#include "sluice/core/rng.hpp"

namespace sluice::stages {

namespace {

// Python's round(): half to even.
int round_half_even(double v) { return static_cast<int>(std::nearbyint(v)); }

struct Axis {
  double offset = 0;  // source coordinate of the current image's leading edge
  double scale = 1;   // source pixels per current pixel
  int size = 0;       // current size
  int valid_lo = 0;   // source pixels the filter may use
  int valid_hi = 0;
};

class Planner {
 public:
  explicit Planner(Size2 image) {
    x_ = Axis{0, 1, image.width, 0, image.width};
    y_ = Axis{0, 1, image.height, 0, image.height};
  }

  void resize(int width, int height, const ResizeOptions& options) {
    x_.scale *= static_cast<double>(x_.size) / width;
    y_.scale *= static_cast<double>(y_.size) / height;
    x_.size = width;
    y_.size = height;
    plan_.filter = options.filter;
    plan_.antialias = options.antialias;
    resized_ = true;
  }

  // Crop [left, left + width) x [top, top + height) of the current image as the user sees it
  // (mirrored when a flip came before). May extend outside it: that part is padding.
  void crop(int left, int top, int width, int height) {
    if (plan_.flip) left = x_.size - left - width;
    crop_axis(x_, left, width);
    crop_axis(y_, top, height);
  }

  void flip() { plan_.flip = !plan_.flip; }
  void set_fill(std::uint8_t fill) { plan_.fill = fill; }
  int width() const { return x_.size; }
  int height() const { return y_.size; }

  GeometryPlan finish() {
    plan_.out = {x_.size, y_.size};
    plan_.x = AxisMap{x_.offset, x_.scale, x_.size, x_.valid_lo, x_.valid_hi};
    plan_.y = AxisMap{y_.offset, y_.scale, y_.size, y_.valid_lo, y_.valid_hi};
    return plan_;
  }

 private:
  void crop_axis(Axis& a, int start, int length) {
    const double new_offset = a.offset + start * a.scale;
    if (!resized_) {
      // Crop before any resize: a later resize filters within the crop only (torchvision's
      // crop-then-resize). Before a resize the mapping is integral, so this stays exact.
      const int lo = static_cast<int>(std::lround(new_offset));
      const int previous_lo = a.valid_lo;
      const int previous_hi = a.valid_hi;
      a.valid_lo = std::max(a.valid_lo, lo);
      a.valid_hi = std::min(a.valid_hi, lo + length);
      if (a.valid_hi <= a.valid_lo) {
        // Entirely in padding (random_crop with padding >= the crop can land there). The
        // resampler needs a non-empty range, so keep one pixel of the previous range on the
        // side the crop lies: outside the crop, so every output pixel stays padding, and
        // inside the image. (Taking the crop's own start put it past the right edge, and the
        // sample failed asking the decoder for pixels the image does not have: found by
        // fuzz/decode_fuzzer, tests/unit/stages/fuzz_regressions_test.cpp.)
        const int pixel = lo >= previous_hi ? previous_hi - 1 : previous_lo;
        a.valid_lo = pixel;
        a.valid_hi = pixel + 1;
      }
    }
    a.offset = new_offset;
    a.size = length;
  }

  Axis x_;
  Axis y_;
  GeometryPlan plan_;
  bool resized_ = false;
};

CounterRng rng_for(const GeometryStep& step, const SampleKey& key) {
  const std::uint64_t op_key = key.attempt == 0 ? step.key : derive_key(step.key, key.attempt);
  return CounterRng(op_key, static_cast<std::uint64_t>(key.item), static_cast<std::uint32_t>(key.epoch));
}

void random_resized_crop(Planner& p, const spec::RandomResizedCrop& op, CounterRng& rng) {
  const int width = p.width();
  const int height = p.height();
  const double area = static_cast<double>(width) * height;
  const auto& o = op.options;
  const double log_lo = std::log(o.ratio_min);
  const double log_hi = std::log(o.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.uniform(o.scale_min, o.scale_max);
    const double aspect = std::exp(rng.uniform(log_lo, log_hi));
    const int w = round_half_even(std::sqrt(target * aspect));
    const int h = round_half_even(std::sqrt(target / aspect));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const int top = static_cast<int>(rng.below(static_cast<std::uint64_t>(height - h + 1)));
      const int left = static_cast<int>(rng.below(static_cast<std::uint64_t>(width - w + 1)));
      p.crop(left, top, w, h);
      p.resize(op.width, op.height, o.resize);
      return;
    }
  }
  // torchvision's fallback: the largest centred crop within the ratio range.
  const double in_ratio = static_cast<double>(width) / height;
  int w = width;
  int h = height;
  if (in_ratio < o.ratio_min) {
    h = round_half_even(w / o.ratio_min);
  } else if (in_ratio > o.ratio_max) {
    w = round_half_even(h * o.ratio_max);
  }
  p.crop((width - w) / 2, (height - h) / 2, w, h);
  p.resize(op.width, op.height, o.resize);
}

int center_offset(int size, int crop) {
  if (crop > size) return -((crop - size) / 2);  // torchvision pads, then crops the centre
  return round_half_even((size - crop) / 2.0);
}

}  // namespace

GeometryPlan plan_geometry(const std::vector<GeometryStep>& steps, Size2 image, const SampleKey& key) {
  Planner p(image);
  for (const GeometryStep& step : steps) {
    if (const auto* op = std::get_if<spec::ResizeShorter>(&step.op)) {
      const int w = p.width();
      const int h = p.height();
      // torchvision: the shorter side becomes `size`, the longer int(size * long / short).
      if (w <= h) {
        p.resize(op->size, static_cast<int>(static_cast<std::int64_t>(op->size) * h / w), op->options);
      } else {
        p.resize(static_cast<int>(static_cast<std::int64_t>(op->size) * w / h), op->size, op->options);
      }
    } else if (const auto* op = std::get_if<spec::Resize>(&step.op)) {
      p.resize(op->width, op->height, op->options);
    } else if (const auto* op = std::get_if<spec::CenterCrop>(&step.op)) {
      p.crop(center_offset(p.width(), op->width), center_offset(p.height(), op->height), op->width,
             op->height);
    } else if (const auto* op = std::get_if<spec::RandomResizedCrop>(&step.op)) {
      CounterRng rng = rng_for(step, key);
      random_resized_crop(p, *op, rng);
    } else if (const auto* op = std::get_if<spec::RandomCrop>(&step.op)) {
      const int pad = op->options.padding;
      const int padded_w = p.width() + 2 * pad;
      const int padded_h = p.height() + 2 * pad;
      if (op->width > padded_w || op->height > padded_h) {
        throw Error(ErrorCode::kInvalidArgument,
                    "random_crop(" + std::to_string(op->width) + "x" + std::to_string(op->height) +
                        ") is larger than the " + std::to_string(padded_w) + "x" +
                        std::to_string(padded_h) + " image it follows (after padding " +
                        std::to_string(pad) + ")");
      }
      CounterRng rng = rng_for(step, key);
      const int top = static_cast<int>(rng.below(static_cast<std::uint64_t>(padded_h - op->height + 1)));
      const int left = static_cast<int>(rng.below(static_cast<std::uint64_t>(padded_w - op->width + 1)));
      p.crop(left - pad, top - pad, op->width, op->height);
      p.set_fill(op->options.fill);
    } else if (const auto* op = std::get_if<spec::FlipHorizontal>(&step.op)) {
      CounterRng rng = rng_for(step, key);
      if (rng.bernoulli(op->probability)) p.flip();
    }
  }
  return p.finish();
}

GeometryPlan scale_plan(const GeometryPlan& plan, Size2 image, int denom) {
  if (denom == 1) return plan;
  GeometryPlan scaled = plan;
  const double d = denom;
  const auto scale_axis = [d, denom](AxisMap& a, int full) {
    const int scaled_size = (full + denom - 1) / denom;
    a.origin /= d;
    a.scale /= d;
    a.valid_lo = a.valid_lo == 0 ? 0 : std::min(scaled_size - 1, static_cast<int>(std::lround(a.valid_lo / d)));
    a.valid_hi = a.valid_hi >= full ? scaled_size : static_cast<int>(std::lround(a.valid_hi / d));
    a.valid_hi = std::clamp(a.valid_hi, a.valid_lo + 1, scaled_size);
  };
  scale_axis(scaled.x, image.width);
  scale_axis(scaled.y, image.height);
  return scaled;
}

int choose_denom(const GeometryPlan& plan) {
  for (int denom : {8, 4, 2}) {
    if (plan.x.scale >= denom && plan.y.scale >= denom) return denom;
  }
  return 1;
}

StaticGeometry analyse_geometry(const std::vector<GeometryStep>& steps) {
  // Track what is known of the current size: both sides, or only the shorter one.
  std::optional<Size2> size;
  std::optional<int> shorter;
  StaticGeometry result;
  const auto crop_check = [&](const char* name, int w, int h, int pad) -> bool {
    const auto say = [&](const std::string& what) {
      result.error = std::string(name) + "(" + std::to_string(w) + "x" + std::to_string(h) +
                     ") is larger than " + what +
                     ": crop to at most that size, or resize to at least the crop first";
    };
    if (size && (w > size->width + 2 * pad || h > size->height + 2 * pad)) {
      say("the " + std::to_string(size->width + 2 * pad) + "x" +
          std::to_string(size->height + 2 * pad) + " image it follows");
      return false;
    }
    if (shorter && std::min(w, h) > *shorter + 2 * pad) {
      say("the shorter side (" + std::to_string(*shorter + 2 * pad) + ") of the image it follows");
      return false;
    }
    return true;
  };
  for (const GeometryStep& step : steps) {
    if (const auto* op = std::get_if<spec::ResizeShorter>(&step.op)) {
      size.reset();
      shorter = op->size;
    } else if (const auto* op = std::get_if<spec::Resize>(&step.op)) {
      size = Size2{op->width, op->height};
      shorter.reset();
    } else if (const auto* op = std::get_if<spec::CenterCrop>(&step.op)) {
      if (!crop_check("center_crop", op->width, op->height, 0)) return result;
      size = Size2{op->width, op->height};
      shorter.reset();
    } else if (const auto* op = std::get_if<spec::RandomResizedCrop>(&step.op)) {
      size = Size2{op->width, op->height};
      shorter.reset();
    } else if (const auto* op = std::get_if<spec::RandomCrop>(&step.op)) {
      if (!crop_check("random_crop", op->width, op->height, op->options.padding)) return result;
      size = Size2{op->width, op->height};
      shorter.reset();
    }
  }
  result.out = size;
  return result;
}

}  // namespace sluice::stages
