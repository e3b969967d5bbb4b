// GpuNormalizer: validation (the same rules and messages as the pipeline's normalize), sizes,
// the launch, and the CPU twin. The twin evaluates the kernel's expression once per channel and
// byte value, (float(v) / 255 - mean) / std, exactly the expression of src/stages/image/normalize.cpp,
// and converts with core/half.hpp, the conversions the pipeline uses; a table of 256 entries per
// channel then gives every element, so the twin is also quick enough to be the host backend.
#include "sluice/detail/device/gpu_normalize.hpp"

#include <string>

#include "device/cuda_backend.hpp"
#include "sluice/core/error.hpp"
#include "sluice/detail/core/half.hpp"

namespace sluice {
namespace {

template <class T>
void gather(const std::uint8_t* src, T* dst, const T (*table)[256], std::int64_t batch, std::int64_t pixels,
            int channels, bool nchw) {
  for (std::int64_t n = 0; n < batch; ++n) {
    const std::uint8_t* in = src + n * pixels * channels;
    T* out = dst + n * pixels * channels;
    if (nchw) {
      for (int c = 0; c < channels; ++c) {
        const T* t = table[c];
        T* plane = out + c * pixels;
        for (std::int64_t i = 0; i < pixels; ++i) plane[i] = t[in[i * channels + c]];
      }
    } else {
      for (std::int64_t i = 0; i < pixels * channels; ++i) out[i] = table[i % channels][in[i]];
    }
  }
}

void check_geometry(int batch, int height, int width) {
  if (batch < 0 || height < 0 || width < 0) {
    throw Error(ErrorCode::kInvalidArgument, "gpu normalize: negative batch geometry " + std::to_string(batch) + "x" +
                                                 std::to_string(height) + "x" + std::to_string(width));
  }
}

}  // namespace

void GpuNormalizer::setup(const GpuNormalizeOptions& options, int channels) {
  if (channels < 1 || channels > kMaxChannels) {
    throw Error(ErrorCode::kInvalidArgument, "gpu normalize: unsupported channel count " + std::to_string(channels));
  }
  const auto wrong = [&](const std::vector<float>& v) {
    return !v.empty() && v.size() != static_cast<std::size_t>(channels) && v.size() != 1;
  };
  if (wrong(options.mean) || wrong(options.std)) {
    throw Error(ErrorCode::kInvalidArgument,
                "gpu normalize: mean and std need one value per channel (" + std::to_string(channels) +
                    ") or one for all, got " + std::to_string(options.mean.size()) + " and " +
                    std::to_string(options.std.size()));
  }
  for (float s : options.std) {
    if (!(s > 0.0f)) {
      throw Error(ErrorCode::kInvalidArgument, "gpu normalize: every std must be > 0, got " + std::to_string(s));
    }
  }
  if (options.dtype != DType::kF32 && options.dtype != DType::kF16 && options.dtype != DType::kBF16) {
    throw Error(ErrorCode::kInvalidArgument, "gpu normalize: output dtype must be f32, f16 or bf16, not " +
                                                 std::string(to_string(options.dtype)) +
                                                 " (a u8 batch needs no device normalize)");
  }
  channels_ = channels;
  dtype_ = options.dtype;
  layout_ = options.layout;
  for (int c = 0; c < kMaxChannels; ++c) {
    const auto pick = [c](const std::vector<float>& v, float none) {
      return v.empty() ? none : v[v.size() == 1 ? 0 : static_cast<std::size_t>(c)];
    };
    mean_[c] = c < channels ? pick(options.mean, 0.0f) : 0.0f;
    std_[c] = c < channels ? pick(options.std, 1.0f) : 1.0f;
  }
}

std::size_t GpuNormalizer::input_bytes(int batch, int height, int width) const {
  check_geometry(batch, height, width);
  return static_cast<std::size_t>(batch) * height * width * channels_;
}

std::size_t GpuNormalizer::output_bytes(int batch, int height, int width) const {
  return input_bytes(batch, height, width) * size_of(dtype_);
}

void GpuNormalizer::run(const void* src, void* dst, int batch, int height, int width, Stream& stream) const {
  if (channels_ == 0) throw Error(ErrorCode::kInvalidArgument, "gpu normalize: run() before setup()");
  check_geometry(batch, height, width);
  const DeviceId device = stream.device();
  if (device.is_host()) {
    run_reference(static_cast<const std::uint8_t*>(src), dst, batch, height, width);
    return;
  }
  device_detail::NormalizeLaunch launch;
  launch.src = static_cast<const std::uint8_t*>(src);
  launch.dst = dst;
  launch.batch = batch;
  launch.pixels = static_cast<std::int64_t>(height) * width;
  launch.channels = channels_;
  launch.dtype = dtype_ == DType::kF32 ? 0 : dtype_ == DType::kF16 ? 1 : 2;
  launch.nchw = layout_ == Layout::kNCHW;
  for (int c = 0; c < kMaxChannels; ++c) {
    launch.mean[c] = mean_[c];
    launch.std[c] = std_[c];
  }
  device_detail::launch_normalize(device.index, launch, stream.native_handle());
}

void GpuNormalizer::run_reference(const std::uint8_t* src, void* dst, int batch, int height, int width) const {
  if (channels_ == 0) throw Error(ErrorCode::kInvalidArgument, "gpu normalize: run_reference() before setup()");
  check_geometry(batch, height, width);
  // table[c][v]: the value of byte v in channel c, computed with the pipeline's expression.
  float values[kMaxChannels][256];
  for (int c = 0; c < channels_; ++c) {
    for (int v = 0; v < 256; ++v) values[c][v] = (static_cast<float>(v) / 255.0f - mean_[c]) / std_[c];
  }
  const std::int64_t pixels = static_cast<std::int64_t>(height) * width;
  const bool nchw = layout_ == Layout::kNCHW;
  if (dtype_ == DType::kF32) {
    gather(src, static_cast<float*>(dst), values, batch, pixels, channels_, nchw);
    return;
  }
  std::uint16_t halves[kMaxChannels][256];
  for (int c = 0; c < channels_; ++c) {
    for (int v = 0; v < 256; ++v) {
      halves[c][v] = dtype_ == DType::kF16 ? float_to_f16(values[c][v]) : float_to_bf16(values[c][v]);
    }
  }
  gather(src, static_cast<std::uint16_t*>(dst), halves, batch, pixels, channels_, nchw);
}

}  // namespace sluice
