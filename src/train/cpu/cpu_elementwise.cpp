// ReLU, MaxPool2D, GlobalAvgPool, Dropout and scale on the CPU: element-wise or per-plane loops, split
// over elements or planes (no reductions across workers, so any thread count gives the same bits).
#include <algorithm>
#include <cmath>
#include <limits>

#include "sluice/core/rng.hpp"
#include "train/cpu/cpu_backend.hpp"

namespace sluice::train::cpu {

// ---- ReLU ------------------------------------------------------------------------------------

namespace {
// Free functions over plain pointers, the loads unconditional: the compiler vectorises these
// (with a run-time check for dx == dy), where the same loop inside a lambda that reaches the
// pointers through its closure, or loads dy only where y > 0, stays scalar.
SLUICE_CLONES void relu_f32(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = std::max(x[i], 0.0f);
}
SLUICE_CLONES void relu_grad_f32(const float* y, const float* dy, float* dx, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float g = dy[i];
    dx[i] = y[i] > 0.0f ? g : 0.0f;
  }
}
}  // namespace

void CpuBackend::relu_forward(Context&, const Tensor& x, Tensor& y) {
  const std::int64_t n = x.elements();
  if (x.dtype() == DType::kF32) {  // y may be x
    const float* xf = x.data_as<float>();
    float* yf = y.data_as<float>();
    elementwise(n, [&](std::int64_t b, std::int64_t e) { relu_f32(xf + b, yf + b, e - b); });
    return;
  }
  // 16 bits: max(x, 0) is exact in any format, so no staging; in place is fine element by element.
  with_float_type(x.dtype(), [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* xs = x.data_as<T>();
    T* ys = y.data_as<T>();
    elementwise(n, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) store(ys, i, std::max(load(xs, i), 0.0f));  // as relu_f32
    });
  });
}

void CpuBackend::relu_backward(Context&, const Tensor& y, const Tensor& dy, Tensor& dx) {
  const std::int64_t n = y.elements();
  if (y.dtype() == DType::kF32) {  // a plain loop the compiler vectorises (dx may be dy)
    const float* ys = y.data_as<float>();
    const float* dys = dy.data_as<float>();
    float* dxs = dx.data_as<float>();
    elementwise(n, [&](std::int64_t b, std::int64_t e) { relu_grad_f32(ys + b, dys + b, dxs + b, e - b); });
    return;
  }
  with_float_type(y.dtype(), [&](auto* tag) {  // dx may be dy
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* ys = y.data_as<T>();
    const T* dys = dy.data_as<T>();
    T* dxs = dx.data_as<T>();
    elementwise(n, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) store(dxs, i, load(ys, i) > 0.0f ? load(dys, i) : 0.0f);
    });
  });
}

// ---- MaxPool2D -------------------------------------------------------------------------------

namespace {
// The flat index in the plane of the first maximum of output (oy, ox)'s window, or -1 when the
// window holds padding only (impossible: ops.cpp requires pad < kernel).
template <class T>
std::int64_t argmax_window(const T* plane, const Pool2dShape& s, int oy, int ox, float* best_out) {
  const Window2d& w = s.window;
  float best = -std::numeric_limits<float>::infinity();
  std::int64_t at = -1;
  const int y0 = oy * w.stride_h - w.pad_h, x0 = ox * w.stride_w - w.pad_w;
  for (int ky = std::max(0, -y0); ky < w.kernel_h && y0 + ky < s.in_h; ++ky) {
    for (int kx = std::max(0, -x0); kx < w.kernel_w && x0 + kx < s.in_w; ++kx) {
      const std::int64_t i = std::int64_t{y0 + ky} * s.in_w + x0 + kx;
      const float v = load(plane, i);
      // `> best` keeps the first maximum; NaN wins (and propagates), as in PyTorch.
      if (at < 0 || v > best || (std::isnan(v) && !std::isnan(best))) {
        best = v;
        at = i;
      }
    }
  }
  *best_out = best;
  return at;
}
}  // namespace

