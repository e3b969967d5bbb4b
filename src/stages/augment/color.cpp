// Colour kernels with Pillow's arithmetic (color.hpp). Image.blend(degenerate, image, alpha)
// computes, per byte, (float)deg + alpha * (float)(value - deg) with alpha a C float, truncates,
// and clips to [0, 255] only when alpha lies outside [0, 1]; brightness and contrast blend with a
// constant, so their result depends on the byte alone and runs through a 256-entry table.
#include "stages/augment/color.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SLUICE_COLOR_AVX2 1
#endif

namespace sluice::stages {

namespace {

// Image.blend's per-byte arithmetic (Pillow's Blend.c).
inline std::uint8_t blend(int degenerate, int value, float alpha, bool extrapolate) {
  const float v = static_cast<float>(degenerate) + alpha * static_cast<float>(value - degenerate);
  if (!extrapolate) return static_cast<std::uint8_t>(v);
  if (v <= 0.0F) return 0;
  if (v >= 255.0F) return 255;
  return static_cast<std::uint8_t>(v);
}

bool extrapolates(float alpha) { return !(alpha >= 0.0F && alpha <= 1.0F); }

void apply_table(ImageView image, const std::array<std::uint8_t, 256>& table) {
  const int row = image.width * image.channels;
  for (int y = 0; y < image.height; ++y) {
    std::uint8_t* p = image.row(y);
    for (int i = 0; i < row; ++i) p[i] = table[p[i]];
  }
}

// The table of blend(degenerate, x, alpha) for every byte x.
std::array<std::uint8_t, 256> blend_table(int degenerate, float alpha) {
  std::array<std::uint8_t, 256> table{};
  const bool clip = extrapolates(alpha);
  for (int x = 0; x < 256; ++x) table[static_cast<std::size_t>(x)] = blend(degenerate, x, alpha, clip);
  return table;
}

// Pillow's rgb2hsv_row (Convert.c): float and double steps as written there.
inline void rgb_to_hsv(const std::uint8_t* in, std::uint8_t& uh, std::uint8_t& us, std::uint8_t& uv) {
  const std::uint8_t r = in[0];
  const std::uint8_t g = in[1];
  const std::uint8_t b = in[2];
  const std::uint8_t maxc = std::max(r, std::max(g, b));
  const std::uint8_t minc = std::min(r, std::min(g, b));
  uv = maxc;
  if (minc == maxc) {
    uh = 0;
    us = 0;
    return;
  }
  const float cr = static_cast<float>(maxc - minc);
  const float s = cr / static_cast<float>(maxc);
  const float rc = static_cast<float>(maxc - r) / cr;
  const float gc = static_cast<float>(maxc - g) / cr;
  const float bc = static_cast<float>(maxc - b) / cr;
  float h;
  if (r == maxc) {
    h = bc - gc;
  } else if (g == maxc) {
    h = static_cast<float>(2.0 + rc - bc);
  } else {
    h = static_cast<float>(4.0 + gc - rc);
  }
  h = static_cast<float>(std::fmod(h / 6.0 + 1.0, 1.0));
  uh = static_cast<std::uint8_t>(std::clamp(static_cast<int>(h * 255.0), 0, 255));
  us = static_cast<std::uint8_t>(std::clamp(static_cast<int>(s * 255.0), 0, 255));
}

// Pillow's hsv2rgb (Convert.c).
inline void hsv_to_rgb(std::uint8_t h, std::uint8_t s, std::uint8_t v, std::uint8_t* out) {
  if (s == 0) {
    out[0] = out[1] = out[2] = v;
    return;
  }
  const int i = static_cast<int>(std::floor(static_cast<float>(h) * 6.0 / 255.0));
  const float f = static_cast<float>(static_cast<float>(h) * 6.0 / 255.0 - static_cast<float>(i));
  const float fs = static_cast<float>(static_cast<float>(s) / 255.0);
  const auto clip8 = [](double x) { return static_cast<std::uint8_t>(std::clamp(static_cast<int>(std::round(x)), 0, 255)); };
  const std::uint8_t p = clip8(static_cast<float>(v) * (1.0 - fs));
  const std::uint8_t q = clip8(static_cast<float>(v) * (1.0 - fs * f));
  const std::uint8_t t = clip8(static_cast<float>(v) * (1.0 - fs * (1.0 - f)));
  switch (i % 6) {
    case 0: out[0] = v; out[1] = t; out[2] = p; break;
    case 1: out[0] = q; out[1] = v; out[2] = p; break;
    case 2: out[0] = p; out[1] = v; out[2] = t; break;
    case 3: out[0] = p; out[1] = q; out[2] = v; break;
    case 4: out[0] = t; out[1] = p; out[2] = v; break;
    default: out[0] = v; out[1] = p; out[2] = q; break;
  }
}

#if SLUICE_COLOR_AVX2
// blend(degenerate[i], value[i], alpha, clip) for n values, eight a step in AVX2 floats with the
// scalar blend's operations (no multiply-add: the "fma" target is not enabled), clamped always:
// inside [0, 1] alpha keeps the result between the two bytes already (the comment on blend in
// point_ops.cpp), so the clamp changes nothing there. Returns the first index left undone.
__attribute__((target("avx2"))) int blend_span_avx2(const std::uint8_t* degenerate, std::uint8_t* values, int n,
                                                    float alpha) {
  const __m256 a = _mm256_set1_ps(alpha);
  const __m256 zero = _mm256_setzero_ps();
  const __m256 top = _mm256_set1_ps(255.0f);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 d = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(degenerate + i))));
    const __m256 x = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(values + i))));
    __m256 v = _mm256_add_ps(d, _mm256_mul_ps(a, _mm256_sub_ps(x, d)));
    v = _mm256_min_ps(_mm256_max_ps(v, zero), top);
    const __m256i ints = _mm256_cvttps_epi32(v);
    const __m128i words = _mm_packus_epi32(_mm256_castsi256_si128(ints), _mm256_extracti128_si256(ints, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(values + i), _mm_packus_epi16(words, words));
  }
  return i;
}

