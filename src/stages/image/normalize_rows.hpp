// Normalize's row kernels behind one table, scalar and AVX2, so NormalizeKernel::run picks a set
// at run time and the tests can hold the vector set to the scalar one bit for bit. Internal to
// src/stages.
#pragma once

#include <cstdint>

namespace sluice::stages::normalize_detail {

// The 24-element channel pattern of an interleaved row: element i has channel i % channels, and
// 24 is a multiple of 1, 3 and 4 and of the 8 floats of an AVX2 register.
inline constexpr int kPatternLength = 24;

struct Affine {
  // Per channel: out = (x / 255 - mean) / std, torchvision's ToTensor + Normalize in f32.
  float mean[4] = {0, 0, 0, 0};
  float std[4] = {1, 1, 1, 1};
  // The same repeated over kPatternLength interleaved elements (set by setup).
  float mean_pattern[kPatternLength] = {};
  float std_pattern[kPatternLength] = {};
  int channels = 3;
  // table[c * 256 + x]: the f32 result for byte x of channel c, computed with the expression
  // above; vector kernels gather from it instead of dividing (two divisions per element are the
  // bottleneck otherwise), and stay bit-identical because the table is the expression.
  float table[4 * 256] = {};
  // Offsets into table of each element of the interleaved pattern: (i % channels) * 256.
  std::int32_t table_pattern[kPatternLength] = {};
  // Per channel, and repeated over the pattern: the f32 reciprocal of std, for the divisions
  // done as a multiply and one FMA correction (divide_by_fma below).
  float rstd[4] = {1, 1, 1, 1};
  float rstd_pattern[kPatternLength] = {};
  // True when, for every byte value of every channel, the two divisions done as q = a * (1/b)
  // then q + fma(-q, b, a) * (1/b) give the table's value bit for bit (setup checks all of them;
  // the correction makes each quotient the correctly rounded one). Vector kernels then compute
  // instead of gathering; otherwise they gather from the table.
  bool divide_by_fma = false;
};

// The expression above with its two divisions done as a multiply and one FMA correction each,
// in the order the vector kernels use; setup compares it with the table.
float affine_by_fma(std::uint8_t v, float mean, float std, float rstd);

struct RowKernels {
  // Pixels [x0, x0 + n) of an interleaved row (mirrored: pixel x comes from width - 1 - x) into
  // one array per channel.
  void (*deinterleave)(const std::uint8_t* row, int width, int x0, int n, int channels, bool flip,
                       std::uint8_t* const* planes);
  // One channel: dst[i] = f(src[i]) with that channel's mean and std, i < n.
  // stream: write with non-temporal stores (large samples, read much later by another thread).
  void (*plane_f32)(const std::uint8_t* src, int n, int channel, const Affine& a, bool stream, float* dst);
  void (*plane_u16)(const std::uint8_t* src, int n, int channel, const Affine& a, bool f16, std::uint16_t* dst);
  // Interleaved: element i of channel i % channels, i < n (n a whole number of pixels).
  void (*flat_f32)(const std::uint8_t* src, int n, const Affine& a, float* dst);
  void (*flat_u16)(const std::uint8_t* src, int n, const Affine& a, bool f16, std::uint16_t* dst);
  // Orders the non-temporal stores before whatever publishes the output (no-op if none).
  void (*fence)();
};

const RowKernels& scalar_kernels();
void deinterleave_scalar(const std::uint8_t* row, int width, int x0, int n, int channels, bool flip,
                         std::uint8_t* const* planes);
// nullptr when this CPU lacks AVX2, FMA and F16C (or the build is not for x86).
const RowKernels* avx2_kernels();

}  // namespace sluice::stages::normalize_detail
