// CudaBackend's convolutions and Dense: Conv2D as im2col + cuBLAS GEMMs in chunks of images,
// DepthwiseConv2D as direct kernels, SeparableConv2D as a depthwise kernel into workspace + the
// pointwise GEMM per chunk (the depthwise result is recomputed in backward, never stored), Dense
// as GEMMs. Row-major tensors are column-major transposes to cuBLAS, so each call says its
// products in row-major terms.
//
// Workspace comes from Context::workspace, once per op, carved with cuda_workspace.hpp (which the
// planner models too). Chunks of images are sized so their im2col columns stay near kChunkBytes;
// weight gradients are per-image partials from one batched GEMM, folded in order into an f32 sum
// across chunks and rounded once into dw (overwritten or, with kAccumulate, added to).
#include <algorithm>
#include <cstddef>

#include "device/cuda_backend.hpp"
#include "train/cuda/cuda_backend.hpp"
#include "train/cuda/cuda_kernels.hpp"
#include "train/cuda/cuda_workspace.hpp"

namespace sluice::train::cuda_detail {
namespace {

namespace k = ::sluice::train::cuda_detail;

const std::byte* bytes_of(const Tensor& t) { return static_cast<const std::byte*>(t.data()); }
std::byte* bytes_of(Tensor& t) { return static_cast<std::byte*>(t.data()); }
const void* data_or_null(const Tensor* t) { return t != nullptr ? t->data() : nullptr; }

}  // namespace

std::size_t CudaBackend::conv2d_workspace(const Conv2dShape& s, DType dtype) const {
  return std::max(conv2d_forward_workspace(s, dtype), conv2d_backward_workspace(s, dtype));
}

void CudaBackend::conv2d_forward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor& w,
                                 const Tensor* bias, Tensor& y) {
  device_detail::ScopedDevice guard(index_);
  const DType t = x.dtype();
  const ConvTiling p = plan_conv(s, t);
  const std::size_t col_bytes = conv2d_forward_workspace(s, t);
  void* col = col_bytes > 0 ? ctx.workspace(col_bytes) : nullptr;
  const std::int64_t x_image = std::int64_t{s.in_channels} * s.in_plane();
  const std::int64_t y_image = std::int64_t{s.out_channels} * p.plane;
  for (std::int64_t n0 = 0; n0 < s.batch; n0 += p.chunk) {
    const std::int64_t nb = std::min(p.chunk, s.batch - n0);
    const std::byte* xs = bytes_of(x) + n0 * x_image * p.elem;
    std::byte* ys = bytes_of(y) + n0 * y_image * p.elem;
    if (!p.direct) k::im2col(t, xs, nb, s, col, stream_);
    if (bias != nullptr) k::broadcast_bias(t, bias->data(), nb, s.out_channels, p.plane, ys, stream_);
    // y_i^T (P, K) = col_i^T (P, R) W^T (R, K)
    gemm(ctx, false, false, p.plane, s.out_channels, p.rows,
         {p.direct ? static_cast<const void*>(xs) : col, t, as_int(p.plane), p.rows * p.plane},
         {w.data(), t, as_int(p.rows), 0}, bias != nullptr ? 1.0f : 0.0f, ys, t, as_int(p.plane), y_image, nb);
  }
}

