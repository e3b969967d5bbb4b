// Conv2D and DepthwiseConv2D on the CPU.
//
// Conv2D is im2col + OpenBLAS sgemm, one image per GEMM: y_n (K, P) = W (K, C*kh*kw) x
// col_n (C*kh*kw, P). One image's columns (a few MiB at most for CIFAR-sized layers) stay in
// cache for the GEMM, where the whole batch's would be hundreds of MiB of workspace; the GEMMs
// are still large (K x P x C*kh*kw), and images run in parallel, one GEMM per worker. A 1x1
// convolution with stride 1 and no padding needs no columns: the image is its own col matrix.
// Backward per image: dW_g += dy_n col_n^T into the image's group partial, dcol = W^T dy_n,
// col2im into dx_n.
//
// DepthwiseConv2D is direct loops (conv_kernels.cpp): one tap is one multiply-add over a row,
// and a GEMM of one row per channel would be all overhead.
#include <algorithm>

#include "train/cpu/conv_kernels.hpp"
#include "train/cpu/cpu_backend.hpp"

namespace sluice::train::cpu {
namespace {

bool is_pointwise(const Conv2dShape& s) {
  const Window2d& w = s.window;
  return w.kernel_h == 1 && w.kernel_w == 1 && w.stride_h == 1 && w.stride_w == 1 && w.pad_h == 0 && w.pad_w == 0;
}

std::int64_t col_rows(const Conv2dShape& s) {
  return std::int64_t{s.in_channels} * s.window.kernel_h * s.window.kernel_w;
}

// The per-worker im2col columns: none for a pointwise convolution.
std::size_t col_floats(const Conv2dShape& s) {
  return is_pointwise(s) ? 0 : aligned_floats(static_cast<std::size_t>(col_rows(s) * s.out_plane()));
}

std::int64_t weight_elements(const Conv2dShape& s) { return s.out_channels * col_rows(s); }

}  // namespace

// ---- Conv2D ----------------------------------------------------------------------------------

std::size_t CpuBackend::conv2d_workspace(const Conv2dShape& s, DType dtype) const {
  // Staged whole (16-bit): w and bias in forward; w, dw and dbias in backward. Staged per image in
  // each worker: x and y in forward; x, dy and dx in backward (and a row of dy for the bias sums).
  const std::int64_t x_item = s.in_channels * s.in_plane();
  const std::int64_t y_item = std::int64_t{s.out_channels} * s.out_plane();
  const std::int64_t wn = weight_elements(s);
  const int groups = reduce_groups(s.batch);
  const std::size_t forward = staged_floats(dtype, wn, s.out_channels) +
                              workers(s.batch) * (col_floats(s) + staged_floats(dtype, x_item, y_item));
  const std::size_t backward = staged_floats(dtype, wn, wn, s.out_channels) +
                               workers(std::max(groups, 1)) * (col_floats(s) + staged_floats(dtype, x_item, y_item, x_item)) +
                               static_cast<std::size_t>(groups) * aligned_floats(static_cast<std::size_t>(wn)) +
                               channel_sums_floats(dtype, s.out_channels, s.out_plane());
  return std::max(forward, backward) * sizeof(float);
}

void CpuBackend::conv2d_forward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor& w,
                                const Tensor* bias, Tensor& y) {
  Scratch sc = scratch(ctx, conv2d_workspace(s, x.dtype()));
  Staging st(pool_, sc);
  const float* wf = st.in(w);
  const float* bf = st.in(bias);
  const int chunks = workers(s.batch);
  const int K = s.out_channels;
  const int P = static_cast<int>(s.out_plane());
  const int R = static_cast<int>(col_rows(s));
  const std::int64_t x_item = s.in_channels * s.in_plane();
  const std::int64_t y_item = std::int64_t{K} * P;
  const std::size_t x_floats = staged_floats(x.dtype(), x_item);
  const std::size_t stride = col_floats(s) + staged_floats(x.dtype(), x_item, y_item);
  float* work = sc.take(chunks * stride);
  pool_.run(s.batch, chunks, [&](int chunk, std::int64_t n0, std::int64_t n1) {
    float* col = work + chunk * stride;
    float* xbuf = col + col_floats(s);
    float* ybuf = xbuf + x_floats;
    for (std::int64_t n = n0; n < n1; ++n) {
      const float* xn = image_in(x, n * x_item, x_item, xbuf);
      float* yn = image_out(y, n * y_item, ybuf);
      const float* cn = xn;  // a pointwise convolution's image is its own col matrix
      if (!is_pointwise(s)) {
        im2col(xn, s.in_channels, s.in_h, s.in_w, s.window, s.out_h, s.out_w, col);
        cn = col;
      }
      gemm(false, false, K, P, R, 1.0f, wf, R, cn, P, 0.0f, yn, P);
      if (bf != nullptr) add_row_bias(yn, K, P, bf);
      image_done(y, n * y_item, y_item, yn);
    }
  });
  st.finish();
}