// The sum of luma() over the first n pixels of an RGB row, eight pixels a step: their 24 bytes
// come in as two 16-byte loads (bytes 0-15 and 8-23), each channel's eight bytes gathered from
// them by two byte shuffles, then Pillow's fixed-point luma per pixel in 32-bit lanes.
// Returns the sum and sets `done` to the pixels summed (a multiple of eight).
__attribute__((target("avx2"))) std::uint64_t luma_sum_avx2(const std::uint8_t* p, int n, int& done) {
  // Channel k of pixels 0-4 lies at bytes 3i + k of the first load, of pixels 5-7 at 3i + k - 8
  // of the second; -1 lanes give zero, and the two shuffles' results are ORed.
  const auto pick = [](int k, bool second) {
    alignas(16) std::int8_t m[16];
    for (int i = 0; i < 16; ++i) m[i] = -1;
    for (int i = 0; i < 8; ++i) {
      const int at = 3 * i + k - (second ? 8 : 0);
      if ((second ? i >= 5 : i < 5) && at >= 0 && at < 16) m[i] = static_cast<std::int8_t>(at);
    }
    return _mm_load_si128(reinterpret_cast<const __m128i*>(m));
  };
  const __m128i lo[3] = {pick(0, false), pick(1, false), pick(2, false)};
  const __m128i hi[3] = {pick(0, true), pick(1, true), pick(2, true)};
  const __m256i weight[3] = {_mm256_set1_epi32(19595), _mm256_set1_epi32(38470), _mm256_set1_epi32(7471)};
  const __m256i round = _mm256_set1_epi32(0x8000);
  __m256i sum = _mm256_setzero_si256();  // eight 32-bit partial sums
  // (the 64-bit lanes they are folded into)
  __m256i total = _mm256_setzero_si256();
  int x = 0;
  int pending = 0;
  for (; x + 8 <= n; x += 8) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 3 * x));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 3 * x + 8));
    __m256i l = round;
    for (int k = 0; k < 3; ++k) {
      const __m128i bytes = _mm_or_si128(_mm_shuffle_epi8(a, lo[k]), _mm_shuffle_epi8(b, hi[k]));
      l = _mm256_add_epi32(l, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(bytes), weight[k]));
    }
    sum = _mm256_add_epi32(sum, _mm256_srli_epi32(l, 16));
    // Each lane gains at most 255 a step: fold into 64-bit lanes well before 2^32.
    if (++pending == 1 << 20) {
      total = _mm256_add_epi64(total, _mm256_cvtepu32_epi64(_mm256_castsi256_si128(sum)));
      total = _mm256_add_epi64(total, _mm256_cvtepu32_epi64(_mm256_extracti128_si256(sum, 1)));
      sum = _mm256_setzero_si256();
      pending = 0;
    }
  }
  total = _mm256_add_epi64(total, _mm256_cvtepu32_epi64(_mm256_castsi256_si128(sum)));
  total = _mm256_add_epi64(total, _mm256_cvtepu32_epi64(_mm256_extracti128_si256(sum, 1)));
  alignas(32) std::uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), total);
  done = x;
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

