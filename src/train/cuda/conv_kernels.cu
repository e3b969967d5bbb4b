// The CUDA backend's convolution and pooling kernels: im2col and a gathering col2im around the
// cuBLAS GEMMs of Conv2D, direct depthwise kernels, the per-channel bias broadcast and reduction,
// max and global average pooling. CPU twins: src/train/cpu/ (conv_kernels.cpp and the backend).
//
// Every output element is written by exactly one thread and every reduction has a fixed shape,
// so results are deterministic and no kernel needs atomics: the backward kernels gather (each
// input pixel sums the taps that read it) rather than scatter.
#include <cmath>

#include "train/cuda/cuda_common.cuh"
#include "train/cuda/cuda_kernels.hpp"

namespace sluice::train::cuda_detail {
namespace {

// The geometry kernels need, flattened to plain ints (window and sizes).
struct Geometry {
  int channels, h, w, kh, kw, sh, sw, ph, pw, oh, ow;
};

Geometry geometry(const Conv2dShape& s) {
  return {s.in_channels, s.in_h, s.in_w, s.window.kernel_h, s.window.kernel_w, s.window.stride_h,
          s.window.stride_w, s.window.pad_h, s.window.pad_w, s.out_h, s.out_w};
}

Geometry geometry(const Pool2dShape& s) {
  return {s.channels, s.in_h, s.in_w, s.window.kernel_h, s.window.kernel_w, s.window.stride_h,
          s.window.stride_w, s.window.pad_h, s.window.pad_w, s.out_h, s.out_w};
}

// ---- im2col / col2im -------------------------------------------------------------------------
// col element i = (image, row = (c, ky, kx), p = (oy, ox)).
template <class T>
__global__ void im2col_kernel(const T* __restrict__ x, std::int64_t total, Geometry g, T* __restrict__ col) {
  const std::int64_t plane_out = std::int64_t{g.oh} * g.ow;
  const int taps = g.kh * g.kw;
  SLUICE_GRID_LOOP(i, total) {
    const std::int64_t p = i % plane_out;
    const std::int64_t r = i / plane_out;  // image * C * taps + row
    const int row = static_cast<int>(r % (std::int64_t{g.channels} * taps));
    const std::int64_t image = r / (std::int64_t{g.channels} * taps);
    const int c = row / taps;
    const int tap = row % taps;
    const int ky = tap / g.kw;
    const int kx = tap % g.kw;
    const int oy = static_cast<int>(p / g.ow);
    const int ox = static_cast<int>(p % g.ow);
    const int iy = oy * g.sh - g.ph + ky;
    const int ix = ox * g.sw - g.pw + kx;
    T v = T(0.0f);
    if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w) {
      v = x[((image * g.channels + c) * g.h + iy) * std::int64_t{g.w} + ix];
    }
    col[i] = v;
  }
}

// The output position that reads input row `in` with tap `k`, or -1.
__device__ __forceinline__ int source_of(int in, int k, int stride, int pad, int out_size) {
  const int num = in + pad - k;
  if (num < 0 || num % stride != 0) return -1;
  const int o = num / stride;
  return o < out_size ? o : -1;
}

template <class T>
__global__ void col2im_kernel(const float* __restrict__ col, std::int64_t total, Geometry g, T* __restrict__ dx) {
  const std::int64_t plane_out = std::int64_t{g.oh} * g.ow;
  const int taps = g.kh * g.kw;
  SLUICE_GRID_LOOP(i, total) {
    const int ix = static_cast<int>(i % g.w);
    const int iy = static_cast<int>((i / g.w) % g.h);
    const std::int64_t ic = i / (std::int64_t{g.w} * g.h);  // image * C + c
    const int c = static_cast<int>(ic % g.channels);
    const std::int64_t image = ic / g.channels;
    const float* base = col + (image * g.channels + c) * taps * plane_out;
    float sum = 0.0f;
    for (int ky = 0; ky < g.kh; ++ky) {
      const int oy = source_of(iy, ky, g.sh, g.ph, g.oh);
      if (oy < 0) continue;
      for (int kx = 0; kx < g.kw; ++kx) {
        const int ox = source_of(ix, kx, g.sw, g.pw, g.ow);
        if (ox < 0) continue;
        sum += base[(ky * g.kw + kx) * plane_out + std::int64_t{oy} * g.ow + ox];
      }
    }
    st(dx, i, sum);
  }
}

// ---- depthwise -------------------------------------------------------------------------------
template <class T>
__global__ void depthwise_forward_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                         const T* __restrict__ bias, std::int64_t total, Geometry g,
                                         T* __restrict__ y) {
  const int taps = g.kh * g.kw;
  SLUICE_GRID_LOOP(i, total) {
    const int ox = static_cast<int>(i % g.ow);
    const int oy = static_cast<int>((i / g.ow) % g.oh);
    const std::int64_t ic = i / (std::int64_t{g.ow} * g.oh);  // image * C + c
    const int c = static_cast<int>(ic % g.channels);
    const T* plane = x + ic * g.h * std::int64_t{g.w};
    const T* wc = w + std::int64_t{c} * taps;
    float sum = bias != nullptr ? ld(bias, c) : 0.0f;
    for (int ky = 0; ky < g.kh; ++ky) {
      const int iy = oy * g.sh - g.ph + ky;
      if (iy < 0 || iy >= g.h) continue;
      for (int kx = 0; kx < g.kw; ++kx) {
        const int ix = ox * g.sw - g.pw + kx;
        if (ix < 0 || ix >= g.w) continue;
        sum += ld(plane, std::int64_t{iy} * g.w + ix) * ld(wc, ky * g.kw + kx);
      }
    }
    st(y, i, sum);
  }
}