void CudaBackend::conv2d_backward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor& w,
                                  const Tensor& dy, Tensor* dx, Tensor& dw, Tensor* dbias, GradMode mode) {
  device_detail::ScopedDevice guard(index_);
  const DType t = x.dtype();
  const bool accumulate = mode == GradMode::kAccumulate;
  const ConvTiling p = plan_conv(s, t);
  Carver carver(ctx.workspace(conv2d_backward_workspace(s, t)));
  const ConvScratch ws = carve_conv(carver, s, p, t);
  const std::int64_t x_image = std::int64_t{s.in_channels} * s.in_plane();
  const std::int64_t y_image = std::int64_t{s.out_channels} * p.plane;
  const std::int64_t col_image = p.rows * p.plane;
  const std::int64_t dw_count = std::int64_t{s.out_channels} * p.rows;
  if (s.batch == 0) {  // no image sums into dw below: its sum is 0, as the CPU backend's
    check(cudaMemsetAsync(ws.dw, 0, static_cast<std::size_t>(dw_count) * sizeof(float), stream_), "cudaMemsetAsync");
  }
  for (std::int64_t n0 = 0; n0 < s.batch; n0 += p.chunk) {
    const std::int64_t nb = std::min(p.chunk, s.batch - n0);
    const std::byte* xs = bytes_of(x) + n0 * x_image * p.elem;
    const std::byte* dys = bytes_of(dy) + n0 * y_image * p.elem;
    const void* col = xs;
    if (!p.direct) {
      k::im2col(t, xs, nb, s, ws.col, stream_);
      col = ws.col;
    }
    // dW^T (R, K) += col_i (R, P) dy_i^T (P, K): a group of images' partials, then their sum, in f32.
    for (std::int64_t g0 = 0; g0 < nb; g0 += p.group) {
      const std::int64_t gb = std::min(p.group, nb - g0);
      gemm(ctx, true, false, p.rows, s.out_channels, p.plane,
           {static_cast<const std::byte*>(col) + g0 * col_image * p.elem, t, as_int(p.plane), col_image},
           {dys + g0 * y_image * p.elem, t, as_int(p.plane), y_image}, 0.0f, ws.partials, DType::kF32, as_int(p.rows),
           dw_count, gb);
      k::sum_partials(ws.partials, gb, dw_count, ws.dw, n0 + g0 == 0, stream_);
    }
    if (dx != nullptr) {
      std::byte* dxs = bytes_of(*dx) + n0 * x_image * p.elem;
      const bool straight = ws.col_grad == nullptr;  // direct f32: the column gradient is dx
      // col_grad_i^T (P, R) = dy_i^T (P, K) W (K, R)
      gemm(ctx, false, true, p.plane, p.rows, s.out_channels, {dys, t, as_int(p.plane), y_image},
           {w.data(), t, as_int(p.rows), 0}, 0.0f, straight ? static_cast<void*>(dxs) : ws.col_grad,
           straight ? t : DType::kF32, as_int(p.plane), col_image, nb);
      if (!straight) k::col2im(ws.col_grad, nb, s, t, dxs, stream_);
    }
  }
  k::finish_gradient(ws.dw, dw_count, t, dw.data(), accumulate, stream_);
  if (dbias != nullptr)
    k::channel_sum(t, dy.data(), s.batch, s.out_channels, p.plane, dbias->data(), accumulate, stream_);
}

std::size_t CudaBackend::depthwise_conv2d_workspace(const Conv2dShape& s, DType) const {
  return depthwise_conv2d_backward_workspace(s);  // the forward pass takes none
}

void CudaBackend::depthwise_conv2d_forward(Context&, const Conv2dShape& s, const Tensor& x, const Tensor& w,
                                           const Tensor* bias, Tensor& y) {
  device_detail::ScopedDevice guard(index_);
  k::depthwise_forward(x.dtype(), x.data(), w.data(), data_or_null(bias), s.batch, s, y.data(), stream_);
}

void CudaBackend::depthwise_conv2d_backward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor& w,
                                            const Tensor& dy, Tensor* dx, Tensor& dw, Tensor* dbias, GradMode mode) {
  device_detail::ScopedDevice guard(index_);
  const DType t = x.dtype();
  const bool accumulate = mode == GradMode::kAccumulate;
  const std::int64_t taps = std::int64_t{s.in_channels} * s.window.kernel_h * s.window.kernel_w;
  auto* acc = static_cast<float*>(ctx.workspace(depthwise_conv2d_backward_workspace(s)));
  check(cudaMemsetAsync(acc, 0, static_cast<std::size_t>(taps) * sizeof(float), stream_), "cudaMemsetAsync");
  k::depthwise_backward_weight(t, x.data(), dy.data(), false, s.batch, s, acc, stream_);
  k::finish_gradient(acc, taps, t, dw.data(), accumulate, stream_);
  if (dx != nullptr) k::depthwise_backward_input(t, dy.data(), false, w.data(), s.batch, s, dx->data(), stream_);
  if (dbias != nullptr) {
    k::channel_sum(t, dy.data(), s.batch, s.in_channels, s.out_plane(), dbias->data(), accumulate, stream_);
  }
}

