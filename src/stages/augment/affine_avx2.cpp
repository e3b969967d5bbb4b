// Pillow's bilinear affine filter in AVX2, four output pixels per step: each lane maps its pixel
// centre, floors, clamps and interpolates with the very double operations of bilinear_pixel
// (affine_kernels.hpp), in the same order, so the bytes equal the scalar reference and Pillow's.
// Each tap of each pixel comes in as one 32-bit load (all its channels at once); a group whose load
// would read past the source's last byte, and the row's last pixels beyond a multiple of four, go
// through bilinear_pixel. Lanes mapped outside the source keep the fill.
// Compiled with per-function target attributes (no AVX2 instruction runs before the CPU check)
// and -ffp-contract=off (src/CMakeLists.txt): a fused multiply-add would round differently.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>

#include "stages/augment/affine_kernels.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

namespace sluice::stages::affine_detail {
namespace {

#define SLUICE_AVX2 __attribute__((target("avx2")))

// The largest source size (bytes) whose offsets the kernel holds in 32-bit lanes.
constexpr std::int64_t kMaxBytes = std::numeric_limits<std::int32_t>::max() - 8;

// Clamps each lane to [0, hi].
SLUICE_AVX2 inline __m128i clamp(__m128i v, __m128i hi) {
  return _mm_min_epi32(_mm_max_epi32(v, _mm_setzero_si128()), hi);
}

// Channel K of four loaded pixels (channel 0 in the low byte of each lane), as doubles.
template <int K>
SLUICE_AVX2 inline __m256d channel(__m128i pixels) {
  return _mm256_cvtepi32_pd(_mm_and_si128(_mm_srli_epi32(pixels, 8 * K), _mm_set1_epi32(0xFF)));
}

// The four pixels' bytes (channel 0 lowest in each 32-bit lane) packed as C bytes per pixel.
template <int C>
SLUICE_AVX2 inline void store_pixels(std::uint8_t* out, __m128i pixels) {
  if constexpr (C == 4) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), pixels);
  } else {
    const __m128i order = C == 3   ? _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1)
                          : C == 2 ? _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1)
                                   : _mm_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    alignas(16) std::uint8_t bytes[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(bytes), _mm_shuffle_epi8(pixels, order));
    std::memcpy(out, bytes, 4 * C);
  }
}

// Interpolates channel K of the four pixels and ORs its truncated value into `packed`.
template <int K>
SLUICE_AVX2 inline __m128i blend_channel(__m128i packed, __m128i g00, __m128i g01, __m128i g10, __m128i g11,
                                         __m256d dx, __m256d dy) {
  const __m256d p00 = channel<K>(g00);
  const __m256d p10 = channel<K>(g10);
  // v1 = p00 + (p01 - p00) * dx; v2 likewise on the second row (the first again where it is
  // clamped, which gives v1's value); v1 + (v2 - v1) * dy.
  const __m256d v1 = _mm256_add_pd(p00, _mm256_mul_pd(_mm256_sub_pd(channel<K>(g01), p00), dx));
  const __m256d v2 = _mm256_add_pd(p10, _mm256_mul_pd(_mm256_sub_pd(channel<K>(g11), p10), dx));
  const __m256d v = _mm256_add_pd(v1, _mm256_mul_pd(_mm256_sub_pd(v2, v1), dy));
  return _mm_or_si128(packed, _mm_slli_epi32(_mm256_cvttpd_epi32(v), 8 * K));
}

template <int C, std::size_t... K>
SLUICE_AVX2 inline __m128i interpolate(__m128i g00, __m128i g01, __m128i g10, __m128i g11, __m256d dx, __m256d dy,
                                       std::index_sequence<K...>) {
  __m128i packed = _mm_setzero_si128();
  ((packed = blend_channel<static_cast<int>(K)>(packed, g00, g01, g10, g11, dx, dy)), ...);
  return packed;
}

// Four 32-bit words of the source at byte offsets at[0..3] (four plain loads: the first pass left
// the offsets in memory; a gather measured no faster here).
SLUICE_AVX2 inline __m128i load_words(const std::uint8_t* base, const std::int32_t* at) {
  std::int32_t w[4];
  for (int i = 0; i < 4; ++i) std::memcpy(&w[i], base + at[i], 4);
  return _mm_setr_epi32(w[0], w[1], w[2], w[3]);
}