template <class T, class D>
__global__ void depthwise_backward_input_kernel(const D* __restrict__ dy, const T* __restrict__ w,
                                                std::int64_t total, Geometry g, T* __restrict__ dx) {
  const int taps = g.kh * g.kw;
  SLUICE_GRID_LOOP(i, total) {
    const int ix = static_cast<int>(i % g.w);
    const int iy = static_cast<int>((i / g.w) % g.h);
    const std::int64_t ic = i / (std::int64_t{g.w} * g.h);  // image * C + c
    const int c = static_cast<int>(ic % g.channels);
    const D* plane = dy + ic * g.oh * std::int64_t{g.ow};
    const T* wc = w + std::int64_t{c} * taps;
    float sum = 0.0f;
    for (int ky = 0; ky < g.kh; ++ky) {
      const int oy = source_of(iy, ky, g.sh, g.ph, g.oh);
      if (oy < 0) continue;
      for (int kx = 0; kx < g.kw; ++kx) {
        const int ox = source_of(ix, kx, g.sw, g.pw, g.ow);
        if (ox < 0) continue;
        sum += ld(plane, std::int64_t{oy} * g.ow + ox) * ld(wc, ky * g.kw + kx);
      }
    }
    st(dx, i, sum);
  }
}

// One block per (channel, tap): acc[c * taps + tap] += sum over images and output positions of
// dy * the input under that tap.
template <class T, class D>
__global__ void depthwise_backward_weight_kernel(const T* __restrict__ x, const D* __restrict__ dy,
                                                 std::int64_t images, Geometry g, float* __restrict__ acc) {
  __shared__ float shared[32];
  const int taps = g.kh * g.kw;
  const int c = static_cast<int>(blockIdx.x / taps);
  const int tap = static_cast<int>(blockIdx.x % taps);
  const int ky = tap / g.kw;
  const int kx = tap % g.kw;
  const std::int64_t plane_out = std::int64_t{g.oh} * g.ow;
  const std::int64_t plane_in = std::int64_t{g.h} * g.w;
  const std::int64_t n = images * plane_out;
  float sum = 0.0f;
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const std::int64_t image = j / plane_out;
    const std::int64_t p = j % plane_out;
    const int oy = static_cast<int>(p / g.ow);
    const int ox = static_cast<int>(p % g.ow);
    const int iy = oy * g.sh - g.ph + ky;
    const int ix = ox * g.sw - g.pw + kx;
    if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
    const std::int64_t ic = image * g.channels + c;
    sum += ld(dy, ic * plane_out + p) * ld(x, ic * plane_in + std::int64_t{iy} * g.w + ix);
  }
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) acc[blockIdx.x] += sum;
}