std::size_t CudaBackend::separable_conv2d_workspace(const SeparableShape& s, DType dtype) const {
  return std::max(separable_conv2d_forward_workspace(s, dtype), separable_conv2d_backward_workspace(s, dtype));
}

void CudaBackend::separable_conv2d_forward(Context& ctx, const SeparableShape& s, const Tensor& x, const Tensor& wd,
                                           const Tensor& wp, const Tensor* bias, Tensor& y) {
  device_detail::ScopedDevice guard(index_);
  const DType t = x.dtype();
  const SeparableTiling p = plan_separable(s, t);
  const Conv2dShape& d = s.depthwise;
  void* mid = ctx.workspace(separable_conv2d_forward_workspace(s, t));
  const std::int64_t x_image = p.channels * d.in_plane();
  const std::int64_t y_image = std::int64_t{s.out_channels} * p.plane;
  for (std::int64_t n0 = 0; n0 < d.batch; n0 += p.chunk) {
    const std::int64_t nb = std::min(p.chunk, d.batch - n0);
    std::byte* ys = bytes_of(y) + n0 * y_image * p.elem;
    k::depthwise_forward(t, bytes_of(x) + n0 * x_image * p.elem, wd.data(), nullptr, nb, d, mid, stream_);
    if (bias != nullptr) k::broadcast_bias(t, bias->data(), nb, s.out_channels, p.plane, ys, stream_);
    // y_i^T (P, K) = mid_i^T (P, C) Wp^T (C, K)
    gemm(ctx, false, false, p.plane, s.out_channels, p.channels, {mid, t, as_int(p.plane), p.channels * p.plane},
         {wp.data(), t, as_int(p.channels), 0}, bias != nullptr ? 1.0f : 0.0f, ys, t, as_int(p.plane), y_image, nb);
  }
}

void CudaBackend::separable_conv2d_backward(Context& ctx, const SeparableShape& s, const Tensor& x, const Tensor& wd,
                                            const Tensor& wp, const Tensor& dy, Tensor* dx, Tensor& dwd, Tensor& dwp,
                                            Tensor* dbias, GradMode mode) {
  device_detail::ScopedDevice guard(index_);
  const DType t = x.dtype();
  const bool accumulate = mode == GradMode::kAccumulate;
  const SeparableTiling p = plan_separable(s, t);
  const Conv2dShape& d = s.depthwise;
  Carver carver(ctx.workspace(separable_conv2d_backward_workspace(s, t)));
  const SeparableScratch ws = carve_separable(carver, s, p);
  const std::int64_t taps = p.channels * d.window.kernel_h * d.window.kernel_w;
  check(cudaMemsetAsync(ws.dwd, 0, static_cast<std::size_t>(taps) * sizeof(float), stream_), "cudaMemsetAsync");
  const std::int64_t x_image = p.channels * d.in_plane();
  const std::int64_t y_image = std::int64_t{s.out_channels} * p.plane;
  const std::int64_t mid_image = p.channels * p.plane;
  const std::int64_t dwp_count = std::int64_t{s.out_channels} * p.channels;
  if (d.batch == 0) {  // no image sums into dwp below: its sum is 0, as the CPU backend's
    check(cudaMemsetAsync(ws.dwp, 0, static_cast<std::size_t>(dwp_count) * sizeof(float), stream_), "cudaMemsetAsync");
  }
  for (std::int64_t n0 = 0; n0 < d.batch; n0 += p.chunk) {
    const std::int64_t nb = std::min(p.chunk, d.batch - n0);
    const std::byte* xs = bytes_of(x) + n0 * x_image * p.elem;
    const std::byte* dys = bytes_of(dy) + n0 * y_image * p.elem;
    k::depthwise_forward(t, xs, wd.data(), nullptr, nb, d, ws.mid, stream_);  // recomputed, never stored
    // dWp^T (C, K) += mid_i (C, P) dy_i^T (P, K): a group's partials, then their sum, in f32.
    for (std::int64_t g0 = 0; g0 < nb; g0 += p.group) {
      const std::int64_t gb = std::min(p.group, nb - g0);
      gemm(ctx, true, false, p.channels, s.out_channels, p.plane,
           {static_cast<const std::byte*>(ws.mid) + g0 * mid_image * p.elem, t, as_int(p.plane), mid_image},
           {dys + g0 * y_image * p.elem, t, as_int(p.plane), y_image}, 0.0f, ws.partials, DType::kF32,
           as_int(p.channels), dwp_count, gb);
      k::sum_partials(ws.partials, gb, dwp_count, ws.dwp, n0 + g0 == 0, stream_);
    }
    // mid_grad_i^T (P, C) = dy_i^T (P, K) Wp (K, C), in f32.
    gemm(ctx, false, true, p.plane, p.channels, s.out_channels, {dys, t, as_int(p.plane), y_image},
         {wp.data(), t, as_int(p.channels), 0}, 0.0f, ws.mid_grad, DType::kF32, as_int(p.plane), mid_image, nb);
    k::depthwise_backward_weight(t, xs, ws.mid_grad, true, nb, d, ws.dwd, stream_);
    if (dx != nullptr) {
      k::depthwise_backward_input(t, ws.mid_grad, true, wd.data(), nb, d, bytes_of(*dx) + n0 * x_image * p.elem,
                                  stream_);
    }
  }
  k::finish_gradient(ws.dwp, dwp_count, t, dwp.data(), accumulate, stream_);
  k::finish_gradient(ws.dwd, taps, t, dwd.data(), accumulate, stream_);
  if (dbias != nullptr)
    k::channel_sum(t, dy.data(), d.batch, s.out_channels, p.plane, dbias->data(), accumulate, stream_);
}