void CpuBackend::conv2d_backward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor& w,
                                 const Tensor& dy, Tensor* dx, Tensor& dw, Tensor* dbias, GradMode mode) {
  const bool accumulate = mode == GradMode::kAccumulate;
  Scratch sc = scratch(ctx, conv2d_workspace(s, x.dtype()));
  Staging st(pool_, sc);
  const float* wf = st.in(w);
  float* dwf = st.out(dw, accumulate);
  float* dbf = st.out(dbias, accumulate);
  const int groups = reduce_groups(s.batch);
  const int chunks = workers(std::max(groups, 1));
  const int K = s.out_channels;
  const int P = static_cast<int>(s.out_plane());
  const int R = static_cast<int>(col_rows(s));
  const std::int64_t x_item = s.in_channels * s.in_plane();
  const std::int64_t y_item = std::int64_t{K} * P;
  const std::size_t x_floats = staged_floats(x.dtype(), x_item);
  const std::size_t y_floats = staged_floats(x.dtype(), y_item);
  const std::size_t stride = col_floats(s) + staged_floats(x.dtype(), x_item, y_item, x_item);
  float* work = sc.take(chunks * stride);
  const std::size_t wsize = aligned_floats(static_cast<std::size_t>(weight_elements(s)));
  float* partials = sc.take(groups * wsize);
  pool_.run(groups, chunks, [&](int chunk, std::int64_t g0, std::int64_t g1) {
    float* col = work + chunk * stride;
    float* xbuf = col + col_floats(s);
    float* dybuf = xbuf + x_floats;
    float* dxbuf = dybuf + y_floats;
    for (std::int64_t g = g0; g < g1; ++g) {
      float* dwg = partials + g * wsize;
      const std::int64_t n0 = s.batch * g / groups, n1 = s.batch * (g + 1) / groups;
      for (std::int64_t n = n0; n < n1; ++n) {
        const float* xn = image_in(x, n * x_item, x_item, xbuf);
        const float* dyn = image_in(dy, n * y_item, y_item, dybuf);
        const float* cn = xn;
        if (!is_pointwise(s)) {
          im2col(xn, s.in_channels, s.in_h, s.in_w, s.window, s.out_h, s.out_w, col);
          cn = col;
        }
        // dW_g (K, R) (+)= dy_n (K, P) col_n^T (P, R)
        gemm(false, true, K, R, P, 1.0f, dyn, P, cn, P, n == n0 ? 0.0f : 1.0f, dwg, R);
        if (dx == nullptr) continue;
        float* dxn = image_out(*dx, n * x_item, dxbuf);
        if (is_pointwise(s)) {  // dx_n (C, P) = W^T (C, K) dy_n (K, P)
          gemm(true, false, R, P, K, 1.0f, wf, R, dyn, P, 0.0f, dxn, P);
        } else {  // the image's columns are used up: the buffer takes dcol
          gemm(true, false, R, P, K, 1.0f, wf, R, dyn, P, 0.0f, col, P);
          col2im(col, s.in_channels, s.in_h, s.in_w, s.window, s.out_h, s.out_w, dxn);
        }
        image_done(*dx, n * x_item, x_item, dxn);
      }
    }
  });
  reduce_partials(partials, groups, wsize, weight_elements(s), dwf, accumulate);
  if (dbf != nullptr) {
    float* rows = sc.take(channel_sums_floats(x.dtype(), K, P));
    channel_sums(dy, s.batch, K, P, rows, dbf, accumulate);
  }
  st.finish();
}

// ---- DepthwiseConv2D -------------------------------------------------------------------------

namespace {
std::size_t rows_floats(const Conv2dShape& s) {
  return aligned_floats(static_cast<std::size_t>(s.window.kernel_h) * s.window.kernel_w * s.out_w);
}
std::int64_t depthwise_weight_elements(const Conv2dShape& s) {
  return std::int64_t{s.in_channels} * s.window.kernel_h * s.window.kernel_w;
}
}  // namespace

std::size_t CpuBackend::depthwise_conv2d_workspace(const Conv2dShape& s, DType dtype) const {
  // Staged whole (16-bit): w and bias in forward; w, dw and dbias in backward. Staged per plane in
  // each worker: x and y in forward; x, dy and dx in backward (and a row of dy for the bias sums).
  const std::int64_t wn = depthwise_weight_elements(s);
  const int groups = reduce_groups(s.batch);
  const std::size_t forward = staged_floats(dtype, wn, s.in_channels) +
                              workers(s.batch * s.in_channels) * staged_floats(dtype, s.in_plane(), s.out_plane());
  const std::size_t backward =
      staged_floats(dtype, wn, wn, s.in_channels) +
      workers(std::max(groups, 1)) * (rows_floats(s) + staged_floats(dtype, s.in_plane(), s.out_plane(), s.in_plane())) +
      static_cast<std::size_t>(groups) * aligned_floats(static_cast<std::size_t>(wn)) +
      channel_sums_floats(dtype, s.in_channels, s.out_plane());
  return std::max(forward, backward) * sizeof(float);
}