// ---- bias ------------------------------------------------------------------------------------
template <class T>
__global__ void broadcast_bias_kernel(const T* __restrict__ bias, std::int64_t total, std::int64_t channels,
                                      std::int64_t spatial, T* __restrict__ y) {
  SLUICE_GRID_LOOP(i, total) { y[i] = bias[(i / spatial) % channels]; }
}

// One block per channel.
template <class T>
__global__ void channel_sum_kernel(const T* __restrict__ a, std::int64_t n, std::int64_t channels,
                                   std::int64_t spatial, T* __restrict__ out, bool accumulate) {
  __shared__ float shared[32];
  const std::int64_t c = blockIdx.x;
  const std::int64_t count = n * spatial;
  float sum = 0.0f;
  for (std::int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const std::int64_t image = j / spatial;
    sum += ld(a, (image * channels + c) * spatial + j % spatial);
  }
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) st(out, c, (accumulate ? ld(out, c) : 0.0f) + sum);
}

__global__ void sum_partials_kernel(const float* __restrict__ partials, std::int64_t parts, std::int64_t count,
                                    float* __restrict__ acc, bool first) {
  SLUICE_GRID_LOOP(j, count) {
    float sum = first ? 0.0f : acc[j];
    for (std::int64_t g = 0; g < parts; ++g) sum += partials[g * count + j];
    acc[j] = sum;
  }
}

template <class T>
__global__ void finish_gradient_kernel(const float* __restrict__ src, std::int64_t n, T* __restrict__ dst,
                                       bool accumulate) {
  SLUICE_GRID_LOOP(i, n) { st(dst, i, (accumulate ? ld(dst, i) : 0.0f) + src[i]); }
}

// ---- pooling ---------------------------------------------------------------------------------
// The first maximum of output (oy, ox)'s window in `plane` (row-major order, padding skipped):
// its input offset, and its value in *best.
template <class T>
__device__ __forceinline__ std::int64_t window_argmax(const T* plane, const Geometry& g, int oy, int ox,
                                                      float* best) {
  float m = -INFINITY;
  std::int64_t at = -1;
  for (int ky = 0; ky < g.kh; ++ky) {
    const int iy = oy * g.sh - g.ph + ky;
    if (iy < 0 || iy >= g.h) continue;
    for (int kx = 0; kx < g.kw; ++kx) {
      const int ix = ox * g.sw - g.pw + kx;
      if (ix < 0 || ix >= g.w) continue;
      const std::int64_t off = std::int64_t{iy} * g.w + ix;
      const float v = ld(plane, off);
      // `> m` keeps the first maximum; NaN wins and propagates, as on the CPU (and PyTorch).
      if (at < 0 || v > m || (isnan(v) && !isnan(m))) {
        m = v;
        at = off;
      }
    }
  }
  *best = m;
  return at;
}

template <class T>
__global__ void maxpool_forward_kernel(const T* __restrict__ x, std::int64_t total, Geometry g, T* __restrict__ y) {
  SLUICE_GRID_LOOP(i, total) {
    const int ox = static_cast<int>(i % g.ow);
    const int oy = static_cast<int>((i / g.ow) % g.oh);
    const std::int64_t ic = i / (std::int64_t{g.ow} * g.oh);
    float best;
    (void)window_argmax(x + ic * g.h * std::int64_t{g.w}, g, oy, ox, &best);
    st(y, i, best);
  }
}

// Gathering: input pixel (iy, ix) sums dy over the windows whose first maximum it is.
template <class T>
__global__ void maxpool_backward_kernel(const T* __restrict__ x, const T* __restrict__ dy, std::int64_t total,
                                        Geometry g, T* __restrict__ dx) {
  SLUICE_GRID_LOOP(i, total) {
    const int ix = static_cast<int>(i % g.w);
    const int iy = static_cast<int>((i / g.w) % g.h);
    const std::int64_t ic = i / (std::int64_t{g.w} * g.h);
    const T* plane = x + ic * g.h * std::int64_t{g.w};
    const T* dplane = dy + ic * g.oh * std::int64_t{g.ow};
    const std::int64_t self = std::int64_t{iy} * g.w + ix;
    float sum = 0.0f;
    for (int ky = 0; ky < g.kh; ++ky) {
      const int oy = source_of(iy, ky, g.sh, g.ph, g.oh);
      if (oy < 0) continue;
      for (int kx = 0; kx < g.kw; ++kx) {
        const int ox = source_of(ix, kx, g.sw, g.pw, g.ow);
        if (ox < 0) continue;
        float best;
        if (window_argmax(plane, g, oy, ox, &best) == self) sum += ld(dplane, std::int64_t{oy} * g.ow + ox);
      }
    }
    st(dx, i, sum);
  }
}

