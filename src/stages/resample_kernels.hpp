// Resample kernels: the two inner loops of Resampler::run (one horizontal output row, one vertical
// output row), once per instruction set (portable scalar, SSE4.1, AVX2) behind one table, so run()
// picks a set at run time and the tests can compare every set against the scalar one bit for bit.
// Internal to src/stages; tests and benches reach it through ResamplerTestPeer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "stages/resample.hpp"

namespace sluice::stages {

enum class ResampleIsa : std::uint8_t {
  kAuto,    // the fastest set this CPU runs (the default)
  kScalar,  // portable C++, the reference the SIMD sets must equal
  kSse41,
  kAvx2,
};

const char* to_string(ResampleIsa isa);

namespace resample_detail {

// Pillow's fixed point: 22 fractional bits leave 8 bits of pixel and 2 of headroom in an int32,
// and the weights are non-negative (triangle and box), so no partial sum can overflow. Integer
// sums are exact in any order, which is what makes every kernel set bit-exact with the others.
inline constexpr int kPrecisionBits = 22;
inline constexpr std::int32_t kOne = std::int32_t{1} << kPrecisionBits;
inline constexpr std::int32_t kHalf = std::int32_t{1} << (kPrecisionBits - 1);

// The SIMD horizontal kernels read a pixel row 8 bytes at a time ("a group"): 8 taps of a grey
// row, or 2 taps (6 or 8 bytes) of an RGB or RGBA row. The lane table holds one weight per byte of
// each group (0 for bytes past the group's taps), so a group is one widening load and one multiply.
inline constexpr int kGroupBytes = 8;
constexpr int taps_per_group(int channels) { return kGroupBytes / channels; }

// The horizontal taps of one output row.
struct HorizontalTaps {
  int count = 0;  // output pixels
  int channels = 0;
  const std::int32_t* first = nullptr;    // per output pixel: source x of the first tap
  const std::int32_t* taps = nullptr;     // per output pixel: number of taps (>= 1)
  const std::int32_t* weights = nullptr;  // per output pixel: `stride` weights (scalar kernels)
  int stride = 0;
  // SIMD kernels: per output pixel `groups` groups of kGroupBytes weights. Every pixel has the
  // same number of groups (the most any pixel needs, zero weights past its taps), so the inner
  // loop's trip count never changes and never mispredicts.
  const std::int32_t* lanes = nullptr;
  int groups = 0;
};

// dst[o * channels + c] for o < taps.count. `src` is a source row whose first byte is source pixel
// src_x0; only its first src_bytes bytes may be read.
using HorizontalFn = void (*)(const std::uint8_t* src, int src_x0, int src_bytes,
                              const HorizontalTaps& taps, std::uint8_t* dst);
// dst[i] = clip(sum over t < taps of rows[t * stride + i] * weights[t]) for i < bytes.
using VerticalFn = void (*)(const std::uint8_t* rows, std::ptrdiff_t stride,
                            const std::int32_t* weights, int taps, int bytes, std::uint8_t* dst);

struct Kernels {
  HorizontalFn horizontal = nullptr;
  VerticalFn vertical = nullptr;
};

// The set for `isa` (kAuto: the best this CPU runs), or nullptr when this CPU cannot run it.
const Kernels* kernels_for(ResampleIsa isa);

// Pillow's rounding and clipping of a fixed-point sum to a byte.
inline std::uint8_t clip_fixed(std::int32_t sum) {
  const std::int32_t v = sum >> kPrecisionBits;
  return static_cast<std::uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

void horizontal_sse41(const std::uint8_t* src, int src_x0, int src_bytes,
                      const HorizontalTaps& taps, std::uint8_t* dst);
void vertical_sse41(const std::uint8_t* rows, std::ptrdiff_t stride, const std::int32_t* weights,
                    int taps, int bytes, std::uint8_t* dst);
void horizontal_avx2(const std::uint8_t* src, int src_x0, int src_bytes, const HorizontalTaps& taps,
                     std::uint8_t* dst);
void vertical_avx2(const std::uint8_t* rows, std::ptrdiff_t stride, const std::int32_t* weights,
                   int taps, int bytes, std::uint8_t* dst);

}  // namespace resample_detail

// What tests and benches may see of a Resampler: which kernel set it runs, and its tables' storage
// (to check that setup() stops allocating once warmed up).
struct ResamplerTestPeer {
  // Throws sluice::Error(kInvalidArgument) at run() if this CPU cannot run `isa`.
  static void set_isa(Resampler& r, ResampleIsa isa) { r.isa_ = isa; }
  static bool supported(ResampleIsa isa) { return resample_detail::kernels_for(isa) != nullptr; }
  // Data pointers and capacities of every table, in a fixed order.
  static std::vector<std::pair<const void*, std::size_t>> storage(const Resampler& r) {
    std::vector<std::pair<const void*, std::size_t>> out;
    for (const Resampler::Axis* a : {&r.x_, &r.y_}) {
      out.emplace_back(a->first.data(), a->first.capacity());
      out.emplace_back(a->count.data(), a->count.capacity());
      out.emplace_back(a->weights.data(), a->weights.capacity());
      out.emplace_back(a->lanes.data(), a->lanes.capacity());
      out.emplace_back(a->raw.data(), a->raw.capacity());
    }
    return out;
  }
  // Makes run() resample every footprint row up front instead of through the ring, the path it
  // takes when output rows' taps do not advance monotonically (after the next setup(), undone).
  static void disable_ring(Resampler& r) { r.y_.monotone = false; }
  static bool identity_x(const Resampler& r) { return r.x_.identity; }
  static bool identity_y(const Resampler& r) { return r.y_.identity; }
};

}  // namespace sluice::stages
