// Normalise on the device: the batch crosses the bus as u8 HWC (1 byte an element instead of 2
// for f16/bf16 or 4 for f32), and one kernel casts, normalises and transposes it to the training
// layout. Values are sluice's CPU normalize bit for bit: (x / 255 - mean) / std in f32 with IEEE
// division and subtraction in that order (torchvision's ToTensor + Normalize), f16 and bf16 that
// value rounded once to nearest even.
//
// GpuNormalizer is a kernel in DALI's sense: setup() validates and fixes the parameters, run()
// writes into memory the caller owns. run_reference() is its CPU twin (llm.c practice): the GPU
// test holds the kernel to it bit for bit, the unit tests hold it to the straightforward formula
// and to the pipeline's own normalize. On the host device run() is the twin.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sluice/core/dtype.hpp"
#include "sluice/device/stream.hpp"

namespace sluice {

// The same fields and meaning as the pipeline's NormalizeOptions.
struct GpuNormalizeOptions {
  std::vector<float> mean;  // per channel, or one for all; [0, 1] units; empty: 0
  std::vector<float> std;   // per channel, or one for all; every one > 0; empty: 1
  Layout layout = Layout::kNCHW;
  DType dtype = DType::kF32;  // f32, f16 or bf16
};

class GpuNormalizer {
 public:
  static constexpr int kMaxChannels = 4;

  // Throws sluice::Error(kInvalidArgument) naming what to change: a channel count outside
  // [1, 4], mean/std sizes that do not match, std <= 0, an output that is not f32/f16/bf16.
  void setup(const GpuNormalizeOptions& options, int channels);

  int channels() const { return channels_; }
  DType dtype() const { return dtype_; }
  Layout layout() const { return layout_; }
  float mean(int channel) const { return mean_[channel]; }
  float std(int channel) const { return std_[channel]; }

  // (batch, height, width, channels) u8.
  std::size_t input_bytes(int batch, int height, int width) const;
  // (batch, channels, height, width) or (batch, height, width, channels) in dtype().
  std::size_t output_bytes(int batch, int height, int width) const;

  // Enqueues the kernel on `stream`: `src` (input_bytes) -> `dst` (output_bytes), both memory of
  // stream.device(). On the host device, runs run_reference() before returning.
  void run(const void* src, void* dst, int batch, int height, int width, Stream& stream) const;

  // The CPU twin: the same output bytes as the kernel, from host memory to host memory.
  void run_reference(const std::uint8_t* src, void* dst, int batch, int height, int width) const;

 private:
  int channels_ = 0;
  DType dtype_ = DType::kF32;
  Layout layout_ = Layout::kNCHW;
  float mean_[kMaxChannels] = {0, 0, 0, 0};
  float std_[kMaxChannels] = {1, 1, 1, 1};
};

}  // namespace sluice