void CpuBackend::depthwise_conv2d_forward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor& w,
                                          const Tensor* bias, Tensor& y) {
  Scratch sc = scratch(ctx, depthwise_conv2d_workspace(s, x.dtype()));
  Staging st(pool_, sc);
  const float* wf = st.in(w);
  const float* bf = st.in(bias);
  const int taps = s.window.kernel_h * s.window.kernel_w;
  // One (image, channel) plane a task unit: a batch of 2 still spreads over the workers.
  const std::int64_t planes = s.batch * s.in_channels;
  const int chunks = workers(planes);
  const std::size_t x_floats = staged_floats(x.dtype(), s.in_plane());
  const std::size_t stride = staged_floats(x.dtype(), s.in_plane(), s.out_plane());
  float* work = sc.take(chunks * stride);
  pool_.run(planes, chunks, [&](int chunk, std::int64_t p0, std::int64_t p1) {
    float* xbuf = work + chunk * stride;
    float* ybuf = xbuf + x_floats;
    for (std::int64_t p = p0; p < p1; ++p) {
      const int c = static_cast<int>(p % s.in_channels);
      const float* xp = image_in(x, p * s.in_plane(), s.in_plane(), xbuf);
      float* yp = image_out(y, p * s.out_plane(), ybuf);
      depthwise_plane_forward(xp, s.in_h, s.in_w, wf + c * taps, bf ? bf[c] : 0.0f, s.window, s.out_h, s.out_w, yp);
      image_done(y, p * s.out_plane(), s.out_plane(), yp);
    }
  });
  st.finish();
}

void CpuBackend::depthwise_conv2d_backward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor& w,
                                           const Tensor& dy, Tensor* dx, Tensor& dw, Tensor* dbias,
                                           GradMode mode) {
  const bool accumulate = mode == GradMode::kAccumulate;
  Scratch sc = scratch(ctx, depthwise_conv2d_workspace(s, x.dtype()));
  Staging st(pool_, sc);
  const float* wf = st.in(w);
  float* dwf = st.out(dw, accumulate);
  float* dbf = st.out(dbias, accumulate);
  const int groups = reduce_groups(s.batch);
  const int chunks = workers(std::max(groups, 1));
  const std::size_t x_floats = staged_floats(x.dtype(), s.in_plane());
  const std::size_t y_floats = staged_floats(x.dtype(), s.out_plane());
  const std::size_t stride = rows_floats(s) + staged_floats(x.dtype(), s.in_plane(), s.out_plane(), s.in_plane());
  float* work = sc.take(chunks * stride);
  const std::int64_t wn = depthwise_weight_elements(s);
  const std::size_t wsize = aligned_floats(static_cast<std::size_t>(wn));
  float* partials = sc.take(groups * wsize);
  const int C = s.in_channels;
  const int taps = s.window.kernel_h * s.window.kernel_w;
  pool_.run(groups, chunks, [&](int chunk, std::int64_t g0, std::int64_t g1) {
    float* r = work + chunk * stride;
    float* xbuf = r + rows_floats(s);
    float* dybuf = xbuf + x_floats;
    float* dxbuf = dybuf + y_floats;
    for (std::int64_t g = g0; g < g1; ++g) {
      float* dwg = partials + g * wsize;
      std::fill(dwg, dwg + wn, 0.0f);
      const std::int64_t n0 = s.batch * g / groups, n1 = s.batch * (g + 1) / groups;
      for (std::int64_t n = n0; n < n1; ++n) {
        for (int c = 0; c < C; ++c) {
          const std::int64_t p = n * C + c;
          const float* xp = image_in(x, p * s.in_plane(), s.in_plane(), xbuf);
          const float* dyp = image_in(dy, p * s.out_plane(), s.out_plane(), dybuf);
          depthwise_plane_backward_weight(xp, s.in_h, s.in_w, dyp, s.window, s.out_h, s.out_w, r, dwg + c * taps);
          if (dx != nullptr) {
            float* dxp = image_out(*dx, p * s.in_plane(), dxbuf);
            depthwise_plane_backward_input(dyp, s.in_h, s.in_w, wf + c * taps, s.window, s.out_h, s.out_w, dxp);
            image_done(*dx, p * s.in_plane(), s.in_plane(), dxp);
          }
        }
      }
    }
  });
  reduce_partials(partials, groups, wsize, wn, dwf, accumulate);
  if (dbf != nullptr) {
    float* rows = sc.take(channel_sums_floats(x.dtype(), C, s.out_plane()));
    channel_sums(dy, s.batch, C, s.out_plane(), rows, dbf, accumulate);
  }
  st.finish();
}

}  // namespace sluice::train::cpu