void CudaBackend::dense_forward(Context& ctx, const DenseShape& s, const Tensor& x, const Tensor& w, const Tensor* bias,
                                Tensor& y) {
  device_detail::ScopedDevice guard(index_);
  const DType t = x.dtype();
  if (s.batch == 0) return;  // y is empty: no GEMM of zero columns
  if (bias != nullptr) k::broadcast_bias(t, bias->data(), s.batch, s.out_features, 1, y.data(), stream_);
  // y^T (O, N) = W (O, I) x^T (I, N)
  gemm(ctx, true, false, s.out_features, s.batch, s.in_features, {w.data(), t, as_int(s.in_features), 0},
       {x.data(), t, as_int(s.in_features), 0}, bias != nullptr ? 1.0f : 0.0f, y.data(), t, as_int(s.out_features), 0,
       1);
}

void CudaBackend::dense_backward(Context& ctx, const DenseShape& s, const Tensor& x, const Tensor& w, const Tensor& dy,
                                 Tensor* dx, Tensor& dw, Tensor* dbias, GradMode mode) {
  device_detail::ScopedDevice guard(index_);
  const DType t = x.dtype();
  const bool accumulate = mode == GradMode::kAccumulate;
  if (s.batch == 0) {  // no rows: dx is empty, dW and dbias sum nothing (0, or kept when accumulating)
    if (!accumulate) {
      check(cudaMemsetAsync(dw.data(), 0, dw.bytes(), stream_), "cudaMemsetAsync");
      if (dbias != nullptr) check(cudaMemsetAsync(dbias->data(), 0, dbias->bytes(), stream_), "cudaMemsetAsync");
    }
    return;
  }
  if (dx != nullptr) {
    // dx^T (I, N) = W^T (I, O) dy^T (O, N)
    gemm(ctx, false, false, s.in_features, s.batch, s.out_features, {w.data(), t, as_int(s.in_features), 0},
         {dy.data(), t, as_int(s.out_features), 0}, 0.0f, dx->data(), t, as_int(s.in_features), 0, 1);
  }
  // dW^T (I, O) = x^T (I, N) dy (N, O)
  gemm(ctx, false, true, s.in_features, s.out_features, s.batch, {x.data(), t, as_int(s.in_features), 0},
       {dy.data(), t, as_int(s.out_features), 0}, accumulate ? 1.0f : 0.0f, dw.data(), t, as_int(s.in_features), 0, 1);
  if (dbias != nullptr) k::channel_sum(t, dy.data(), s.batch, s.out_features, 1, dbias->data(), accumulate, stream_);
}

}  // namespace sluice::train::cuda_detail