// One warp per row.
template <class T>
__global__ void global_avg_pool_forward_kernel(const T* __restrict__ x, std::int64_t rows, std::int64_t plane,
                                               T* __restrict__ y) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rows) return;  // whole warps leave together: row is uniform across a warp
  const int lane = threadIdx.x & 31;
  float sum = 0.0f;
  for (std::int64_t j = lane; j < plane; j += 32) sum += ld(x, row * plane + j);
  sum = warp_sum(sum);
  if (lane == 0) st(y, row, sum * (1.0f / static_cast<float>(plane)));
}

template <class T>
__global__ void global_avg_pool_backward_kernel(const T* __restrict__ dy, std::int64_t rows, std::int64_t plane,
                                                T* __restrict__ dx) {
  const float scale = 1.0f / static_cast<float>(plane);
  SLUICE_GRID_LOOP(i, rows * plane) { st(dx, i, ld(dy, i / plane) * scale); }
}

}  // namespace

void im2col(DType t, const void* x, std::int64_t images, const Conv2dShape& s, void* col, cudaStream_t stream) {
  const std::int64_t total = images * s.in_channels * s.window.kernel_h * s.window.kernel_w * s.out_plane();
  if (total == 0) return;
  with_float_type(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch("im2col", &im2col_kernel<T>, grid_for(total), stream, static_cast<const T*>(x), total, geometry(s),
           static_cast<T*>(col));
  });
}

void col2im(const float* col, std::int64_t images, const Conv2dShape& s, DType t, void* dx, cudaStream_t stream) {
  const std::int64_t total = images * s.in_channels * s.in_plane();
  if (total == 0) return;
  with_float_type(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch("col2im", &col2im_kernel<T>, grid_for(total), stream, col, total, geometry(s), static_cast<T*>(dx));
  });
}

void depthwise_forward(DType t, const void* x, const void* w, const void* bias, std::int64_t images,
                       const Conv2dShape& s, void* y, cudaStream_t stream) {
  const std::int64_t total = images * s.in_channels * s.out_plane();
  if (total == 0) return;
  with_float_type(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch("depthwise_forward", &depthwise_forward_kernel<T>, grid_for(total), stream, static_cast<const T*>(x),
           static_cast<const T*>(w), static_cast<const T*>(bias), total, geometry(s), static_cast<T*>(y));
  });
}

void depthwise_backward_input(DType t, const void* dy, bool dy_f32, const void* w, std::int64_t images,
                              const Conv2dShape& s, void* dx, cudaStream_t stream) {
  const std::int64_t total = images * s.in_channels * s.in_plane();
  if (total == 0) return;
  with_float_type(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (dy_f32) {
      launch("depthwise_backward_input", &depthwise_backward_input_kernel<T, float>, grid_for(total), stream,
             static_cast<const float*>(dy), static_cast<const T*>(w), total, geometry(s), static_cast<T*>(dx));
    } else {
      launch("depthwise_backward_input", &depthwise_backward_input_kernel<T, T>, grid_for(total), stream,
             static_cast<const T*>(dy), static_cast<const T*>(w), total, geometry(s), static_cast<T*>(dx));
    }
  });
}