namespace {
// The 2x2, stride 2, unpadded window: the common pooling layer, with loops of its own below.
bool is_2x2_stride2(const Pool2dShape& s) { return s.window == Window2d::square(2, 2); }

// The 2x2 stride-2 window without branches: the value of each window (max, or NaN when one of
// the four is NaN, as PyTorch), and its first maximum in row-major order by selects, so the
// loops vectorise. Same results as argmax_window.
template <class T>
[[gnu::always_inline]] inline void maxpool2x2_plane_body(const T* x, int in_w, int oh, int ow, T* y) {
  for (int oy = 0; oy < oh; ++oy) {
    const T* r0 = x + std::int64_t{2 * oy} * in_w;
    const T* r1 = r0 + in_w;
    T* out = y + std::int64_t{oy} * ow;
    for (int ox = 0; ox < ow; ++ox) {
      const float a = load(r0, 2 * ox), b = load(r0, 2 * ox + 1), c = load(r1, 2 * ox), d = load(r1, 2 * ox + 1);
      const bool nan = (a != a) | (b != b) | (c != c) | (d != d);
      store(out, ox, nan ? a + b + c + d : std::max(std::max(a, b), std::max(c, d)));
    }
  }
}

// dx of one plane: each window's dy at its first maximum, zeros elsewhere (also in a last odd
// row or column that no window covers).
template <class T>
[[gnu::always_inline]] inline void maxpool2x2_plane_backward_body(const T* x, const T* dy, int in_h, int in_w, int oh,
                                                                  int ow, T* dx) {
  for (int oy = 0; oy < oh; ++oy) {
    const T* r0 = x + std::int64_t{2 * oy} * in_w;
    const T* r1 = r0 + in_w;
    T* d0 = dx + std::int64_t{2 * oy} * in_w;
    T* d1 = d0 + in_w;
    const T* g = dy + std::int64_t{oy} * ow;
    for (int ox = 0; ox < ow; ++ox) {
      // The first maximum is the first element equal to the window's maximum, or, when the
      // window holds a NaN, the first NaN (argmax_window's rule). Written with non-short-circuit
      // logic and selects so it compiles without branches.
      const float a = load(r0, 2 * ox), b = load(r0, 2 * ox + 1), c = load(r1, 2 * ox), d = load(r1, 2 * ox + 1);
      const bool nan = (a != a) | (b != b) | (c != c) | (d != d);
      const float m = std::max(std::max(a, b), std::max(c, d));
      const bool ha = nan ? a != a : a == m, hb = nan ? b != b : b == m, hc = nan ? c != c : c == m;
      const bool ta = ha, tb = !ha & hb, tc = !ha & !hb & hc, td = !ha & !hb & !hc;
      const float gv = load(g, ox);
      store(d0, 2 * ox, ta ? gv : 0.0f);
      store(d0, 2 * ox + 1, tb ? gv : 0.0f);
      store(d1, 2 * ox, tc ? gv : 0.0f);
      store(d1, 2 * ox + 1, td ? gv : 0.0f);
    }
    if (in_w > 2 * ow) {
      store(d0, in_w - 1, 0.0f);
      store(d1, in_w - 1, 0.0f);
    }
  }
  for (std::int64_t i = std::int64_t{2 * oh} * in_w; i < std::int64_t{in_h} * in_w; ++i) store(dx, i, 0.0f);
}

// The template bodies for 16-bit types, and f32 overloads compiled per ISA (SLUICE_CLONES).
template <class T>
void maxpool2x2_plane(const T* x, int in_w, int oh, int ow, T* y) { maxpool2x2_plane_body(x, in_w, oh, ow, y); }
SLUICE_CLONES void maxpool2x2_plane(const float* x, int in_w, int oh, int ow, float* y) {
  maxpool2x2_plane_body(x, in_w, oh, ow, y);
}
template <class T>
void maxpool2x2_plane_backward(const T* x, const T* dy, int in_h, int in_w, int oh, int ow, T* dx) {
  maxpool2x2_plane_backward_body(x, dy, in_h, in_w, oh, ow, dx);
}
SLUICE_CLONES void maxpool2x2_plane_backward(const float* x, const float* dy, int in_h, int in_w, int oh, int ow,
                                             float* dx) {
  maxpool2x2_plane_backward_body(x, dy, in_h, in_w, oh, ow, dx);
}

// One plane, forward and (non-overlapping windows) backward, for any window: free functions over
// plain pointers and sizes, so nothing is reloaded per element through a closure.
template <class T>
void maxpool_plane(const T* x, const Pool2dShape& shape, T* y) {
  const Pool2dShape s = shape;
  for (int oy = 0; oy < s.out_h; ++oy) {
    for (int ox = 0; ox < s.out_w; ++ox) {
      float best;
      argmax_window(x, s, oy, ox, &best);
      store(y, std::int64_t{oy} * s.out_w + ox, best);
    }
  }
}

template <class T>
void maxpool_plane_backward_disjoint(const T* x, const T* dy, const Pool2dShape& shape, T* dx) {
  const Pool2dShape s = shape;
  const std::int64_t in_plane = std::int64_t{s.in_h} * s.in_w;
  for (std::int64_t i = 0; i < in_plane; ++i) store(dx, i, 0.0f);
  for (int oy = 0; oy < s.out_h; ++oy) {
    for (int ox = 0; ox < s.out_w; ++ox) {
      float best;
      const std::int64_t at = argmax_window(x, s, oy, ox, &best);
      store(dx, at, load(dy, std::int64_t{oy} * s.out_w + ox));
    }
  }
}
}  // namespace

