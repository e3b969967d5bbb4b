// Resample kernels: the two inner loops of Resampler::run (one horizontal output row, one vertical
// output row), once per instruction set (portable scalar, SSE4.1, AVX2) behind one table, so run()
// picks a set at run time and the tests can compare every set against the scalar one bit for bit.
// Internal to src/stages; tests and benches reach it through ResamplerTestPeer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "stages/image/resample.hpp"

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

// The SIMD horizontal kernels multiply with pmaddwd (16-bit pairs summed into int32 lanes: one
// fast uop for 16 products, where pmulld is two slow uops for 8). Each 22-bit weight is split
// exactly as w = hi * 2^15 + lo with lo in [0, 2^15) and hi in [0, 2^7] (2^7 only for w = 2^22),
// both within pmaddwd's signed 16 bits, and sum = (sum of p * hi) << 15 + sum of p * lo. As
// 0 <= lo <= w and 0 <= hi << 15 <= w, neither partial sum exceeds the whole one: no overflow.
inline constexpr int kSplitBits = 15;
inline constexpr std::int32_t kSplitMask = (std::int32_t{1} << kSplitBits) - 1;

// A unit is what one pmaddwd covers in one 128-bit lane: 2 taps of one colour pixel (one int32
// lane per channel; RGB leaves the 4th lane empty) or 4 taps of each of two grey pixels (two int32
// lanes per pixel).
constexpr int taps_per_unit(int channels) { return channels == 1 ? 4 : 2; }
constexpr int pixels_per_lane(int channels) { return channels == 1 ? 2 : 1; }
// A block is the pixels of one 256-bit vector, two 128-bit lanes: 2 colour or 4 grey pixels.
constexpr int pixels_per_block(int channels) { return 2 * pixels_per_lane(channels); }
// int32 words of the weight table per block and unit: the lo pairs of both lanes (8 words), then
// the hi pairs (8 words). A word holds two 16-bit weights, the earlier tap in the low half.
inline constexpr int kUnitWords = 16;
// Blocks in the table for `pixels` output pixels: rounded up to an even count, zero-weighted past
// the last pixel, so a kernel may take blocks two at a time without a remainder loop.
constexpr std::size_t table_blocks(std::size_t pixels, int channels) {
  const auto per_pair = static_cast<std::size_t>(2 * pixels_per_block(channels));
  return (pixels + per_pair - 1) / per_pair * 2;
}

// The horizontal taps of one output row.
struct HorizontalTaps {
  int count = 0;  // output pixels
  int channels = 0;
  const std::int32_t* first = nullptr;    // per output pixel: source x of the first tap
  const std::int32_t* taps = nullptr;     // per output pixel: number of taps (>= 1)
  const std::int32_t* weights = nullptr;  // per output pixel: `stride` weights (scalar kernels)
  int stride = 0;
  // SIMD kernels: table_blocks(count) blocks of `units` units of kUnitWords words (block b holds
  // output pixels b * pixels_per_block onward, lane 0 first; its unit u is at
  // (b * units + u) * kUnitWords). Every pixel has the same number of units (the most any
  // pixel needs, zero weights past its taps), so the inner loop's trip count never changes and
  // never mispredicts. Within a lane, a colour pixel's unit u repeats the pair (2u, 2u + 1) in
  // all 4 words; grey pixels take 2 words each, pairs (4u, 4u + 1) and (4u + 2, 4u + 3).
  const std::int32_t* lanes = nullptr;
  int units = 0;
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
