// Geometry planning: the per-axis affine state (source = offset + current * scale) and the valid
// source range; what each op does to it, torchvision's parameter draws included, is its
// descriptor's GeometryRule (src/pipeline/descriptors/).
#include "stages/image/geometry.hpp"

#include <algorithm>
#include <cmath>

#include "pipeline/stage_registry.hpp"
#include "sluice/core/rng.hpp"

namespace sluice::stages {

namespace {

struct Axis {
  double offset = 0;  // source coordinate of the current image's leading edge
  double scale = 1;   // source pixels per current pixel
  int size = 0;       // current size
  int valid_lo = 0;   // source pixels the filter may use
  int valid_hi = 0;
};

// One sample's mapping, composed op by op: each op's descriptor drives it as a GeometryCanvas.
class Planner final : public schema::GeometryCanvas {
 public:
  explicit Planner(Size2 image) {
    x_ = Axis{0, 1, image.width, 0, image.width};
    y_ = Axis{0, 1, image.height, 0, image.height};
  }

  void resize(int width, int height, const ResizeOptions& options) override {
    x_.scale *= static_cast<double>(x_.size) / width;
    y_.scale *= static_cast<double>(y_.size) / height;
    x_.size = width;
    y_.size = height;
    plan_.filter = options.filter;
    plan_.antialias = options.antialias;
    resized_ = true;
  }

  // Crop [left, left + width) x [top, top + height) of the current image as the user sees it
  // (mirrored when a flip came before, on either axis). May extend outside it: that part is padding.
  void crop(int left, int top, int width, int height) override {
    if (plan_.flip) left = x_.size - left - width;
    if (plan_.flip_vertical) top = y_.size - top - height;
    crop_axis(x_, left, width);
    crop_axis(y_, top, height);
  }

  void flip() override { plan_.flip = !plan_.flip; }
  void flip_vertical() override { plan_.flip_vertical = !plan_.flip_vertical; }
  void set_fill(std::uint8_t fill) override { plan_.fill = fill; }
  int width() const override { return x_.size; }
  int height() const override { return y_.size; }

  SampleGeometry finish() {
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
  SampleGeometry plan_;
  bool resized_ = false;
};

CounterRng rng_for(const GeometryStep& step, const SampleKey& key) {
  const std::uint64_t op_key = key.attempt == 0 ? step.key : derive_key(step.key, key.attempt);
  return CounterRng(op_key, static_cast<std::uint64_t>(key.item), static_cast<std::uint32_t>(key.epoch));
}

}  // namespace

SampleGeometry plan_geometry(const std::vector<GeometryStep>& steps, Size2 image, const SampleKey& key) {
  Planner p(image);
  for (const GeometryStep& step : steps) {
    const schema::GeometryRule* rule = schema::descriptor_of(step.op).geometry;
    if (rule == nullptr) continue;  // not an image op: nothing to compose
    CounterRng rng = rng_for(step, key);
    rule->plan(step.op, p, rng);
  }
  return p.finish();
}

SampleGeometry scale_plan(const SampleGeometry& plan, Size2 image, int denom) {
  if (denom == 1) return plan;
  SampleGeometry scaled = plan;
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

int choose_denom(const SampleGeometry& plan) {
  for (int denom : {8, 4, 2}) {
    if (plan.x.scale >= denom && plan.y.scale >= denom) return denom;
  }
  return 1;
}

StaticGeometry analyse_geometry(const std::vector<GeometryStep>& steps) {
  schema::KnownExtent extent;
  for (const GeometryStep& step : steps) {
    const schema::GeometryRule* rule = schema::descriptor_of(step.op).geometry;
    if (rule == nullptr) continue;
    rule->analyse(step.op, extent);
    if (extent.error) return StaticGeometry{.out = std::nullopt, .error = extent.error};
  }
  return StaticGeometry{.out = extent.size, .error = std::nullopt};
}

}  // namespace sluice::stages