void CpuBackend::maxpool2d_forward(Context&, const Pool2dShape& s, const Tensor& x, Tensor& y) {
  const bool fast = is_2x2_stride2(s);
  with_float_type(x.dtype(), [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* xs = x.data_as<T>();
    T* ys = y.data_as<T>();
    const std::int64_t in_plane = std::int64_t{s.in_h} * s.in_w, out_plane = std::int64_t{s.out_h} * s.out_w;
    pool_.for_each(s.batch * s.channels, 1, [&](std::int64_t p0, std::int64_t p1) {
      for (std::int64_t p = p0; p < p1; ++p) {
        if (fast) {
          maxpool2x2_plane(xs + p * in_plane, s.in_w, s.out_h, s.out_w, ys + p * out_plane);
        } else {
          maxpool_plane(xs + p * in_plane, s, ys + p * out_plane);
        }
      }
    });
  });
}

void CpuBackend::maxpool2d_backward(Context&, const Pool2dShape& s, const Tensor& x, const Tensor& dy, Tensor& dx) {
  const Window2d& w = s.window;
  const std::int64_t in_plane = std::int64_t{s.in_h} * s.in_w, out_plane = std::int64_t{s.out_h} * s.out_w;
  if (w.stride_h >= w.kernel_h && w.stride_w >= w.kernel_w) {
    // Windows that do not overlap (the usual 2x2, stride 2): each pixel takes the gradient of at
    // most one window, so dx is zeroed and each window's dy stored at its first maximum.
    const bool fast = is_2x2_stride2(s);
    with_float_type(x.dtype(), [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      const T* xs = x.data_as<T>();
      const T* dys = dy.data_as<T>();
      T* dxs = dx.data_as<T>();
      pool_.for_each(s.batch * s.channels, 1, [&](std::int64_t p0, std::int64_t p1) {
        for (std::int64_t p = p0; p < p1; ++p) {
          if (fast) {
            maxpool2x2_plane_backward(xs + p * in_plane, dys + p * out_plane, s.in_h, s.in_w, s.out_h, s.out_w,
                                      dxs + p * in_plane);
          } else {
            maxpool_plane_backward_disjoint(xs + p * in_plane, dys + p * out_plane, s, dxs + p * in_plane);
          }
        }
      });
    });
    return;
  }
  // Overlapping windows: gathered per input pixel rather than scattered per window. Each dx
  // element is the f32 sum of dy over the windows (at most ceil(k / stride) per axis) whose first
  // maximum it is, stored once, so no f32 copy of dx is needed (no workspace, also for 16 bits),
  // at the price of finding each window's maximum again per pixel it covers.
  // Outputs o whose window [o * stride - pad, o * stride - pad + kernel) contains i.
  auto outputs_over = [](int i, int kernel, int stride, int pad, int out) {
    const int num = i + pad - kernel + 1;  // o * stride >= num
    const int lo = num <= 0 ? 0 : (num + stride - 1) / stride;
    const int hi = std::min(out - 1, (i + pad) / stride);
    return std::pair{lo, hi};
  };
  with_float_type(x.dtype(), [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* xs = x.data_as<T>();
    const T* dys = dy.data_as<T>();
    T* dxs = dx.data_as<T>();
    pool_.for_each(s.batch * s.channels, 1, [&](std::int64_t p0, std::int64_t p1) {
      for (std::int64_t p = p0; p < p1; ++p) {
        const T* plane = xs + p * in_plane;
        for (int iy = 0; iy < s.in_h; ++iy) {
          const auto [oy0, oy1] = outputs_over(iy, w.kernel_h, w.stride_h, w.pad_h, s.out_h);
          for (int ix = 0; ix < s.in_w; ++ix) {
            const auto [ox0, ox1] = outputs_over(ix, w.kernel_w, w.stride_w, w.pad_w, s.out_w);
            const std::int64_t self = std::int64_t{iy} * s.in_w + ix;
            float sum = 0.0f;
            for (int oy = oy0; oy <= oy1; ++oy) {
              for (int ox = ox0; ox <= ox1; ++ox) {
                float best;
                if (argmax_window(plane, s, oy, ox, &best) == self) {
                  sum += load(dys, p * out_plane + std::int64_t{oy} * s.out_w + ox);
                }
              }
            }
            store(dxs, p * in_plane + self, sum);
          }
        }
      }
    });
  });
}

// ---- GlobalAvgPool ---------------------------------------------------------------------------

