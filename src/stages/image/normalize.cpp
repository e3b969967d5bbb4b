// Normalize: per-row channel gathering and mirroring, then the row kernels; and the portable
// scalar row kernels the vector ones are held to.
#include "stages/image/normalize.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "sluice/core/error.hpp"
#include "sluice/detail/core/half.hpp"

namespace sluice::stages {

namespace normalize_detail {
namespace {

inline float affine1(std::uint8_t v, const Affine& a, int c) { return (static_cast<float>(v) / 255.0f - a.mean[c]) / a.std[c]; }
inline std::uint16_t to_u16(float v, bool f16) { return f16 ? float_to_f16(v) : float_to_bf16(v); }

void plane_f32(const std::uint8_t* src, int n, int c, const Affine& a, bool /*stream*/, float* dst) {
  for (int i = 0; i < n; ++i) dst[i] = affine1(src[i], a, c);
}
void plane_u16(const std::uint8_t* src, int n, int c, const Affine& a, bool f16, std::uint16_t* dst) {
  for (int i = 0; i < n; ++i) dst[i] = to_u16(affine1(src[i], a, c), f16);
}
void flat_f32(const std::uint8_t* src, int n, const Affine& a, float* dst) {
  for (int i = 0; i < n; ++i) dst[i] = affine1(src[i], a, i % a.channels);
}
void flat_u16(const std::uint8_t* src, int n, const Affine& a, bool f16, std::uint16_t* dst) {
  for (int i = 0; i < n; ++i) dst[i] = to_u16(affine1(src[i], a, i % a.channels), f16);
}
void no_fence() {}

}  // namespace

float affine_by_fma(std::uint8_t v, float mean, float std, float rstd) {
  const float x = static_cast<float>(v);
  constexpr float k255 = 255.0f;
  constexpr float r255 = 1.0f / 255.0f;
  float q = x * r255;
  q = std::fma(std::fma(-q, k255, x), r255, q);
  const float t = q - mean;
  const float o = t * rstd;
  return std::fma(std::fma(-o, std, t), rstd, o);
}

void deinterleave_scalar(const std::uint8_t* row, int width, int x0, int n, int channels, bool flip,
                         std::uint8_t* const* planes) {
  for (int i = 0; i < n; ++i) {
    const std::uint8_t* px = row + (flip ? width - 1 - (x0 + i) : x0 + i) * channels;
    for (int c = 0; c < channels; ++c) planes[c][i] = px[c];
  }
}

const RowKernels& scalar_kernels() {
  static const RowKernels kernels{deinterleave_scalar, plane_f32, plane_u16, flat_f32, flat_u16, no_fence};
  return kernels;
}

}  // namespace normalize_detail

namespace {
// Pixels per chunk: the stack buffers hold one chunk of every channel.
constexpr int kChunk = 256;
constexpr std::size_t kStreamMinBytes = 256 * 1024;
}  // namespace

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

  affine_ = {};
  affine_.channels = channels;
  for (int c = 0; c < channels; ++c) {
    const auto pick = [c](const std::vector<float>& v, float none) {
      return v.empty() ? none : v[v.size() == 1 ? 0 : static_cast<std::size_t>(c)];
    };
    affine_.mean[c] = pick(options.mean, 0.0f);
    affine_.std[c] = pick(options.std, 1.0f);
  }
  for (int i = 0; i < normalize_detail::kPatternLength; ++i) {
    affine_.mean_pattern[i] = affine_.mean[i % channels];
    affine_.std_pattern[i] = affine_.std[i % channels];
    affine_.table_pattern[i] = (i % channels) * 256;
  }
  affine_.divide_by_fma = true;
  for (int c = 0; c < channels; ++c) {
    affine_.rstd[c] = 1.0f / affine_.std[c];
    for (int v = 0; v < 256; ++v) {
      const float exact = (static_cast<float>(v) / 255.0f - affine_.mean[c]) / affine_.std[c];
      affine_.table[c * 256 + v] = exact;
      const float by_fma = normalize_detail::affine_by_fma(static_cast<std::uint8_t>(v), affine_.mean[c],
                                                           affine_.std[c], affine_.rstd[c]);
      if (std::memcmp(&exact, &by_fma, sizeof exact) != 0) affine_.divide_by_fma = false;
    }
  }
  for (int i = 0; i < normalize_detail::kPatternLength; ++i) affine_.rstd_pattern[i] = affine_.rstd[i % channels];
  const auto* fast = normalize_detail::avx2_kernels();
  kernels_ = fast != nullptr ? fast : &normalize_detail::scalar_kernels();
}

