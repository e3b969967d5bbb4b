// Geometry planning: composes a chain of image ops (resize_shorter, resize, center_crop,
// random_resized_crop, random_crop with padding, flip_horizontal, flip_vertical: each stage whose descriptor has a
// GeometryRule, src/pipeline/descriptors/) into ONE mapping from output
// pixels to source pixels, per sample, from the image's header alone. This is what lets the
// fused sample task decode only the region and the DCT scale the output needs (docs/design.md
// principle 2) and resample exactly once.
//
// Semantics follow torchvision's transforms on PIL images: the sizes, crop offsets and random
// parameters are torchvision's; a crop before any resize limits the later resize's filter taps to
// the crop (crop-then-resize), a resize before a crop lets them reach the rest of the image
// (resize-then-crop), padding is `fill`. Two resizes in a chain compose into one resampling.
#pragma once

#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "sluice/detail/core/image.hpp"
#include "sluice/pipeline/spec.hpp"
#include "stages/image/resample.hpp"

namespace sluice::stages {

// An image op: a stage whose descriptor has a GeometryRule (src/pipeline/stage_registry.hpp);
// resolve_pipeline puts only those here.
using GeometryOp = spec::Stage;

struct GeometryStep {
  GeometryOp op;
  std::uint64_t key = 0;  // random stream of this op (derived from its seed and position)
};

// Which sample a plan is for; every random draw is keyed on it, never on thread or time.
struct SampleKey {
  std::int64_t epoch = 0;
  std::int64_t item = 0;     // index of the item in the data set
  std::uint32_t attempt = 0; // > 0 when the sample replaces a bad one (OnError::kSkip)
};

struct SampleGeometry {
  Size2 out;
  AxisMap x;               // in full-resolution source pixels
  AxisMap y;
  Filter filter = Filter::kBilinear;
  bool antialias = true;
  std::uint8_t fill = 0;
  bool flip = false;       // mirror the output horizontally when writing it
  bool flip_vertical = false;  // mirror it vertically when writing it (rows read bottom-up)
};

// Plans one sample. Throws sluice::Error(kInvalidArgument) when an op cannot apply to this image
// (a random crop larger than the padded image).
SampleGeometry plan_geometry(const std::vector<GeometryStep>& steps, Size2 image, const SampleKey& key);

// The plan re-expressed for an image decoded at 1/denom.
SampleGeometry scale_plan(const SampleGeometry& plan, Size2 image, int denom);

// The largest DCT scale denominator (8, 4, 2 or 1) that still leaves at least one decoded pixel
// per output pixel on both axes, so DCT scaling never costs resolution the output keeps.
int choose_denom(const SampleGeometry& plan);

// What can be known about a chain's output before seeing an image.
struct StaticGeometry {
  std::optional<Size2> out;         // fixed output size, if the chain fixes it
  std::optional<std::string> error; // a configuration that can never work, said for the user
};
StaticGeometry analyse_geometry(const std::vector<GeometryStep>& steps);

}  // namespace sluice::stages
