// The point ops as Pillow computes them: a 256-entry table per channel (from the value alone, or
// from the channel's histogram), applied in one pass; and the sharpness blend with Pillow's SMOOTH
// filter, in f32 as Pillow's C code does.
#include "stages/augment/point_ops.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "sluice/core/error.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SLUICE_SHARPEN_AVX2 1
#endif

namespace sluice::stages {
namespace {

constexpr int kMaxChannels = 4;
using Lut = std::array<std::uint8_t, 256>;
using Histogram = std::array<std::uint32_t, 256>;

void check_pair(ConstImageView src, ImageView dst, const char* op) {
  if (src.width != dst.width || src.height != dst.height || src.channels != dst.channels) {
    throw Error(ErrorCode::kInvalidArgument, std::string(op) + ": source and destination differ in size or channels");
  }
  if (src.channels < 1 || src.channels > kMaxChannels) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string(op) + ": 1 to 4 channels, got " + std::to_string(src.channels));
  }
}

bool empty(ConstImageView v) { return v.width <= 0 || v.height <= 0; }

// One table per channel. The channel count is a template argument so that the per-pixel loop is
// unrolled over the channels (a run-time count left it a loop in a loop).
template <int C>
void apply_luts_c(ConstImageView src, ImageView dst, const Lut* luts) {
  const std::size_t n = static_cast<std::size_t>(src.width) * C;
  for (int y = 0; y < src.height; ++y) {
    const std::uint8_t* in = src.row(y);
    std::uint8_t* out = dst.row(y);
    for (std::size_t i = 0; i < n; i += C) {
      for (int k = 0; k < C; ++k) out[i + k] = luts[k][in[i + k]];
    }
  }
}

void apply_luts(ConstImageView src, ImageView dst, const Lut* luts) {
  switch (src.channels) {
    case 1: apply_luts_c<1>(src, dst, luts); break;
    case 2: apply_luts_c<2>(src, dst, luts); break;
    case 3: apply_luts_c<3>(src, dst, luts); break;
    default: apply_luts_c<4>(src, dst, luts); break;
  }
}

// The same per-value function for every channel, written for the vectoriser (the ops whose table
// is arithmetic: invert, posterize, solarize); equal to the table it stands for.
template <class Op>
void apply_op(ConstImageView src, ImageView dst, Op op) {
  const std::size_t n = static_cast<std::size_t>(src.width) * static_cast<std::size_t>(src.channels);
  for (int y = 0; y < src.height; ++y) {
    const std::uint8_t* in = src.row(y);
    std::uint8_t* out = dst.row(y);
    for (std::size_t i = 0; i < n; ++i) out[i] = op(in[i]);
  }
}

// Each channel's histogram. Neighbouring pixels of a photo often share a value, and counting
// them into one array makes each increment wait for the previous one's store; even and odd pixels
// count into two arrays, summed at the end.
template <int C>
std::array<Histogram, kMaxChannels> histograms_c(ConstImageView src) {
  std::array<Histogram, kMaxChannels> h{};
  std::array<Histogram, kMaxChannels> odd{};
  for (int y = 0; y < src.height; ++y) {
    const std::uint8_t* in = src.row(y);
    int x = 0;
    for (; x + 2 <= src.width; x += 2) {
      for (int k = 0; k < C; ++k) {
        ++h[k][in[x * C + k]];
        ++odd[k][in[(x + 1) * C + k]];
      }
    }
    if (x < src.width) {
      for (int k = 0; k < C; ++k) ++h[k][in[x * C + k]];
    }
  }
  for (int k = 0; k < C; ++k) {
    for (int v = 0; v < 256; ++v) h[k][v] += odd[k][v];
  }
  return h;
}

std::array<Histogram, kMaxChannels> histograms(ConstImageView src) {
  switch (src.channels) {
    case 1: return histograms_c<1>(src);
    case 2: return histograms_c<2>(src);
    case 3: return histograms_c<3>(src);
    default: return histograms_c<4>(src);
  }
}