void depthwise_backward_weight(DType t, const void* x, const void* dy, bool dy_f32, std::int64_t images,
                               const Conv2dShape& s, float* acc, cudaStream_t stream) {
  const std::int64_t blocks = std::int64_t{s.in_channels} * s.window.kernel_h * s.window.kernel_w;
  if (blocks == 0 || images == 0) return;
  with_float_type(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (dy_f32) {
      launch("depthwise_backward_weight", &depthwise_backward_weight_kernel<T, float>,
             LaunchShape::per_block(blocks, kThreads), stream, static_cast<const T*>(x), static_cast<const float*>(dy),
             images, geometry(s), acc);
    } else {
      launch("depthwise_backward_weight", &depthwise_backward_weight_kernel<T, T>,
             LaunchShape::per_block(blocks, kThreads), stream, static_cast<const T*>(x), static_cast<const T*>(dy),
             images, geometry(s), acc);
    }
  });
}

void broadcast_bias(DType t, const void* bias, std::int64_t n, std::int64_t channels, std::int64_t spatial,
                    void* y, cudaStream_t stream) {
  const std::int64_t total = n * channels * spatial;
  if (total == 0) return;
  with_float_type(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch("broadcast_bias", &broadcast_bias_kernel<T>, grid_for(total), stream, static_cast<const T*>(bias), total,
           channels, spatial, static_cast<T*>(y));
  });
}

void channel_sum(DType t, const void* a, std::int64_t n, std::int64_t channels, std::int64_t spatial, void* out,
                 bool accumulate, cudaStream_t stream) {
  if (channels == 0) return;
  with_float_type(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch("channel_sum", &channel_sum_kernel<T>, LaunchShape::per_block(channels, kThreads), stream,
           static_cast<const T*>(a), n, channels, spatial, static_cast<T*>(out), accumulate);
  });
}

void sum_partials(const float* partials, std::int64_t parts, std::int64_t count, float* acc, bool first,
                  cudaStream_t stream) {
  if (count == 0) return;
  launch("sum_partials", &sum_partials_kernel, grid_for(count), stream, partials, parts, count, acc, first);
}

void finish_gradient(const float* src, std::int64_t count, DType t, void* dst, bool accumulate,
                     cudaStream_t stream) {
  if (count == 0) return;
  with_float_type(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch("finish_gradient", &finish_gradient_kernel<T>, grid_for(count), stream, src, count, static_cast<T*>(dst),
           accumulate);
  });
}

void maxpool_forward(DType t, const void* x, const Pool2dShape& s, void* y, cudaStream_t stream) {
  const std::int64_t total = s.batch * s.channels * std::int64_t{s.out_h} * s.out_w;
  if (total == 0) return;
  with_float_type(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch("maxpool_forward", &maxpool_forward_kernel<T>, grid_for(total), stream, static_cast<const T*>(x), total,
           geometry(s), static_cast<T*>(y));
  });
}

void maxpool_backward(DType t, const void* x, const void* dy, const Pool2dShape& s, void* dx, cudaStream_t stream) {
  const std::int64_t total = s.batch * s.channels * std::int64_t{s.in_h} * s.in_w;
  if (total == 0) return;
  with_float_type(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch("maxpool_backward", &maxpool_backward_kernel<T>, grid_for(total), stream, static_cast<const T*>(x),
           static_cast<const T*>(dy), total, geometry(s), static_cast<T*>(dx));
  });
}

void global_avg_pool_forward(DType t, const void* x, std::int64_t rows, std::int64_t plane, void* y,
                             cudaStream_t stream) {
  if (plane <= 0) return;  // an empty plane has no mean (ops.cpp refuses it)
  constexpr int kRowsPerBlock = kThreads / 32;  // a warp per row
  with_float_type(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch("global_avg_pool_forward", &global_avg_pool_forward_kernel<T>,
           LaunchShape::grouped(rows, kRowsPerBlock, kThreads), stream, static_cast<const T*>(x), rows, plane,
           static_cast<T*>(y));
  });
}

void global_avg_pool_backward(DType t, const void* dy, std::int64_t rows, std::int64_t plane, void* dx,
                              cudaStream_t stream) {
  if (rows * plane == 0) return;
  with_float_type(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch("global_avg_pool_backward", &global_avg_pool_backward_kernel<T>, grid_for(rows * plane), stream,
           static_cast<const T*>(dy), rows, plane, static_cast<T*>(dx));
  });
}

}  // namespace sluice::train::cuda_detail
