// Resampler: the resize kernel behind every geometric op. One separable pass pair computes the
// output directly from the decoded source, whatever chain of resize, crop, pad and flip produced
// the mapping (the geometry planner composes them), so a sample is resampled exactly once.
//
// Filters follow Pillow's resampling (the reference the tests compare against): source pixel i
// covers [i, i + 1); output pixel o samples around centre = origin + (o + 0.5) * scale; with
// antialias and scale > 1 the filter support widens by scale; taps outside the valid source range
// are dropped and the remaining weights renormalised. Fixed-point weights; horizontal pass first,
// over only the source rows the vertical pass needs.
//
// Setup, then run: setup() builds the tap tables in storage it reuses (no allocation once warmed
// up to the largest geometry), footprint() tells the decoder which source pixels are needed,
// run() writes into memory the caller owns.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sluice/core/image.hpp"
#include "sluice/pipeline/options.hpp"

namespace sluice::stages {

// The mapping of one axis, in source pixels.
struct AxisMap {
  double origin = 0;  // source coordinate of the output's leading edge
  double scale = 1;   // source pixels per output pixel, > 0
  int out_size = 0;
  int valid_lo = 0;   // source pixels [valid_lo, valid_hi) exist; output pixels whose centre lies
  int valid_hi = 0;   // outside are padding and get ResampleParams::fill
};

struct ResampleParams {
  AxisMap x;
  AxisMap y;
  int channels = 3;
  Filter filter = Filter::kBilinear;
  bool antialias = true;
  std::uint8_t fill = 0;
};

class Resampler {
 public:
  void setup(const ResampleParams& params);

  // The source pixels run() reads, as a rectangle in source coordinates (empty if none).
  Rect footprint() const;
  std::size_t scratch_bytes() const;

  // src holds source pixels [src_x0, src_x0 + src.width) x [src_y0, src_y0 + src.height), which
  // must contain footprint(); dst is out_size x out_size with params.channels channels.
  void run(ConstImageView src, int src_x0, int src_y0, ImageView dst,
           std::span<std::uint8_t> scratch) const;

 private:
  // Implementation state (tap tables); see resample.cpp.
  struct Axis {
    std::vector<std::int32_t> first;    // per output pixel: first source tap, or -1 for padding
    std::vector<std::int32_t> count;    // per output pixel: number of taps
    std::vector<std::int32_t> weights;  // per output pixel: `stride` fixed-point weights
    int stride = 0;                     // taps reserved per output pixel
    int lo = 0;                         // footprint
    int hi = 0;
    bool identity = false;              // scale 1 at an integer offset: a copy
  };
  ResampleParams params_;
  Axis x_;
  Axis y_;
};

}  // namespace sluice::stages
