// The CUDA backend's workspace sizes and carving (cuda_workspace.hpp): plain arithmetic over the
// op shapes, shared by CudaBackend and the planner's meta backend.
#include "train/cuda/cuda_workspace.hpp"

#include <algorithm>

namespace sluice::train::cuda_detail {
namespace {

// Images per weight-gradient group: as many (R x K) f32 partials as fit kPartialBytes.
std::int64_t group_for(std::int64_t rows, std::int64_t cols, std::int64_t chunk) {
  const auto per_image = static_cast<std::size_t>(rows * cols) * sizeof(float);
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(kPartialBytes / std::max<std::size_t>(per_image, 1)), 1,
                                  chunk);
}

// Images per chunk whose `per_image` bytes stay near kChunkBytes; at least 1, at most the batch.
std::int64_t chunk_for(std::size_t per_image, std::int64_t batch) {
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(kChunkBytes / std::max<std::size_t>(per_image, 1)), 1,
                                  std::max<std::int64_t>(batch, 1));
}

}  // namespace

std::size_t cublas_workspace_bytes(int compute_major) {
  return compute_major >= 9 ? std::size_t{32} << 20 : std::size_t{4} << 20;
}

ConvTiling plan_conv(const Conv2dShape& s, DType t) {
  ConvTiling p{};
  const Window2d& w = s.window;
  p.rows = std::int64_t{s.in_channels} * w.kernel_h * w.kernel_w;
  p.plane = s.out_plane();
  p.direct = w.kernel_h == 1 && w.kernel_w == 1 && w.stride_h == 1 && w.stride_w == 1 && w.pad_h == 0 && w.pad_w == 0;
  p.elem = size_of(t);
  p.chunk = chunk_for(static_cast<std::size_t>(p.rows * p.plane) * (p.elem + sizeof(float)), s.batch);
  p.group = group_for(p.rows, s.out_channels, p.chunk);
  return p;
}

ConvScratch carve_conv(Carver& c, const Conv2dShape& s, const ConvTiling& p, DType t) {
  ConvScratch out;
  const auto chunk_elems = static_cast<std::size_t>(p.chunk * p.rows * p.plane);
  out.col = c.take(p.direct ? 0 : chunk_elems * p.elem);
  out.col_grad = c.take<float>(p.direct && t == DType::kF32 ? 0 : chunk_elems * sizeof(float));
  out.dw = c.take<float>(static_cast<std::size_t>(std::int64_t{s.out_channels} * p.rows) * sizeof(float));
  out.partials = c.take<float>(static_cast<std::size_t>(p.group * s.out_channels * p.rows) * sizeof(float));
  return out;
}

SeparableTiling plan_separable(const SeparableShape& s, DType t) {
  SeparableTiling p{};
  p.channels = s.depthwise.in_channels;
  p.plane = s.depthwise.out_plane();
  p.elem = size_of(t);
  p.chunk = chunk_for(static_cast<std::size_t>(p.channels * p.plane) * (p.elem + sizeof(float)), s.depthwise.batch);
  p.group = group_for(p.channels, s.out_channels, p.chunk);
  return p;
}

SeparableScratch carve_separable(Carver& c, const SeparableShape& s, const SeparableTiling& p) {
  SeparableScratch out;
  const auto chunk_elems = static_cast<std::size_t>(p.chunk * p.channels * p.plane);
  out.mid = c.take(chunk_elems * p.elem);
  out.mid_grad = c.take<float>(chunk_elems * sizeof(float));
  out.dwp = c.take<float>(static_cast<std::size_t>(s.out_channels * p.channels) * sizeof(float));
  out.dwd = c.take<float>(
      static_cast<std::size_t>(p.channels * s.depthwise.window.kernel_h * s.depthwise.window.kernel_w) * sizeof(float));
  out.partials = c.take<float>(static_cast<std::size_t>(p.group * s.out_channels * p.channels) * sizeof(float));
  return out;
}

std::size_t conv2d_forward_workspace(const Conv2dShape& s, DType t) {
  const ConvTiling p = plan_conv(s, t);
  return p.direct ? 0 : align256(static_cast<std::size_t>(p.chunk * p.rows * p.plane) * p.elem);
}

std::size_t conv2d_backward_workspace(const Conv2dShape& s, DType t) {
  Carver c;
  carve_conv(c, s, plan_conv(s, t), t);
  return c.bytes();
}

std::size_t depthwise_conv2d_backward_workspace(const Conv2dShape& s) {
  return align256(static_cast<std::size_t>(std::int64_t{s.in_channels} * s.window.kernel_h * s.window.kernel_w) *
                  sizeof(float));
}

std::size_t separable_conv2d_forward_workspace(const SeparableShape& s, DType t) {
  const SeparableTiling p = plan_separable(s, t);
  return align256(static_cast<std::size_t>(p.chunk * p.channels * p.plane) * p.elem);
}

std::size_t separable_conv2d_backward_workspace(const SeparableShape& s, DType t) {
  Carver c;
  carve_separable(c, s, plan_separable(s, t));
  return c.bytes();
}

std::size_t softmax_cross_entropy_workspace(std::int64_t rows) {
  if (rows <= 0) return 0;
  const auto r = static_cast<std::size_t>(rows);
  return align256(r * sizeof(float)) + align256(r * sizeof(int)) + align256(kLossSummaryBytes);
}

}  // namespace sluice::train::cuda_detail
