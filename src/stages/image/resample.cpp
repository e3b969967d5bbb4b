// Resampler: builds Pillow-style fixed-point tap tables for both axes (setup) and runs the
// separable pass pair (run): horizontal first, into a small ring of rows, then vertical into dst,
// with copy fast paths for axes that are a plain copy. The portable scalar kernels and the
// run-time choice of kernel set live here; the SIMD kernels are in resample_sse41.cpp and
// resample_avx2.cpp.
#include "stages/image/resample.hpp"

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstring>
#include <string>

#include "sluice/core/error.hpp"
#include "stages/image/resample_kernels.hpp"

namespace sluice::stages {

namespace rd = resample_detail;

namespace {

[[noreturn]] void invalid(const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, "resample: " + what);
}

void check_axis(const AxisMap& a, const char* name) {
  const std::string n = name;
  if (a.out_size <= 0) {
    invalid(n + ".out_size must be > 0, got " + std::to_string(a.out_size));
  }
  if (!(std::isfinite(a.scale) && a.scale > 0)) {
    invalid(n + ".scale must be finite and > 0, got " + std::to_string(a.scale));
  }
  if (!std::isfinite(a.origin)) invalid(n + ".origin must be finite");
  if (a.valid_lo >= a.valid_hi ||
      static_cast<std::int64_t>(a.valid_hi) - a.valid_lo > std::int64_t{INT_MAX}) {
    invalid(n + ".valid_lo (" + std::to_string(a.valid_lo) + ") must be < valid_hi (" +
            std::to_string(a.valid_hi) + "), at most INT_MAX apart");
  }
}

// Pillow's BOX (half-open on the left, so a centre exactly between two pixels takes the right one)
// and BILINEAR (triangle) filters.
double box_filter(double x) { return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0; }
double triangle_filter(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// floor() for values already clamped into int range: std::floor is a libm call on baseline
// x86-64, and setup() runs once per sample.
int floor_to_int(double v) {
  const int i = static_cast<int>(v);
  return i - (static_cast<double>(i) > v ? 1 : 0);
}

template <int C>
void horizontal_scalar_c(const std::uint8_t* src, int src_x0, int /*src_bytes*/,
                         const rd::HorizontalTaps& t, std::uint8_t* dst) {
  for (int o = 0; o < t.count; ++o) {
    const std::uint8_t* p = src + static_cast<std::ptrdiff_t>(t.first[o] - src_x0) * C;
    const std::int32_t* w = t.weights + static_cast<std::ptrdiff_t>(o) * t.stride;
    const int n = t.taps[o];
    std::int32_t sum[C];
    for (int c = 0; c < C; ++c) sum[c] = rd::kHalf;
    for (int i = 0; i < n; ++i) {
      for (int c = 0; c < C; ++c) sum[c] += p[i * C + c] * w[i];
    }
    for (int c = 0; c < C; ++c) dst[o * C + c] = rd::clip_fixed(sum[c]);
  }
}

void horizontal_scalar(const std::uint8_t* src, int src_x0, int src_bytes,
                       const rd::HorizontalTaps& t, std::uint8_t* dst) {
  switch (t.channels) {
    case 1: return horizontal_scalar_c<1>(src, src_x0, src_bytes, t, dst);
    case 3: return horizontal_scalar_c<3>(src, src_x0, src_bytes, t, dst);
    default: return horizontal_scalar_c<4>(src, src_x0, src_bytes, t, dst);
  }
}

void vertical_scalar(const std::uint8_t* rows, std::ptrdiff_t stride, const std::int32_t* weights,
                     int taps, int bytes, std::uint8_t* dst) {
  // A chunk of accumulators at a time, taps outer: rows are read sequentially and the inner loop
  // is one the compiler can vectorise for whatever target it builds for.
  constexpr int kChunk = 256;
  std::int32_t acc[kChunk];
  for (int x0 = 0; x0 < bytes; x0 += kChunk) {
    const int n = std::min(kChunk, bytes - x0);
    for (int i = 0; i < n; ++i) acc[i] = rd::kHalf;
    for (int t = 0; t < taps; ++t) {
      const std::uint8_t* r = rows + t * stride + x0;
      const std::int32_t w = weights[t];
      for (int i = 0; i < n; ++i) acc[i] += r[i] * w;
    }
    for (int i = 0; i < n; ++i) dst[x0 + i] = rd::clip_fixed(acc[i]);
  }
}

}  // namespace

const char* to_string(ResampleIsa isa) {
  switch (isa) {
    case ResampleIsa::kAuto: return "auto";
    case ResampleIsa::kScalar: return "scalar";
    case ResampleIsa::kSse41: return "sse4.1";
    case ResampleIsa::kAvx2: return "avx2";
  }
  return "?";
}

const rd::Kernels* rd::kernels_for(ResampleIsa isa) {
  static const Kernels scalar{horizontal_scalar, vertical_scalar};
#if defined(__x86_64__) || defined(__i386__)
  static const Kernels sse41{horizontal_sse41, vertical_sse41};
  static const Kernels avx2{horizontal_avx2, vertical_avx2};
  struct Cpu {
    bool sse41;
    bool avx2;
  };
  static const Cpu cpu = [] {
    __builtin_cpu_init();
    return Cpu{__builtin_cpu_supports("sse4.1") != 0, __builtin_cpu_supports("avx2") != 0};
  }();
  switch (isa) {
    case ResampleIsa::kAuto: return cpu.avx2 ? &avx2 : (cpu.sse41 ? &sse41 : &scalar);
    case ResampleIsa::kScalar: return &scalar;
    case ResampleIsa::kSse41: return cpu.sse41 ? &sse41 : nullptr;
    case ResampleIsa::kAvx2: return cpu.avx2 ? &avx2 : nullptr;
  }
  return nullptr;
#else
  return (isa == ResampleIsa::kAuto || isa == ResampleIsa::kScalar) ? &scalar : nullptr;
#endif
}

void Resampler::setup(const ResampleParams& params) {
  check_axis(params.x, "x");
  check_axis(params.y, "y");
  if (params.channels != 1 && params.channels != 3 && params.channels != 4) {
    invalid("channels must be 1, 3 or 4, got " + std::to_string(params.channels));
  }
  if (params.filter != Filter::kBilinear && params.filter != Filter::kArea) {
    invalid("unknown filter " + std::to_string(static_cast<int>(params.filter)));
  }
  params_ = params;
  build_axis(params.x, x_);
  build_axis(params.y, y_);
  build_lanes(x_);
}

namespace {
// resize() that grows capacity in powers of two: tap counts vary per sample (random crops), and
// exact growth would reallocate at every new maximum; this way a table reallocates a handful of
// times per worker, then never.
template <class T>
void resize_geometric(std::vector<T>& v, std::size_t n) {
  if (n > v.capacity()) v.reserve(std::bit_ceil(n));
  v.resize(n);
}
}  // namespace

void Resampler::build_axis(const AxisMap& map, Axis& axis) const {
  const bool area = params_.filter == Filter::kArea;
  const double filterscale = (params_.antialias && map.scale > 1.0) ? map.scale : 1.0;
  const double support = (area ? 0.5 : 1.0) * filterscale;
  const double inv_filterscale = 1.0 / filterscale;
  // Pillow's bound on the taps of one pixel, capped by the valid range the taps are clipped to.
  const double bound =
      std::min(2.0 * std::ceil(support) + 1.0, static_cast<double>(map.valid_hi) - map.valid_lo);
  const int stride = static_cast<int>(bound);
  const int n = map.out_size;

  // resize() keeps capacity: once warmed up to the largest geometry, setup allocates nothing.
  resize_geometric(axis.first, static_cast<std::size_t>(n));
  resize_geometric(axis.count, static_cast<std::size_t>(n));
  resize_geometric(axis.weights, static_cast<std::size_t>(n) * stride);
  resize_geometric(axis.raw, static_cast<std::size_t>(stride));
  axis.stride = stride;
  axis.begin = n;
  axis.end = 0;
  axis.lo = INT_MAX;
  axis.hi = INT_MIN;
  axis.max_count = 0;
  axis.monotone = true;
  axis.identity = true;

  const double lo = map.valid_lo;
  const double hi = map.valid_hi;
  // Scale 1 at an integer offset (crops, pads): both filters reduce to one tap of weight 1, so
  // write that directly. The general loop below gives the same tables, only slower.
  if (map.scale == 1.0 && map.origin == std::floor(map.origin) && std::fabs(map.origin) < 1e9) {
    const auto origin = static_cast<std::int64_t>(map.origin);
    for (int o = 0; o < n; ++o) {
      const std::int64_t x = origin + o;
      const bool valid = x >= map.valid_lo && x < map.valid_hi;
      axis.first[o] = valid ? static_cast<int>(x) : 0;
      axis.count[o] = valid ? 1 : 0;
      axis.weights[static_cast<std::size_t>(o) * stride] = rd::kOne;
      if (valid) {
        axis.begin = std::min(axis.begin, o);
        axis.end = o + 1;
      }
    }
    if (axis.end == 0) {
      axis.begin = axis.end = axis.lo = axis.hi = 0;
      axis.identity = false;
    } else {
      axis.lo = axis.first[axis.begin];
      axis.hi = axis.first[axis.end - 1] + 1;
      axis.max_count = 1;
    }
    return;
  }
  for (int o = 0; o < n; ++o) {
    const double centre = map.origin + (o + 0.5) * map.scale;
    if (!(centre >= lo && centre < hi)) {  // padding
      axis.first[o] = 0;
      axis.count[o] = 0;
      continue;
    }
    // Pillow rounds the support's ends to the nearest pixel boundary. The valid range's ends are
    // integers, so clamping before the floor is the same as after, and keeps absurd scales from
    // overflowing the int conversion.
    const int xmin = floor_to_int(std::max(lo, centre - support + 0.5));
    const int xmax = floor_to_int(std::min(hi, centre + support + 0.5));
    double total = 0;
    for (int x = xmin; x < xmax; ++x) {
      const double arg = (x - centre + 0.5) * inv_filterscale;
      const double w = area ? box_filter(arg) : triangle_filter(arg);
      axis.raw[x - xmin] = w;
      total += w;
    }
    // Normalise in double, then round to fixed point exactly as Pillow does; taps whose weight
    // rounds to 0 at either end are dropped (they change no result and widen the footprint).
    std::int32_t* w = axis.weights.data() + static_cast<std::size_t>(o) * stride;
    int nz_first = -1;
    int nz_last = -1;
    for (int i = 0; i < xmax - xmin; ++i) {
      const double normalised = total != 0.0 ? axis.raw[i] / total : 0.0;
      w[i] = static_cast<std::int32_t>(0.5 + normalised * rd::kOne);
      if (w[i] != 0) {
        if (nz_first < 0) nz_first = i;
        nz_last = i;
      }
    }
    int first = xmin + nz_first;
    int taps = nz_last - nz_first + 1;
    if (nz_first < 0) {  // cannot happen for a centre inside the range; keep the nearest pixel
      first = static_cast<int>(std::floor(centre));
      taps = 1;
      w[0] = rd::kOne;
    } else if (nz_first > 0) {
      std::memmove(w, w + nz_first, sizeof(std::int32_t) * taps);
    }
    axis.first[o] = first;
    axis.count[o] = taps;

    if (o > axis.begin) {
      const int prev_first = axis.first[o - 1];
      const int prev_end = prev_first + axis.count[o - 1];
      if (first < prev_first || first + taps < prev_end) axis.monotone = false;
      if (first != prev_first + 1) axis.identity = false;
    }
    if (taps != 1 || w[0] != rd::kOne) axis.identity = false;
    axis.begin = std::min(axis.begin, o);
    axis.end = o + 1;
    axis.lo = std::min(axis.lo, first);
    axis.hi = std::max(axis.hi, first + taps);
    axis.max_count = std::max(axis.max_count, taps);
  }
  if (axis.end == 0) {  // all padding
    axis.begin = axis.end = axis.lo = axis.hi = 0;
    axis.identity = false;
  }
}

// The SIMD kernels' weight table (layout in resample_kernels.hpp), for output pixels [begin, end)
// counted from begin. `groups` holds the number of units per pixel.
void Resampler::build_lanes(Axis& axis) const {
  const int channels = params_.channels;
  const int per_unit = rd::taps_per_unit(channels);
  const int per_lane = rd::pixels_per_lane(channels);
  const int per_block = rd::pixels_per_block(channels);
  const int words_per_pixel = 4 / per_lane;  // of a lane's 4 words of one unit
  const int units = (axis.max_count + per_unit - 1) / per_unit;
  axis.groups = units;
  // Sized by the tap bound and out_size rather than max_count and begin..end, so the capacity
  // needed grows only with the geometry (out_size, scale) and never from one pixel's rounding.
  const std::size_t bound = static_cast<std::size_t>(axis.stride + per_unit - 1) / per_unit;
  resize_geometric(axis.lanes,
                   rd::table_blocks(axis.first.size(), channels) * bound * rd::kUnitWords);
  if (axis.identity) return;  // the copy path reads no weights
  const int pixels = axis.end - axis.begin;
  std::fill_n(axis.lanes.data(),
              rd::table_blocks(static_cast<std::size_t>(pixels), channels) * units * rd::kUnitWords,
              0);
  for (int i = 0; i < pixels; ++i) {
    const int o = axis.begin + i;
    const std::int32_t* w = axis.weights.data() + static_cast<std::size_t>(o) * axis.stride;
    const int taps = axis.count[o];
    const auto weight = [&](int tap) { return tap < taps ? w[tap] : 0; };
    const auto pair = [](std::int32_t a, std::int32_t b) {
      return static_cast<std::int32_t>(static_cast<std::uint32_t>(a) |
                                        (static_cast<std::uint32_t>(b) << 16));
    };
    const int lane = (i % per_block) / per_lane;
    const int word = lane * 4 + (i % per_lane) * words_per_pixel;
    std::int32_t* block = axis.lanes.data() + static_cast<std::size_t>(i / per_block) * units *
                                                  rd::kUnitWords;
    for (int u = 0; u < units; ++u) {
      std::int32_t* unit = block + static_cast<std::ptrdiff_t>(u) * rd::kUnitWords + word;
      for (int j = 0; j < words_per_pixel; ++j) {
        const int tap = u * per_unit + (channels == 1 ? 2 * j : 0);
        const std::int32_t w0 = weight(tap);
        const std::int32_t w1 = weight(tap + 1);
        unit[j] = pair(w0 & rd::kSplitMask, w1 & rd::kSplitMask);
        unit[j + 8] = pair(w0 >> rd::kSplitBits, w1 >> rd::kSplitBits);
      }
    }
  }
}

Rect Resampler::footprint() const {
  if (x_.end == x_.begin || y_.end == y_.begin) return Rect{};
  return Rect{x_.lo, y_.lo, x_.hi - x_.lo, y_.hi - y_.lo};
}

// Rows of horizontally resampled pixels the general path keeps. When each output row's taps start
// and end no earlier than the previous row's, a ring of 2 * max_count rows suffices (each row is
// written twice, at slot s and s + max_count, so every window of taps is contiguous); otherwise,
// or when the footprint is no taller, every footprint row gets its own slot.
int Resampler::ring_rows() const {
  const int height = y_.hi - y_.lo;
  return (y_.monotone && 2 * y_.max_count < height) ? 2 * y_.max_count : height;
}

std::size_t Resampler::scratch_bytes() const {
  if (footprint().width == 0 || x_.identity || y_.identity) return 0;
  const std::size_t row_bytes = static_cast<std::size_t>(x_.end - x_.begin) * params_.channels;
  return row_bytes * static_cast<std::size_t>(ring_rows());
}

std::pair<int, int> Resampler::rows_read(int first_row, int last_row) const {
  int lo = INT_MAX;
  int hi = INT_MIN;
  for (int o = first_row; o < last_row; ++o) {
    lo = std::min(lo, y_.first[o]);
    hi = std::max(hi, y_.first[o] + y_.count[o]);
  }
  return {lo, hi};
}

// Padding: whole rows above and below, margins left and right of the rest.
void Resampler::fill_padding(ImageView dst, int row_begin, int row_end) const {
  const std::size_t out_row_bytes = static_cast<std::size_t>(dst.width) * params_.channels;
  const std::size_t left = static_cast<std::size_t>(x_.begin) * params_.channels;
  const std::size_t right = out_row_bytes - static_cast<std::size_t>(x_.end) * params_.channels;
  for (int o = row_begin; o < row_end; ++o) {
    std::uint8_t* row = dst.row(o);
    if (o < y_.begin || o >= y_.end) {
      std::memset(row, params_.fill, out_row_bytes);
    } else {
      if (left != 0) std::memset(row, params_.fill, left);
      if (right != 0) std::memset(row + out_row_bytes - right, params_.fill, right);
    }
  }
}

std::pair<int, int> Resampler::source_rows(int o) const {
  if (o < y_.begin || o >= y_.end || x_.end == x_.begin) return {0, 0};
  return {y_.first[o], y_.first[o] + y_.count[o]};
}

void Resampler::run(ConstImageView src, int src_x0, int src_y0, ImageView dst,
                    std::span<std::uint8_t> scratch) const {
  run_rows(src, src_x0, src_y0, dst, 0, params_.y.out_size, scratch);
}

void Resampler::run_rows(ConstImageView src, int src_x0, int src_y0, ImageView dst, int row_begin, int row_end,
                         std::span<std::uint8_t> scratch) const {
  const int channels = params_.channels;
  if (params_.x.out_size <= 0) invalid("run() before setup()");
  if (dst.width != params_.x.out_size || dst.height != params_.y.out_size ||
      dst.channels != channels) {
    invalid("dst must be " + std::to_string(params_.x.out_size) + "x" +
            std::to_string(params_.y.out_size) + "x" + std::to_string(channels));
  }
  if (row_begin < 0 || row_end > dst.height || row_begin > row_end) {
    invalid("rows [" + std::to_string(row_begin) + ", " + std::to_string(row_end) + ") of a " +
            std::to_string(dst.height) + "-row output");
  }
  const std::uint8_t fill = params_.fill;
  const std::size_t out_row_bytes = static_cast<std::size_t>(dst.width) * channels;
  const Rect fp = footprint();
  if (fp.width == 0) {
    for (int o = row_begin; o < row_end; ++o) std::memset(dst.row(o), fill, out_row_bytes);
    return;
  }
  // The output rows that read the source, and the source rows they read.
  const int first_row = std::max(row_begin, y_.begin);
  const int last_row = std::min(row_end, y_.end);
  const auto [lo, hi] = rows_read(first_row, last_row);
  if (first_row < last_row &&
      (src.channels != channels || src_x0 > fp.x || src_y0 > lo || src_x0 + src.width < fp.x + fp.width ||
       src_y0 + src.height < hi)) {
    invalid("src must hold the footprint [" + std::to_string(fp.x) + ", " + std::to_string(fp.x + fp.width) +
            ") x [" + std::to_string(lo) + ", " + std::to_string(hi) + ") with " + std::to_string(channels) +
            " channels");
  }
  if (scratch.size() < scratch_bytes()) {
    invalid("scratch holds " + std::to_string(scratch.size()) + " bytes, needs " +
            std::to_string(scratch_bytes()));
  }
  const rd::Kernels* kernels = rd::kernels_for(isa_);
  if (kernels == nullptr)
    invalid(std::string("this CPU cannot run the ") + to_string(isa_) + " kernels");

  fill_padding(dst, row_begin, row_end);
  const std::size_t left = static_cast<std::size_t>(x_.begin) * channels;

  const int row_bytes = (x_.end - x_.begin) * channels;
  const int src_bytes = src.width * channels;
  const auto src_row = [&](int y) { return src.row(y - src_y0); };
  // For a copy on x: where the first kept source pixel starts within a source row.
  const std::ptrdiff_t x_offset =
      static_cast<std::ptrdiff_t>(x_.first[x_.begin] - src_x0) * channels;
  const rd::HorizontalTaps taps{
      .count = x_.end - x_.begin,
      .channels = channels,
      .first = x_.first.data() + x_.begin,
      .taps = x_.count.data() + x_.begin,
      .weights = x_.weights.data() + static_cast<std::size_t>(x_.begin) * x_.stride,
      .stride = x_.stride,
      .lanes = x_.lanes.data(),
      .units = x_.groups};
  const auto y_weights = [&](int o) {
    return y_.weights.data() + static_cast<std::size_t>(o) * y_.stride;
  };

  if (x_.identity && y_.identity) {  // a crop or pad: row copies
    for (int o = first_row; o < last_row; ++o) {
      std::memcpy(dst.row(o) + left, src_row(y_.first[o]) + x_offset, row_bytes);
    }
    return;
  }
  if (y_.identity) {  // one horizontal pass straight into dst
    for (int o = first_row; o < last_row; ++o) {
      kernels->horizontal(src_row(y_.first[o]), src_x0, src_bytes, taps, dst.row(o) + left);
    }
    return;
  }
  if (x_.identity) {  // one vertical pass straight from src
    for (int o = first_row; o < last_row; ++o) {
      kernels->vertical(src_row(y_.first[o]) + x_offset, src.stride, y_weights(o), y_.count[o],
                        row_bytes, dst.row(o) + left);
    }
    return;
  }

  // Both passes. Source rows are resampled horizontally as the output rows first need them, so
  // rows no tap uses are never touched and the ring stays in L1.
  std::uint8_t* const tmp = scratch.data();
  const int slots = ring_rows();
  const bool ring = slots != y_.hi - y_.lo;
  const int period = y_.max_count;
  const auto slot = [&](int y) { return ring ? (y - y_.lo) % period : y - y_.lo; };
  const auto tmp_row = [&](int s) { return tmp + static_cast<std::ptrdiff_t>(s) * row_bytes; };
  const auto resample_row = [&](int y) {
    std::uint8_t* out = tmp_row(slot(y));
    kernels->horizontal(src_row(y), src_x0, src_bytes, taps, out);
    if (ring) std::memcpy(tmp_row(slot(y) + period), out, row_bytes);
  };
  int done = lo;  // with monotone taps, rows below `done` are resampled or never needed
  if (!y_.monotone) {
    for (int y = lo; y < hi; ++y) resample_row(y);
    done = hi;
  }
  for (int o = first_row; o < last_row; ++o) {
    const int first = y_.first[o];
    const int end = first + y_.count[o];
    for (int y = std::max(done, first); y < end; ++y) resample_row(y);
    done = std::max(done, end);
    kernels->vertical(tmp_row(slot(first)), row_bytes, y_weights(o), y_.count[o], row_bytes,
                      dst.row(o) + left);
  }
}

}  // namespace sluice::stages
