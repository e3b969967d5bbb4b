// Gaussian blur: torchvision's 1-D kernels, a row pass from the u8 source into an f32 image in the
// workspace, then a column pass from it into the destination, rounded half to even. Each tap of
// each pass is a plain multiply-add over contiguous floats (the compiler vectorises it); the
// reflection happens once per row, when the row is converted to f32 with its border.
#include "stages/augment/blur.hpp"

#include <cmath>
#include <cstdint>
#include <string>

#include "sluice/core/error.hpp"

namespace sluice::stages {
namespace {

constexpr std::size_t kAlign = 64;

// torch's "reflect" index (the edge pixel not repeated), repeated for any distance.
inline int reflect(int i, int n) {
  if (n == 1) return 0;
  const int period = 2 * (n - 1);
  i %= period;
  if (i < 0) i += period;
  return i < n ? i : period - i;
}

// torchvision's _get_gaussian_kernel1d: exp(-0.5 (x / sigma)^2) at x = -(k-1)/2 .. (k-1)/2,
// normalised to sum 1 (computed in double, stored in f32).
void gaussian_kernel(int size, double sigma, float* out) {
  const double half = (size - 1) * 0.5;
  double sum = 0;
  for (int i = 0; i < size; ++i) {
    const double x = -half + i;
    const double v = std::exp(-0.5 * (x / sigma) * (x / sigma));
    sum += v;
    out[i] = static_cast<float>(v);
  }
  for (int i = 0; i < size; ++i) out[i] = static_cast<float>(out[i] / sum);
}

// The f32 row-pass image, one output row, the padded row, the two kernels.
std::size_t floats_needed(Size2 size, int channels, const GaussianBlurParams& p) {
  const std::size_t row = static_cast<std::size_t>(size.width) * static_cast<std::size_t>(channels);
  const std::size_t padded = (static_cast<std::size_t>(size.width) + static_cast<std::size_t>(p.kernel_x - 1)) *
                             static_cast<std::size_t>(channels);
  return row * static_cast<std::size_t>(size.height) + row + padded + static_cast<std::size_t>(p.kernel_x) +
         static_cast<std::size_t>(p.kernel_y);
}

// Row pass of one row: out[x, k] = sum_t w[t] * in[reflect(x + t - r), k], summed in t's order.
// The row is first converted to f32 with its reflected border (`padded`: width + taps - 1
// pixels), so every tap is one contiguous multiply-add over floats.
void blur_row(const std::uint8_t* in, int width, int c, const float* w, int taps, float* padded, float* out) {
  const int r = taps / 2;
  for (int x = 0; x < width + taps - 1; ++x) {
    const std::uint8_t* px = in + reflect(x - r, width) * c;
    for (int k = 0; k < c; ++k) padded[x * c + k] = static_cast<float>(px[k]);
  }
  const int n = width * c;
  for (int i = 0; i < n; ++i) out[i] = 0.0f;
  for (int t = 0; t < taps; ++t) {
    const float wt = w[t];
    const float* src = padded + t * c;
    for (int i = 0; i < n; ++i) out[i] += wt * src[i];
  }
}

}  // namespace

void check_gaussian_blur(const GaussianBlurParams& p) {
  const auto check_size = [](int k, const char* axis) {
    if (k < 1 || k % 2 == 0) {
      throw Error(ErrorCode::kInvalidArgument, std::string("gaussian_blur: kernel size ") + axis +
                                                   " must be odd and positive, got " + std::to_string(k));
    }
  };
  const auto check_sigma = [](double s, const char* axis) {
    if (!(s > 0.0) || !std::isfinite(s)) {
      throw Error(ErrorCode::kInvalidArgument,
                  std::string("gaussian_blur: sigma ") + axis + " must be > 0 and finite, got " + std::to_string(s));
    }
  };
  check_size(p.kernel_x, "x");
  check_size(p.kernel_y, "y");
  check_sigma(p.sigma_x, "x");
  check_sigma(p.sigma_y, "y");
}

std::size_t gaussian_blur_workspace_bytes(Size2 size, int channels, const GaussianBlurParams& params) {
  if (size.width <= 0 || size.height <= 0 || channels <= 0) return 0;
  return floats_needed(size, channels, params) * sizeof(float) + kAlign;
}

void gaussian_blur(ConstImageView src, ImageView dst, const GaussianBlurParams& params,
                   std::span<std::byte> workspace) {
  check_gaussian_blur(params);
  if (src.width != dst.width || src.height != dst.height || src.channels != dst.channels) {
    throw Error(ErrorCode::kInvalidArgument, "gaussian_blur: source and destination differ in size or channels");
  }
  if (src.channels < 1) throw Error(ErrorCode::kInvalidArgument, "gaussian_blur: no channels");
  if (src.width <= 0 || src.height <= 0) return;
  const Size2 size{src.width, src.height};
  const int c = src.channels;
  if (workspace.size() < gaussian_blur_workspace_bytes(size, c, params)) {
    throw Error(ErrorCode::kInvalidArgument, "gaussian_blur: workspace smaller than gaussian_blur_workspace_bytes()");
  }
  auto address = reinterpret_cast<std::uintptr_t>(workspace.data());
  address = (address + kAlign - 1) & ~static_cast<std::uintptr_t>(kAlign - 1);
  auto* floats = reinterpret_cast<float*>(address);
  const std::size_t row = static_cast<std::size_t>(src.width) * static_cast<std::size_t>(c);
  float* rows = floats;                                             // (H, W*C) after the row pass
  float* acc = rows + row * static_cast<std::size_t>(src.height);  // (W*C) one output row
  float* padded = acc + row;                                      // (W + kernel_x - 1) * C
  float* wx = padded + (static_cast<std::size_t>(src.width) + static_cast<std::size_t>(params.kernel_x - 1)) *
                           static_cast<std::size_t>(c);
  float* wy = wx + params.kernel_x;
  gaussian_kernel(params.kernel_x, params.sigma_x, wx);
  gaussian_kernel(params.kernel_y, params.sigma_y, wy);

  for (int y = 0; y < src.height; ++y) {
    blur_row(src.row(y), src.width, c, wx, params.kernel_x, padded, rows + row * static_cast<std::size_t>(y));
  }
  const int r = params.kernel_y / 2;
  for (int y = 0; y < src.height; ++y) {
    for (std::size_t i = 0; i < row; ++i) acc[i] = 0.0f;
    for (int t = 0; t < params.kernel_y; ++t) {
      const float wt = wy[t];
      const float* in = rows + row * static_cast<std::size_t>(reflect(y + t - r, src.height));
      for (std::size_t i = 0; i < row; ++i) acc[i] += wt * in[i];
    }
    std::uint8_t* out = dst.row(y);
    for (std::size_t i = 0; i < row; ++i) {
      // torch.round: half to even. Adding and subtracting 2^23 rounds a float of magnitude below
      // 2^22 to an integer in the default rounding mode (nearest, ties to even), as nearbyint
      // does, without a call per value; the clamp keeps -0.0 and rounding noise in 0..255.
      float v = (acc[i] + 8388608.0f) - 8388608.0f;
      v = v < 0.0f ? 0.0f : v;
      v = v > 255.0f ? 255.0f : v;
      out[i] = static_cast<std::uint8_t>(static_cast<int>(v));
    }
  }
}

}  // namespace sluice::stages