// A row is done in chunks of kChunk pixels, in two passes: the first maps every group of four
// pixels (coordinates, taps' byte offsets, weights) into these arrays, the second loads the taps
// and interpolates. Apart, each pass is a loop of short independent iterations the CPU overlaps;
// together, each group's long chain (map, floor, clamp, address, load, interpolate) stalled it.
constexpr int kChunk = 256;
enum class Group : std::uint8_t { kFill, kVector, kScalar };
struct RowPlan {
  alignas(32) double dx[kChunk];
  alignas(32) double dy[kChunk];
  alignas(16) std::int32_t o00[kChunk];
  alignas(16) std::int32_t o01[kChunk];
  alignas(16) std::int32_t o10[kChunk];
  alignas(16) std::int32_t o11[kChunk];
  Group group[kChunk / 4];
  std::uint8_t inside[kChunk / 4];
};

// Pass one over the groups of pixels [u0, u0 + n), n a multiple of 4.
template <int C>
SLUICE_AVX2 void plan_groups(ConstImageView src, const AffineMatrix& m, double yc, int u0, int n, RowPlan& plan) {
  const __m256d w = _mm256_set1_pd(src.width);
  const __m256d h = _mm256_set1_pd(src.height);
  const __m256d zero = _mm256_setzero_pd();
  const __m256d half = _mm256_set1_pd(0.5);
  const __m256d a = _mm256_set1_pd(m.a);
  const __m256d d = _mm256_set1_pd(m.d);
  // The scalar's a*xc + b*yc + c: b*yc is the same product for every pixel of the row.
  const __m256d byc = _mm256_set1_pd(m.b * yc);
  const __m256d eyc = _mm256_set1_pd(m.e * yc);
  const __m256d c = _mm256_set1_pd(m.c);
  const __m256d f = _mm256_set1_pd(m.f);
  const __m128i last_x = _mm_set1_epi32(src.width - 1);
  const __m128i last_y = _mm_set1_epi32(src.height - 1);
  const __m128i stride = _mm_set1_epi32(static_cast<std::int32_t>(src.stride));
  const __m128i lanes = _mm_setr_epi32(0, 1, 2, 3);
  const __m128i one = _mm_set1_epi32(1);
  // Offsets above this would make a 4-byte load read past the source's last byte.
  const std::int64_t end = (src.height - 1) * src.stride + static_cast<std::int64_t>(src.width) * C;
  const __m128i safe_limit = _mm_set1_epi32(static_cast<std::int32_t>(end - 4 + 1));
  for (int i = 0; i < n; i += 4) {
    const __m256d xc = _mm256_add_pd(_mm256_cvtepi32_pd(_mm_add_epi32(_mm_set1_epi32(u0 + i), lanes)), half);
    __m256d xin = _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(a, xc), byc), c);
    __m256d yin = _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(d, xc), eyc), f);
    const __m256d inside = _mm256_and_pd(
        _mm256_and_pd(_mm256_cmp_pd(xin, zero, _CMP_GE_OQ), _mm256_cmp_pd(xin, w, _CMP_LT_OQ)),
        _mm256_and_pd(_mm256_cmp_pd(yin, zero, _CMP_GE_OQ), _mm256_cmp_pd(yin, h, _CMP_LT_OQ)));
    const int inside_bits = _mm256_movemask_pd(inside);
    plan.inside[i / 4] = static_cast<std::uint8_t>(inside_bits);
    xin = _mm256_sub_pd(xin, half);
    yin = _mm256_sub_pd(yin, half);
    const __m256d fx = _mm256_floor_pd(xin);
    const __m256d fy = _mm256_floor_pd(yin);
    _mm256_store_pd(plan.dx + i, _mm256_sub_pd(xin, fx));
    _mm256_store_pd(plan.dy + i, _mm256_sub_pd(yin, fy));
    // Lanes outside the source may hold any integer here; the clamps keep their taps in range.
    const __m128i x = _mm256_cvttpd_epi32(fx);
    const __m128i y = _mm256_cvttpd_epi32(fy);
    const __m128i y_next = _mm_add_epi32(y, one);
    const __m128i has_row1 = _mm_andnot_si128(_mm_cmpgt_epi32(_mm_setzero_si128(), y_next),
                                              _mm_cmpgt_epi32(_mm_set1_epi32(src.height), y_next));
    // Without a second row the scalar reuses the first, whose interpolation gives v1 again.
    const __m128i row0 = _mm_mullo_epi32(clamp(y, last_y), stride);
    const __m128i row1 = _mm_blendv_epi8(row0, _mm_mullo_epi32(y_next, stride), has_row1);
    const __m128i x0 = _mm_mullo_epi32(clamp(x, last_x), _mm_set1_epi32(C));
    const __m128i x1 = _mm_mullo_epi32(clamp(_mm_add_epi32(x, one), last_x), _mm_set1_epi32(C));
    const __m128i o00 = _mm_add_epi32(row0, x0);
    const __m128i o01 = _mm_add_epi32(row0, x1);
    const __m128i o10 = _mm_add_epi32(row1, x0);
    const __m128i o11 = _mm_add_epi32(row1, x1);
    _mm_store_si128(reinterpret_cast<__m128i*>(plan.o00 + i), o00);
    _mm_store_si128(reinterpret_cast<__m128i*>(plan.o01 + i), o01);
    _mm_store_si128(reinterpret_cast<__m128i*>(plan.o10 + i), o10);
    _mm_store_si128(reinterpret_cast<__m128i*>(plan.o11 + i), o11);
    const __m128i highest = _mm_max_epi32(_mm_max_epi32(o00, o01), _mm_max_epi32(o10, o11));
    const bool safe = _mm_movemask_epi8(_mm_cmplt_epi32(highest, safe_limit)) == 0xFFFF;
    // The source's last bytes go through the scalar kernel: a 4-byte load would read past them.
    plan.group[i / 4] = inside_bits == 0 ? Group::kFill : (safe ? Group::kVector : Group::kScalar);
  }
}

