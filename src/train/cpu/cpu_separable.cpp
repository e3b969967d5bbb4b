// SeparableConv2D on the CPU: a depthwise convolution (direct loops) and a 1x1 pointwise
// convolution (one sgemm), fused per image. The depthwise result t_n (C, P) of one image lives in
// the worker's workspace only: forward computes it and at once y_n (K, P) = Wp (K, C) t_n + bias;
// backward recomputes it (cheaper than storing (N, C, P) for the batch, which is the point of a
// memory-lean separable layer), then
//   dWp_g += dy_n t_n^T,   dt_n = Wp^T dy_n,   dWd_g += corr(x_n, dt_n),   dx_n = conv^T(dt_n, Wd)
// with per-group partial gradients reduced in group order (cpu_backend.hpp: determinism).
#include <algorithm>

#include "train/cpu/conv_kernels.hpp"
#include "train/cpu/cpu_backend.hpp"

namespace sluice::train::cpu {
namespace {

std::size_t plane_floats(const SeparableShape& s) {
  return aligned_floats(static_cast<std::size_t>(std::int64_t{s.depthwise.in_channels} * s.depthwise.out_plane()));
}
std::size_t tap_rows_floats(const SeparableShape& s) {
  const Window2d& w = s.depthwise.window;
  return aligned_floats(static_cast<std::size_t>(w.kernel_h) * w.kernel_w * s.depthwise.out_w);
}
std::int64_t wd_elements(const SeparableShape& s) {
  return std::int64_t{s.depthwise.in_channels} * s.depthwise.window.kernel_h * s.depthwise.window.kernel_w;
}
std::int64_t wp_elements(const SeparableShape& s) { return std::int64_t{s.out_channels} * s.depthwise.in_channels; }

// The depthwise part of one image, without bias: x_n (C, H, W) -> t (C, OH, OW).
void depthwise_image(const Conv2dShape& d, const float* xn, const float* wd, float* t) {
  const int taps = d.window.kernel_h * d.window.kernel_w;
  for (int c = 0; c < d.in_channels; ++c) {
    depthwise_plane_forward(xn + c * d.in_plane(), d.in_h, d.in_w, wd + c * taps, 0.0f, d.window, d.out_h, d.out_w,
                            t + c * d.out_plane());
  }
}

}  // namespace

std::size_t CpuBackend::separable_conv2d_workspace(const SeparableShape& s, DType dtype) const {
  // Staged whole (16-bit): wd, wp and bias in forward; wd, wp, dwd, dwp and dbias in backward.
  // Staged per image in each worker: x and y in forward; x, dy and dx in backward (and a row of dy
  // for the bias sums).
  const Conv2dShape& d = s.depthwise;
  const std::int64_t x_item = d.in_channels * d.in_plane();
  const std::int64_t y_item = std::int64_t{s.out_channels} * d.out_plane();
  const int groups = reduce_groups(d.batch);
  // Per worker: t and dt (forward uses t only) and the depthwise weight kernel's tap rows.
  const std::size_t per_worker = 2 * plane_floats(s) + tap_rows_floats(s);
  const std::size_t per_group = aligned_floats(static_cast<std::size_t>(wd_elements(s))) +
                                aligned_floats(static_cast<std::size_t>(wp_elements(s)));
  const std::size_t forward = staged_floats(dtype, wd_elements(s), wp_elements(s), s.out_channels) +
                              workers(d.batch) * (plane_floats(s) + staged_floats(dtype, x_item, y_item));
  const std::size_t backward =
      staged_floats(dtype, wd_elements(s), wp_elements(s), wd_elements(s), wp_elements(s), s.out_channels) +
      workers(std::max(groups, 1)) * (per_worker + staged_floats(dtype, x_item, y_item, x_item)) + groups * per_group +
      channel_sums_floats(dtype, s.out_channels, d.out_plane());
  return std::max(forward, backward) * sizeof(float);
}

void CpuBackend::separable_conv2d_forward(Context& ctx, const SeparableShape& s, const Tensor& x, const Tensor& wd,
                                          const Tensor& wp, const Tensor* bias, Tensor& y) {
  const Conv2dShape& d = s.depthwise;
  Scratch sc = scratch(ctx, separable_conv2d_workspace(s, x.dtype()));
  Staging st(pool_, sc);
  const float* wdf = st.in(wd);
  const float* wpf = st.in(wp);
  const float* bf = st.in(bias);
  const int chunks = workers(d.batch);
  const int K = s.out_channels, C = d.in_channels;
  const int P = static_cast<int>(d.out_plane());
  const std::int64_t x_item = C * d.in_plane();
  const std::int64_t y_item = std::int64_t{K} * P;
  const std::size_t x_floats = staged_floats(x.dtype(), x_item);
  const std::size_t stride = plane_floats(s) + staged_floats(x.dtype(), x_item, y_item);
  float* work = sc.take(chunks * stride);
  pool_.run(d.batch, chunks, [&](int chunk, std::int64_t n0, std::int64_t n1) {
    float* t = work + chunk * stride;
    float* xbuf = t + plane_floats(s);
    float* ybuf = xbuf + x_floats;
    for (std::int64_t n = n0; n < n1; ++n) {
      depthwise_image(d, image_in(x, n * x_item, x_item, xbuf), wdf, t);
      float* yn = image_out(y, n * y_item, ybuf);
      gemm(false, false, K, P, C, 1.0f, wpf, C, t, P, 0.0f, yn, P);
      if (bf != nullptr) add_row_bias(yn, K, P, bf);
      image_done(y, n * y_item, y_item, yn);
    }
  });
  st.finish();
}

void CpuBackend::separable_conv2d_backward(Context& ctx, const SeparableShape& s, const Tensor& x, const Tensor& wd,
                                           const Tensor& wp, const Tensor& dy, Tensor* dx, Tensor& dwd, Tensor& dwp,
                                           Tensor* dbias, GradMode mode) {
  const Conv2dShape& d = s.depthwise;
  const bool accumulate = mode == GradMode::kAccumulate;
  Scratch sc = scratch(ctx, separable_conv2d_workspace(s, x.dtype()));
  Staging st(pool_, sc);
  const float* wdf = st.in(wd);
  const float* wpf = st.in(wp);
  float* dwdf = st.out(dwd, accumulate);
  float* dwpf = st.out(dwp, accumulate);
  float* dbf = st.out(dbias, accumulate);
  const int groups = reduce_groups(d.batch);
  const int chunks = workers(std::max(groups, 1));
  const int K = s.out_channels, C = d.in_channels;
  const int P = static_cast<int>(d.out_plane());
  const std::int64_t x_item = C * d.in_plane();
  const std::int64_t y_item = std::int64_t{K} * P;
  const std::size_t x_floats = staged_floats(x.dtype(), x_item);
  const std::size_t y_floats = staged_floats(x.dtype(), y_item);
  const std::size_t per_worker = 2 * plane_floats(s) + tap_rows_floats(s);
  const std::size_t stride = per_worker + staged_floats(x.dtype(), x_item, y_item, x_item);
  float* worker_scratch = sc.take(chunks * stride);
  const std::size_t wd_size = aligned_floats(static_cast<std::size_t>(wd_elements(s)));
  const std::size_t wp_size = aligned_floats(static_cast<std::size_t>(wp_elements(s)));
  float* wd_partials = sc.take(groups * wd_size);
  float* wp_partials = sc.take(groups * wp_size);
  const int taps = d.window.kernel_h * d.window.kernel_w;
  pool_.run(groups, chunks, [&](int chunk, std::int64_t g0, std::int64_t g1) {
    float* t = worker_scratch + chunk * stride;
    float* dt = t + plane_floats(s);
    float* rows = dt + plane_floats(s);
    float* xbuf = t + per_worker;
    float* dybuf = xbuf + x_floats;
    float* dxbuf = dybuf + y_floats;
    for (std::int64_t g = g0; g < g1; ++g) {
      float* dwd_g = wd_partials + g * wd_size;
      float* dwp_g = wp_partials + g * wp_size;
      std::fill(dwd_g, dwd_g + wd_elements(s), 0.0f);
      const std::int64_t n0 = d.batch * g / groups, n1 = d.batch * (g + 1) / groups;
      for (std::int64_t n = n0; n < n1; ++n) {
        const float* xn = image_in(x, n * x_item, x_item, xbuf);
        const float* dyn = image_in(dy, n * y_item, y_item, dybuf);
        float* dxn = dx == nullptr ? nullptr : image_out(*dx, n * x_item, dxbuf);
        depthwise_image(d, xn, wdf, t);
        gemm(false, true, K, C, P, 1.0f, dyn, P, t, P, n == n0 ? 0.0f : 1.0f, dwp_g, C);  // dWp_g (K, C)
        gemm(true, false, C, P, K, 1.0f, wpf, C, dyn, P, 0.0f, dt, P);                   // dt (C, P)
        for (int c = 0; c < C; ++c) {
          const float* dtc = dt + c * d.out_plane();
          depthwise_plane_backward_weight(xn + c * d.in_plane(), d.in_h, d.in_w, dtc, d.window, d.out_h, d.out_w,
                                          rows, dwd_g + c * taps);
          if (dxn != nullptr) {
            depthwise_plane_backward_input(dtc, d.in_h, d.in_w, wdf + c * taps, d.window, d.out_h, d.out_w,
                                           dxn + c * d.in_plane());
          }
        }
        if (dxn != nullptr) image_done(*dx, n * x_item, x_item, dxn);
      }
    }
  });
  reduce_partials(wd_partials, groups, wd_size, wd_elements(s), dwdf, accumulate);
  reduce_partials(wp_partials, groups, wp_size, wp_elements(s), dwpf, accumulate);
  if (dbf != nullptr) {
    float* sum_rows = sc.take(channel_sums_floats(x.dtype(), K, P));
    channel_sums(dy, d.batch, K, P, sum_rows, dbf, accumulate);
  }
  st.finish();
}

}  // namespace sluice::train::cpu
