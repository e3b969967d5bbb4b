// Normalize: lookup tables built once per pipeline, then one lookup per output element.
#include "stages/normalize.hpp"

#include <cstring>
#include <string>

#include "sluice/core/error.hpp"
#include "sluice/core/half.hpp"

namespace sluice::stages {

void NormalizeKernel::setup(const NormalizeOptions& options, int channels) {
  if (channels < 1 || channels > kMaxChannels) {
    throw Error(ErrorCode::kInvalidArgument, "normalize: unsupported channel count " + std::to_string(channels));
  }
  const bool has_stats = !options.mean.empty() || !options.std.empty();
  if (has_stats) {
    const auto wrong = [&](const std::vector<float>& v) {
      return v.size() != static_cast<std::size_t>(channels) && v.size() != 1;
    };
    if (wrong(options.mean) || wrong(options.std)) {
      throw Error(ErrorCode::kInvalidArgument,
                  "normalize: mean and std need one value per channel (" + std::to_string(channels) +
                      ") or one for all, got " + std::to_string(options.mean.size()) + " and " +
                      std::to_string(options.std.size()));
    }
    for (float s : options.std) {
      if (!(s > 0.0f)) {
        throw Error(ErrorCode::kInvalidArgument, "normalize: every std must be > 0, got " + std::to_string(s));
      }
    }
  }
  if (options.dtype == DType::kI32) {
    throw Error(ErrorCode::kInvalidArgument, "normalize: output dtype must be u8, f32, f16 or bf16, not i32");
  }
  if (options.dtype == DType::kU8 && has_stats) {
    throw Error(ErrorCode::kInvalidArgument,
                "normalize: a u8 output cannot hold normalised values; use f32, f16 or bf16, or "
                "drop mean and std (and normalise on the GPU)");
  }
  dtype_ = options.dtype;
  layout_ = options.layout;
  channels_ = channels;
  identity_ = dtype_ == DType::kU8 && (layout_ == Layout::kNHWC || channels == 1);

  for (int c = 0; c < channels; ++c) {
    const float mean = has_stats ? options.mean[options.mean.size() == 1 ? 0 : static_cast<std::size_t>(c)] : 0.0f;
    const float std = has_stats ? options.std[options.std.size() == 1 ? 0 : static_cast<std::size_t>(c)] : 1.0f;
    for (int v = 0; v < 256; ++v) {
      // Same expression as torchvision's ToTensor + Normalize: (v / 255 - mean) / std in f32.
      const float x = (static_cast<float>(v) / 255.0f - mean) / std;
      f32_[c][v] = x;
      u16_[c][v] = dtype_ == DType::kF16 ? float_to_f16(x) : float_to_bf16(x);
      u8_[c][v] = static_cast<std::uint8_t>(v);
    }
  }
}

std::size_t NormalizeKernel::sample_bytes(Size2 size) const {
  return static_cast<std::size_t>(size.width) * size.height * channels_ * size_of(dtype_);
}

template <class T>
void NormalizeKernel::run_typed(ConstImageView src, bool flip, T* dst, const T (*table)[256]) const {
  const int w = src.width;
  const int h = src.height;
  const int c_count = channels_;
  if (layout_ == Layout::kNHWC) {
    for (int y = 0; y < h; ++y) {
      const std::uint8_t* in = src.row(y);
      T* out = dst + static_cast<std::size_t>(y) * w * c_count;
      for (int x = 0; x < w; ++x) {
        const std::uint8_t* px = in + (flip ? w - 1 - x : x) * c_count;
        for (int c = 0; c < c_count; ++c) out[x * c_count + c] = table[c][px[c]];
      }
    }
    return;
  }
  const std::size_t plane = static_cast<std::size_t>(w) * h;
  for (int c = 0; c < c_count; ++c) {
    const T* lut = table[c];
    T* out_plane = dst + c * plane;
    for (int y = 0; y < h; ++y) {
      const std::uint8_t* in = src.row(y) + c;
      T* out = out_plane + static_cast<std::size_t>(y) * w;
      if (flip) {
        for (int x = 0; x < w; ++x) out[x] = lut[in[(w - 1 - x) * c_count]];
      } else {
        for (int x = 0; x < w; ++x) out[x] = lut[in[x * c_count]];
      }
    }
  }
}

void NormalizeKernel::run(ConstImageView src, bool flip, void* dst) const {
  if (identity_ && !flip) {
    const std::size_t row = static_cast<std::size_t>(src.width) * channels_;
    auto* out = static_cast<std::uint8_t*>(dst);
    for (int y = 0; y < src.height; ++y) std::memcpy(out + y * row, src.row(y), row);
    return;
  }
  switch (dtype_) {
    case DType::kF32:
      run_typed(src, flip, static_cast<float*>(dst), f32_);
      break;
    case DType::kF16:
    case DType::kBF16:
      run_typed(src, flip, static_cast<std::uint16_t*>(dst),
                u16_);
      break;
    case DType::kU8:
      run_typed(src, flip, static_cast<std::uint8_t*>(dst),
                u8_);
      break;
    case DType::kI32:
      throw Error(ErrorCode::kInternal, "normalize: i32 output");
  }
}

}  // namespace sluice::stages