// Pass two: the taps and the interpolation of each planned group.
template <int C>
SLUICE_AVX2 void run_groups(ConstImageView src, const AffineMatrix& m, double yc, int u0, int n, const RowPlan& plan,
                            std::uint8_t* out, __m128i fill) {
  const __m128i bits = _mm_setr_epi32(1, 2, 4, 8);
  for (int i = 0; i < n; i += 4) {
    const Group group = plan.group[i / 4];
    if (group == Group::kFill) continue;  // all four keep the fill
    const int u = u0 + i;
    if (group == Group::kScalar) {
      for (int k = 0; k < 4; ++k) bilinear_pixel<C>(src, m, u + k, yc, out + (u + k) * C);
      continue;
    }
    const __m128i packed =
        interpolate<C>(load_words(src.data, plan.o00 + i), load_words(src.data, plan.o01 + i),
                       load_words(src.data, plan.o10 + i), load_words(src.data, plan.o11 + i),
                       _mm256_load_pd(plan.dx + i), _mm256_load_pd(plan.dy + i), std::make_index_sequence<C>{});
    // Lanes outside the source take the fill pixel the destination already holds.
    const __m128i keep = _mm_cmpeq_epi32(_mm_and_si128(_mm_set1_epi32(plan.inside[i / 4]), bits), bits);
    store_pixels<C>(out + u * C, _mm_blendv_epi8(fill, packed, keep));
  }
}

// One output row. yc is the row's centre; fill the packed fill pixel.
template <int C>
SLUICE_AVX2 void bilinear_row(ConstImageView src, std::uint8_t* out, int width, const AffineMatrix& m, double yc,
                              __m128i fill, RowPlan& plan) {
  const int groups_end = width / 4 * 4;
  for (int u0 = 0; u0 < groups_end; u0 += kChunk) {
    const int n = std::min(kChunk, groups_end - u0);
    plan_groups<C>(src, m, yc, u0, n, plan);
    run_groups<C>(src, m, yc, u0, n, plan, out, fill);
  }
  for (int u = groups_end; u < width; ++u) bilinear_pixel<C>(src, m, u, yc, out + u * C);
}

template <int C>
SLUICE_AVX2 void bilinear_image(ConstImageView src, ImageView dst, const AffineMatrix& m, std::uint32_t fill_pixel) {
  const __m128i fill = _mm_set1_epi32(static_cast<std::int32_t>(fill_pixel));
  RowPlan plan;
  for (int v = 0; v < dst.height; ++v) bilinear_row<C>(src, dst.row(v), dst.width, m, v + 0.5, fill, plan);
}

}  // namespace

bool avx2_supported() {
  static const bool supported = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return supported;
}

bool avx2_fits(ConstImageView src) {
  return src.stride > 0 && src.height > 0 && src.width > 0 &&
         static_cast<std::int64_t>(src.height) * src.stride + 8 < kMaxBytes;
}

void bilinear_avx2(ConstImageView src, ImageView dst, const AffineMatrix& m, std::uint32_t fill_pixel) {
  switch (src.channels) {
    case 1: bilinear_image<1>(src, dst, m, fill_pixel); break;
    case 2: bilinear_image<2>(src, dst, m, fill_pixel); break;
    case 3: bilinear_image<3>(src, dst, m, fill_pixel); break;
    default: bilinear_image<4>(src, dst, m, fill_pixel); break;
  }
}

}  // namespace sluice::stages::affine_detail

#else

namespace sluice::stages::affine_detail {

bool avx2_supported() { return false; }
bool avx2_fits(ConstImageView) { return false; }
void bilinear_avx2(ConstImageView, ImageView, const AffineMatrix&, std::uint32_t) {}

}  // namespace sluice::stages::affine_detail

#endif