Lut identity_lut() {
  Lut l{};
  for (int i = 0; i < 256; ++i) l[i] = static_cast<std::uint8_t>(i);
  return l;
}

// ImageOps.autocontrast, cutoff 0, for one channel's histogram.
Lut autocontrast_lut(const Histogram& h) {
  int lo = 0;
  while (lo < 256 && h[lo] == 0) ++lo;
  int hi = 255;
  while (hi >= 0 && h[hi] == 0) --hi;
  if (hi <= lo) return identity_lut();
  const double scale = 255.0 / (hi - lo);
  const double offset = -lo * scale;
  Lut l{};
  for (int i = 0; i < 256; ++i) {
    // Python's int() truncates toward zero.
    int v = static_cast<int>(i * scale + offset);
    v = v < 0 ? 0 : (v > 255 ? 255 : v);
    l[i] = static_cast<std::uint8_t>(v);
  }
  return l;
}

// ImageOps.equalize for one channel's histogram.
Lut equalize_lut(const Histogram& h) {
  std::uint64_t total = 0;
  std::uint64_t last = 0;
  int nonzero = 0;
  for (int i = 0; i < 256; ++i) {
    if (h[i] != 0) {
      total += h[i];
      last = h[i];
      ++nonzero;
    }
  }
  if (nonzero <= 1) return identity_lut();
  const std::uint64_t step = (total - last) / 255;
  if (step == 0) return identity_lut();
  Lut l{};
  std::uint64_t n = step / 2;
  for (int i = 0; i < 256; ++i) {
    const std::uint64_t v = n / step;
    l[i] = static_cast<std::uint8_t>(v > 255 ? 255 : v);
    n += h[i];
  }
  return l;
}

}  // namespace

void posterize(ConstImageView src, ImageView dst, int bits) {
  check_pair(src, dst, "posterize");
  if (bits < 0 || bits > 8) {
    throw Error(ErrorCode::kInvalidArgument, "posterize: bits must be 0 to 8, got " + std::to_string(bits));
  }
  if (empty(src)) return;
  const auto mask = static_cast<std::uint8_t>(~((1 << (8 - bits)) - 1));
  apply_op(src, dst, [mask](std::uint8_t v) { return static_cast<std::uint8_t>(v & mask); });
}

void solarize(ConstImageView src, ImageView dst, double threshold) {
  check_pair(src, dst, "solarize");
  if (std::isnan(threshold)) throw Error(ErrorCode::kInvalidArgument, "solarize: threshold is NaN");
  if (empty(src)) return;
  // v < threshold for an integer v is v < ceil(threshold); clamp to 0..256 (256: the identity).
  const double t = std::ceil(std::clamp(threshold, 0.0, 256.0));
  const int first = static_cast<int>(t);
  if (first > 255) {
    apply_op(src, dst, [](std::uint8_t v) { return v; });
    return;
  }
  const auto limit = static_cast<std::uint8_t>(first);
  apply_op(src, dst, [limit](std::uint8_t v) { return v < limit ? v : static_cast<std::uint8_t>(255 - v); });
}

void invert(ConstImageView src, ImageView dst) {
  check_pair(src, dst, "invert");
  if (empty(src)) return;
  apply_op(src, dst, [](std::uint8_t v) { return static_cast<std::uint8_t>(255 - v); });
}

void autocontrast(ConstImageView src, ImageView dst) {
  check_pair(src, dst, "autocontrast");
  if (empty(src)) return;
  const auto h = histograms(src);
  std::array<Lut, kMaxChannels> luts{};
  for (int k = 0; k < src.channels; ++k) luts[k] = autocontrast_lut(h[k]);
  apply_luts(src, dst, luts.data());
}

void equalize(ConstImageView src, ImageView dst) {
  check_pair(src, dst, "equalize");
  if (empty(src)) return;
  const auto h = histograms(src);
  std::array<Lut, kMaxChannels> luts{};
  for (int k = 0; k < src.channels; ++k) luts[k] = equalize_lut(h[k]);
  apply_luts(src, dst, luts.data());
}