void CpuBackend::global_avg_pool_forward(Context&, const Tensor& x, Tensor& y) {
  const std::int64_t planes = x.dim(0) * x.dim(1), plane = x.dim(2) * x.dim(3);
  const float inv = 1.0f / static_cast<float>(plane);
  with_float_type(x.dtype(), [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* xs = x.data_as<T>();
    T* ys = y.data_as<T>();
    pool_.for_each(planes, 64, [&](std::int64_t p0, std::int64_t p1) {
      for (std::int64_t p = p0; p < p1; ++p) {
        // Eight running sums (vectorisable, and a shorter chain than one) in a fixed order.
        float lanes[8] = {};
        const T* src = xs + p * plane;
        std::int64_t i = 0;
        for (; i + 8 <= plane; i += 8) {
          for (int j = 0; j < 8; ++j) lanes[j] += load(src, i + j);
        }
        float sum = 0.0f;
        for (; i < plane; ++i) sum += load(src, i);
        for (int j = 0; j < 8; ++j) sum += lanes[j];
        store(ys, p, sum * inv);
      }
    });
  });
}

void CpuBackend::global_avg_pool_backward(Context&, const Tensor& dy, Tensor& dx) {
  const std::int64_t planes = dx.dim(0) * dx.dim(1), plane = dx.dim(2) * dx.dim(3);
  const float inv = 1.0f / static_cast<float>(plane);
  with_float_type(dx.dtype(), [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* dys = dy.data_as<T>();
    T* dxs = dx.data_as<T>();
    pool_.for_each(planes, 64, [&, dys, dxs](std::int64_t p0, std::int64_t p1) {
      for (std::int64_t p = p0; p < p1; ++p) {
        const float g = load(dys, p) * inv;
        for (std::int64_t i = 0; i < plane; ++i) store(dxs, p * plane + i, g);
      }
    });
  });
}

// ---- Dropout ---------------------------------------------------------------------------------

namespace {
// The scale of kept elements for each of the 4 elements [4q, 4q + 4): 0 for dropped ones.
// DropoutMask (ops.hpp) fixes the draw: Philox4x32-10 with key (key low, key high) and counter
// (q low, q high, step low, step high); word i % 4 of the block, its top 24 bits as u in [0, 1);
// element i is dropped when u < rate. 24 bits, so u and rate compare exactly in f32 on a GPU too.
inline void keep_scales(const DropoutMask& m, std::uint64_t q, float scale, float out[4]) {
  const auto r = philox4x32({static_cast<std::uint32_t>(m.key), static_cast<std::uint32_t>(m.key >> 32)},
                            {static_cast<std::uint32_t>(q), static_cast<std::uint32_t>(q >> 32),
                             static_cast<std::uint32_t>(m.step), static_cast<std::uint32_t>(m.step >> 32)});
  for (int j = 0; j < 4; ++j) {
    const float u = static_cast<float>(r[j] >> 8) * (1.0f / 16777216.0f);
    out[j] = u < m.rate ? 0.0f : scale;
  }
}

template <class T>
void apply_dropout(WorkerPool& pool, const DropoutMask& m, const T* in, T* out, std::int64_t n) {
  const float scale = 1.0f / (1.0f - m.rate);
  // Element i draws as element g = offset + i of the stream: block g / 4, word g % 4.
  const auto offset = static_cast<std::int64_t>(m.offset);
  const std::int64_t q_first = offset / 4;
  const std::int64_t quads = (offset + n + 3) / 4 - q_first;
  pool.for_each(quads, kElementGrain / 4, [&, in, out](std::int64_t q0, std::int64_t q1) {
    for (std::int64_t q = q0; q < q1; ++q) {
      float k[4];
      keep_scales(m, static_cast<std::uint64_t>(q_first + q), scale, k);
      const std::int64_t i0 = (q_first + q) * 4 - offset;  // the tensor index of word 0
      for (int j = 0; j < 4; ++j) {
        const std::int64_t i = i0 + j;
        if (i >= 0 && i < n) store(out, i, load(in, i) * k[j]);
      }
    }
  });
}
}  // namespace

void CpuBackend::dropout_forward(Context&, const DropoutMask& m, const Tensor& x, Tensor& y) {
  with_float_type(x.dtype(), [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    apply_dropout(pool_, m, x.data_as<T>(), y.data_as<T>(), x.elements());
  });
}

void CpuBackend::dropout_backward(Context&, const DropoutMask& m, const Tensor& dy, Tensor& dx) {
  with_float_type(dy.dtype(), [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    apply_dropout(pool_, m, dy.data_as<T>(), dx.data_as<T>(), dy.elements());
  });
}

// ---- scale -----------------------------------------------------------------------------------

void CpuBackend::scale(Context&, Tensor& t, float alpha) {
  with_float_type(t.dtype(), [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    T* p = t.data_as<T>();
    elementwise(t.elements(), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) store(p, i, load(p, i) * alpha);
    });
  });
}

}  // namespace sluice::train::cpu