std::size_t NormalizeKernel::sample_bytes(Size2 size) const {
  return static_cast<std::size_t>(size.width) * size.height * channels_ * size_of(dtype_);
}

void NormalizeKernel::run_bytes(ConstImageView src, bool flip, std::uint8_t* dst) const {
  const int w = src.width;
  const int h = src.height;
  const int cn = channels_;
  const std::size_t plane = static_cast<std::size_t>(w) * h;
  for (int y = 0; y < h; ++y) {
    const std::uint8_t* in = src.row(y);
    const std::size_t out_index = static_cast<std::size_t>(y) * w;
    if (layout_ == Layout::kNCHW) {
      std::uint8_t* planes[kMaxChannels];
      for (int c = 0; c < cn; ++c) planes[c] = dst + c * plane + out_index;
      kernels_->deinterleave(in, w, 0, w, cn, flip, planes);
    } else {
      for (int x = 0; x < w; ++x) {
        std::memcpy(dst + (out_index + x) * cn, in + (flip ? w - 1 - x : x) * cn, static_cast<std::size_t>(cn));
      }
    }
  }
}

void NormalizeKernel::run(ConstImageView src, bool flip, void* dst) const {
  const int w = src.width;
  const int h = src.height;
  const int cn = channels_;
  if (dtype_ == DType::kU8) {
    if (identity_ && !flip) {
      const std::size_t row = static_cast<std::size_t>(w) * cn;
      auto* out = static_cast<std::uint8_t*>(dst);
      for (int y = 0; y < h; ++y) std::memcpy(out + y * row, src.row(y), row);
    } else {
      run_bytes(src, flip, static_cast<std::uint8_t*>(dst));
    }
    return;
  }
  const auto& k = *kernels_;
  const bool f16 = dtype_ == DType::kF16;
  // Streaming stores pay when the sample is too big to stay in cache until the consumer reads it;
  // a small one (a 32x32 sample is 12 KB) is better left in cache.
  const bool stream = sample_bytes({w, h}) >= kStreamMinBytes;
  const std::size_t plane = static_cast<std::size_t>(w) * h;
  alignas(32) std::uint8_t gathered[kMaxChannels][kChunk];   // (channel, pixel): CHW chunks
  alignas(32) std::uint8_t mirrored[kMaxChannels * kChunk];  // (pixel, channel): HWC flipped chunks
  for (int y = 0; y < h; ++y) {
    const std::uint8_t* in = src.row(y);
    for (int x0 = 0; x0 < w; x0 += kChunk) {
      const int n = std::min(kChunk, w - x0);
      const std::size_t out_index = static_cast<std::size_t>(y) * w + x0;
      if (layout_ == Layout::kNCHW) {
        std::uint8_t* planes[kMaxChannels] = {gathered[0], gathered[1], gathered[2], gathered[3]};
        k.deinterleave(in, w, x0, n, cn, flip, planes);
        for (int c = 0; c < cn; ++c) {
          if (dtype_ == DType::kF32) {
            k.plane_f32(gathered[c], n, c, affine_, stream, static_cast<float*>(dst) + c * plane + out_index);
          } else {
            k.plane_u16(gathered[c], n, c, affine_, f16, static_cast<std::uint16_t*>(dst) + c * plane + out_index);
          }
        }
      } else {
        const std::uint8_t* flat = in + x0 * cn;
        if (flip) {
          for (int i = 0; i < n; ++i) std::memcpy(mirrored + i * cn, in + (w - 1 - (x0 + i)) * cn, static_cast<std::size_t>(cn));
          flat = mirrored;
        }
        if (dtype_ == DType::kF32) {
          k.flat_f32(flat, n * cn, affine_, static_cast<float*>(dst) + out_index * cn);
        } else {
          k.flat_u16(flat, n * cn, affine_, f16, static_cast<std::uint16_t*>(dst) + out_index * cn);
        }
      }
    }
  }
  k.fence();
}

}  // namespace sluice::stages
