// The normalize kernel: the last step of a sample, writing its pixels into the sample's slot of
// the batch buffer in the batch's dtype and layout, mirrored if the sample was flipped.
//
// Every output value is a function of one input byte and its channel, so setup() tabulates
// (x / 255 - mean) / std for all 256 bytes per channel, already converted to the output dtype
// (f16 and bf16 rounded once, exactly): run() is a table lookup per element, the same cost for
// every dtype and bit-exact with the scalar formula.
#pragma once

#include <cstdint>

#include "sluice/core/image.hpp"
#include "sluice/pipeline/options.hpp"

namespace sluice::stages {

class NormalizeKernel {
 public:
  static constexpr int kMaxChannels = 4;

  // Throws sluice::Error(kInvalidArgument) naming what to change: mean/std sizes that do not
  // match the channels, std <= 0, mean/std with a u8 output, an i32 output.
  void setup(const NormalizeOptions& options, int channels);

  DType dtype() const { return dtype_; }
  Layout layout() const { return layout_; }
  // Bytes one sample of this size occupies in the batch.
  std::size_t sample_bytes(Size2 size) const;
  // True when the output is the input bytes unchanged (u8, NHWC, no mean/std): the resampler
  // can then write straight into the batch slot.
  bool is_identity() const { return identity_; }

  // src: width x height x channels; dst: sample_bytes() bytes.
  void run(ConstImageView src, bool flip, void* dst) const;

 private:
  template <class T>
  void run_typed(ConstImageView src, bool flip, T* dst, const T (*table)[256]) const;

  DType dtype_ = DType::kF32;
  Layout layout_ = Layout::kNCHW;
  int channels_ = 3;
  bool identity_ = false;
  // (channel, byte value) -> output value, per output dtype.
  float f32_[kMaxChannels][256] = {};
  std::uint16_t u16_[kMaxChannels][256] = {};  // f16 or bf16 bits
  std::uint8_t u8_[kMaxChannels][256] = {};
};

}  // namespace sluice::stages
