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
#include <utility>
#include <vector>

#include "sluice/detail/core/image.hpp"
#include "sluice/pipeline/options.hpp"

namespace sluice::stages {

enum class ResampleIsa : std::uint8_t;  // which kernel set run() uses; see resample_kernels.hpp

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
  // What the memory plan reserves for scratch_bytes() before any geometry is known: the ring of
  // intermediate rows, per output row byte. Generous (a row ring holds twice the vertical taps,
  // rarely over 16 rows); a sample that needs more grows its scratch from free budget.
  static std::uint64_t workspace_requirements(std::uint64_t out_row_bytes) { return out_row_bytes * 16; }

  // src holds source pixels [src_x0, src_x0 + src.width) x [src_y0, src_y0 + src.height), which
  // must contain footprint(); dst is out_size x out_size with params.channels channels.
  void run(ConstImageView src, int src_x0, int src_y0, ImageView dst,
           std::span<std::uint8_t> scratch) const;

  // The same for output rows [row_begin, row_end) only, so a source decoded in row bands can be
  // resampled band by band with run()'s pixels: src need hold only the rows those read
  // (source_rows()) and footprint()'s columns; other rows of dst are left alone.
  void run_rows(ConstImageView src, int src_x0, int src_y0, ImageView dst, int row_begin, int row_end,
                std::span<std::uint8_t> scratch) const;
  // The source rows [first, end) output row `o` reads; first == end for a row of padding.
  std::pair<int, int> source_rows(int o) const;

 private:
  friend struct ResamplerTestPeer;  // resample_kernels.hpp: tests and benches pick the kernel set

  // Tap tables of one axis; see resample.cpp.
  struct Axis {
    std::vector<std::int32_t> first;    // per output pixel: first source tap (unused for padding)
    std::vector<std::int32_t> count;    // per output pixel: number of taps (0 for padding)
    std::vector<std::int32_t> weights;  // per output pixel: `stride` fixed-point weights
    std::vector<std::int32_t> lanes;    // x only: the SIMD weight table, split lo/hi 16-bit pairs (resample_kernels.hpp)
    std::vector<double> raw;            // setup's per-pixel workspace (unnormalised weights)
    int stride = 0;                     // taps reserved per output pixel
    int groups = 0;                     // x only: pmaddwd units per output pixel (resample_kernels.hpp)
    int begin = 0;                      // output pixels [begin, end) are not padding
    int end = 0;
    int lo = 0;                         // footprint: source pixels [lo, hi)
    int hi = 0;
    int max_count = 0;                  // most taps any output pixel uses
    bool monotone = true;               // first and first + count never decrease with the output
    bool identity = false;              // one tap of weight 1 per pixel, consecutive: a copy
  };
  void build_axis(const AxisMap& map, Axis& axis) const;
  void build_lanes(Axis& axis) const;
  int ring_rows() const;
  // The source rows [lo, hi) output rows [first_row, last_row) read (all inside [y_.begin, y_.end)).
  std::pair<int, int> rows_read(int first_row, int last_row) const;
  void fill_padding(ImageView dst, int row_begin, int row_end) const;

  ResampleParams params_;
  Axis x_;
  Axis y_;
  ResampleIsa isa_{};  // kAuto: the fastest kernels this CPU runs
};

}  // namespace sluice::stages
