// The normalize kernel: the last step of a sample, writing its pixels into the sample's slot of
// the batch buffer in the batch's dtype and layout, mirrored if the sample was flipped.
//
// Values are torchvision's ToTensor + Normalize computed in f32, (x / 255 - mean) / std, bit-
// identical to torchvision's; f16 and bf16 are that value rounded once to nearest even. The
// vector kernels compute each division as a multiply by the reciprocal plus one FMA correction,
// which gives the correctly rounded quotient; setup checks that for all 256 byte values of each
// channel and otherwise has them gather from a table of the exact values. Rows are converted in
// chunks: pixels are first gathered per channel (and mirrored) in a small stack buffer, then
// converted with the fastest row kernels this CPU has (normalize_rows.hpp).
#pragma once

#include <cstdint>

#include "sluice/detail/core/image.hpp"
#include "sluice/pipeline/options.hpp"
#include "stages/image/normalize_rows.hpp"

namespace sluice::stages {

class NormalizeKernel {
 public:
  static constexpr int kMaxChannels = 4;

  // Throws sluice::Error(kInvalidArgument) naming what to change: mean/std sizes that do not
  // match the channels, std <= 0, mean/std with a u8 output, an i32 output.
  void setup(const NormalizeOptions& options, int channels);
  // Tests: force the portable row kernels.
  void use_scalar_kernels() { kernels_ = &normalize_detail::scalar_kernels(); }
  // Tests and benchmarks: have the vector kernels gather from the table even where the FMA
  // divisions were found exact; or run other row kernels.
  void use_table_lookup() { affine_.divide_by_fma = false; }
  void use_kernels(const normalize_detail::RowKernels& kernels) { kernels_ = &kernels; }
  // Tests: whether setup found the FMA divisions exact for these options.
  bool divides_by_fma() const { return affine_.divide_by_fma; }

  DType dtype() const { return dtype_; }
  Layout layout() const { return layout_; }
  // Bytes one sample of this size occupies in the batch.
  std::size_t sample_bytes(Size2 size) const;
  // True when the output is the input bytes unchanged (u8, NHWC or one channel, no mean/std):
  // the resampler can then write straight into the batch slot.
  bool is_identity() const { return identity_; }

  // src: width x height x channels; dst: sample_bytes() bytes.
  void run(ConstImageView src, bool flip, void* dst) const;

 private:
  void run_bytes(ConstImageView src, bool flip, std::uint8_t* dst) const;

  DType dtype_ = DType::kF32;
  Layout layout_ = Layout::kNCHW;
  int channels_ = 3;
  bool identity_ = false;
  normalize_detail::Affine affine_;
  const normalize_detail::RowKernels* kernels_ = nullptr;
};

}  // namespace sluice::stages