std::size_t sharpness_workspace_bytes(Size2 size, int channels) {
  if (size.width <= 0 || size.height <= 0 || channels <= 0) return 0;
  return 2 * static_cast<std::size_t>(size.width) * static_cast<std::size_t>(channels);
}

namespace {

// Pillow's Image.blend(degenerate, image, factor) on one value: in f32, truncated, clamped to
// 0..255 (Pillow clamps only when the factor extrapolates, outside [0, 1]; inside it the f32 result
// lies between the two integers already, so clamping always is the same and keeps the loop free of
// branches).
inline std::uint8_t blend(int smooth, int original, float factor) {
  float v = static_cast<float>(smooth) + factor * static_cast<float>(original - smooth);
  v = v <= 0.0f ? 0.0f : v;
  v = v >= 255.0f ? 255.0f : v;
  return static_cast<std::uint8_t>(static_cast<int>(v));
}

#if SLUICE_SHARPEN_AVX2
// Eight bytes as floats.
__attribute__((target("avx2"))) inline __m256 load_avx2(const std::uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// One source row's three taps for eight values at p: (left * k1 + centre * kc) + right * k1.
__attribute__((target("avx2"))) inline __m256 row_sum_avx2(const std::uint8_t* p, int c, __m256 k1, __m256 kc) {
  const __m256 s = _mm256_add_ps(_mm256_mul_ps(load_avx2(p - c), k1), _mm256_mul_ps(load_avx2(p), kc));
  return _mm256_add_ps(s, _mm256_mul_ps(load_avx2(p + c), k1));
}

// The interior loop of sharpen_row, eight values a step in AVX2 floats: the very f32 operations of
// the scalar loop below, in its order (products, then the three row sums added left to right, then
// the blend), so the bytes are the same. GCC keeps the scalar loop scalar at -O2 (its cheapest
// vectoriser gives up on the 9-tap body), and there it costs about two JPEG decodes of the image.
// Without the "fma" target no multiply-add can be fused. Returns the first index left undone.
__attribute__((target("avx2"))) int sharpen_span_avx2(const std::uint8_t* above, const std::uint8_t* here,
                                                       const std::uint8_t* below, int c, int begin, int end,
                                                       float factor, std::uint8_t* out) {
  const __m256 k1 = _mm256_set1_ps(1.0f / 13.0f);
  const __m256 k5 = _mm256_set1_ps(5.0f / 13.0f);
  const __m256 half = _mm256_set1_ps(0.5f);
  const __m256 zero = _mm256_setzero_ps();
  const __m256 top = _mm256_set1_ps(255.0f);
  const __m256 f = _mm256_set1_ps(factor);
  int i = begin;
  for (; i + 8 <= end; i += 8) {
    __m256 ss = _mm256_add_ps(half, row_sum_avx2(below + i, c, k1, k1));
    ss = _mm256_add_ps(ss, row_sum_avx2(here + i, c, k1, k5));
    ss = _mm256_add_ps(ss, row_sum_avx2(above + i, c, k1, k1));
    ss = _mm256_min_ps(_mm256_max_ps(ss, zero), top);
    const __m256 smooth = _mm256_cvtepi32_ps(_mm256_cvttps_epi32(ss));  // truncated, as the scalar cast
    __m256 v = _mm256_add_ps(smooth, _mm256_mul_ps(f, _mm256_sub_ps(load_avx2(here + i), smooth)));
    v = _mm256_min_ps(_mm256_max_ps(v, zero), top);
    const __m256i bytes = _mm256_cvttps_epi32(v);
    const __m128i words = _mm_packus_epi32(_mm256_castsi256_si128(bytes), _mm256_extracti128_si256(bytes, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i), _mm_packus_epi16(words, words));
  }
  return i;
}

bool sharpen_avx2_supported() {
  static const bool supported = __builtin_cpu_supports("avx2");
  return supported;
}
#endif

// One interior row: SMOOTH (Pillow's ImagingFilter3x3 with the kernel over 13 and +0.5 for
// rounding, in f32 in its order of operations) then the blend. above/here/below are source rows;
// the first and last pixel keep their value, as Pillow's filter does.
void sharpen_row(const std::uint8_t* above, const std::uint8_t* here, const std::uint8_t* below,
                 int width, int c, float factor, std::uint8_t* out) {
  const float k1 = 1.0f / 13.0f;
  const float k5 = 5.0f / 13.0f;
  std::memcpy(out, here, static_cast<std::size_t>(c));
  // Every interior value, channels interleaved: one flat loop the compiler vectorises.
  const int end = (width - 1) * c;
  int i = c;
#if SLUICE_SHARPEN_AVX2
  if (sharpen_avx2_supported()) i = sharpen_span_avx2(above, here, below, c, i, end, factor, out);
#endif
  for (; i < end; ++i) {
    const auto f = [](std::uint8_t v) { return static_cast<float>(v); };
    float ss = 0.5f;
    ss += f(below[i - c]) * k1 + f(below[i]) * k1 + f(below[i + c]) * k1;
    ss += f(here[i - c]) * k1 + f(here[i]) * k5 + f(here[i + c]) * k1;
    ss += f(above[i - c]) * k1 + f(above[i]) * k1 + f(above[i + c]) * k1;
    ss = ss < 0.0f ? 0.0f : ss;
    ss = ss > 255.0f ? 255.0f : ss;
    const int smooth = static_cast<int>(ss);  // truncation, as Pillow's (UINT8) cast of 0..255
    out[i] = blend(smooth, here[i], factor);
  }
  const std::size_t last = static_cast<std::size_t>(width - 1) * static_cast<std::size_t>(c);
  std::memcpy(out + last, here + last, static_cast<std::size_t>(c));
}

}  // namespace

void adjust_sharpness(ConstImageView src, ImageView dst, float factor, std::span<std::byte> workspace) {
  check_pair(src, dst, "adjust_sharpness");
  if (!(factor >= 0.0f) || !std::isfinite(factor)) {
    throw Error(ErrorCode::kInvalidArgument, "adjust_sharpness: the factor must be >= 0 and finite, got " + std::to_string(factor));
  }
  if (empty(src)) return;
  const int w = src.width;
  const int h = src.height;
  const int c = src.channels;
  const std::size_t row_bytes = static_cast<std::size_t>(w) * static_cast<std::size_t>(c);
  // Pillow's filter returns a copy of an image smaller than its kernel; the blend of two equal
  // images is the image.
  if (w < 3 || h < 3) {
    if (src.data != dst.data) {
      for (int y = 0; y < h; ++y) std::memcpy(dst.row(y), src.row(y), row_bytes);
    }
    return;
  }
  if (workspace.size() < sharpness_workspace_bytes({w, h}, c)) {
    throw Error(ErrorCode::kInvalidArgument, "adjust_sharpness: workspace smaller than sharpness_workspace_bytes()");
  }
  // Two saved source rows (the one above and the one being written), so dst may be src.
  auto* saved_above = reinterpret_cast<std::uint8_t*>(workspace.data());
  auto* saved_here = saved_above + row_bytes;
  std::memcpy(saved_above, src.row(0), row_bytes);
  if (src.data != dst.data) std::memcpy(dst.row(0), src.row(0), row_bytes);
  for (int y = 1; y < h - 1; ++y) {
    std::memcpy(saved_here, src.row(y), row_bytes);
    sharpen_row(saved_above, saved_here, src.row(y + 1), w, c, factor, dst.row(y));
    std::swap(saved_above, saved_here);
  }
  if (src.data != dst.data) std::memcpy(dst.row(h - 1), src.row(h - 1), row_bytes);
}

}  // namespace sluice::stages