bool color_avx2_supported() {
  static const bool supported = __builtin_cpu_supports("avx2");
  return supported;
}
#endif

}  // namespace

void adjust_brightness(ImageView image, double factor) {
  apply_table(image, blend_table(0, static_cast<float>(factor)));
}

void adjust_contrast(ImageView image, double factor) {
  // ImageStat's mean of the L image, from its histogram, as a double; int(mean + 0.5).
  std::uint64_t sum = 0;
  for (int y = 0; y < image.height; ++y) {
    const std::uint8_t* p = image.row(y);
    if (image.channels == 1) {
      for (int x = 0; x < image.width; ++x) sum += p[x];
    } else {
      int x = 0;
#if SLUICE_COLOR_AVX2
      if (image.channels == 3 && color_avx2_supported()) sum += luma_sum_avx2(p, image.width, x);
#endif
      for (p += x * image.channels; x < image.width; ++x, p += image.channels) sum += luma(p[0], p[1], p[2]);
    }
  }
  const double pixels = static_cast<double>(image.width) * image.height;
  const int mean = pixels > 0 ? static_cast<int>(static_cast<double>(sum) / pixels + 0.5) : 0;
  apply_table(image, blend_table(mean, static_cast<float>(factor)));
}

void adjust_saturation(ImageView image, double factor) {
  if (image.channels != 3) return;  // an L image blends with itself: unchanged
  const float alpha = static_cast<float>(factor);
  const bool clip = extrapolates(alpha);
#if SLUICE_COLOR_AVX2
  if (color_avx2_supported()) {
    // Each pixel's luma written three times, a chunk of the row at a time, then one flat blend of
    // the chunk's bytes with it (the scalar loop below does the same per pixel).
    constexpr int kChunk = 64;
    std::uint8_t lumas[3 * kChunk];
    for (int y = 0; y < image.height; ++y) {
      std::uint8_t* row = image.row(y);
      for (int x0 = 0; x0 < image.width; x0 += kChunk) {
        const int n = std::min(kChunk, image.width - x0);
        std::uint8_t* p = row + 3 * x0;
        for (int x = 0; x < n; ++x) lumas[3 * x] = lumas[3 * x + 1] = lumas[3 * x + 2] = luma(p[3 * x], p[3 * x + 1], p[3 * x + 2]);
        for (int i = blend_span_avx2(lumas, p, 3 * n, alpha); i < 3 * n; ++i) p[i] = blend(lumas[i], p[i], alpha, clip);
      }
    }
    return;
  }
#endif
  for (int y = 0; y < image.height; ++y) {
    std::uint8_t* p = image.row(y);
    for (int x = 0; x < image.width; ++x, p += 3) {
      const int l = luma(p[0], p[1], p[2]);
      p[0] = blend(l, p[0], alpha, clip);
      p[1] = blend(l, p[1], alpha, clip);
      p[2] = blend(l, p[2], alpha, clip);
    }
  }
}

void adjust_hue(ImageView image, double hue_factor) {
  if (image.channels != 3) return;  // torchvision returns an L image as it is
  // numpy's uint8(hue_factor * 255): truncated toward zero, then modulo 256.
  const auto shift = static_cast<std::uint8_t>(static_cast<int>(hue_factor * 255.0));
  for (int y = 0; y < image.height; ++y) {
    std::uint8_t* p = image.row(y);
    for (int x = 0; x < image.width; ++x, p += 3) {
      std::uint8_t h;
      std::uint8_t s;
      std::uint8_t v;
      rgb_to_hsv(p, h, s, v);
      hsv_to_rgb(static_cast<std::uint8_t>(h + shift), s, v, p);
    }
  }
}

void grayscale(ImageView image) {
  if (image.channels != 3) return;
  for (int y = 0; y < image.height; ++y) {
    std::uint8_t* p = image.row(y);
    for (int x = 0; x < image.width; ++x, p += 3) p[0] = p[1] = p[2] = luma(p[0], p[1], p[2]);
  }
}

ImageView grayscale_to_one_channel(ImageView image) {
  if (image.channels == 1) return image;
  // Packed row after row into the front of the same memory: each write lands at or before the
  // pixels still to be read (row y's output starts at y * width <= y * stride).
  std::uint8_t* out = image.data;
  for (int y = 0; y < image.height; ++y) {
    const std::uint8_t* p = image.row(y);
    for (int x = 0; x < image.width; ++x, p += 3) *out++ = luma(p[0], p[1], p[2]);
  }
  return ImageView{image.data, image.width, image.height, 1, image.width};
}

}  // namespace sluice::stages
