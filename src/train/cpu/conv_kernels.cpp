// f32 convolution kernels (conv_kernels.hpp). Each row loop is split by the kernel tap into the
// output range that reads real pixels ([lo, hi)) and the padding around it, so the inner loops
// have no bounds checks and, at stride 1, read contiguous input: the compiler turns them into
// vector FMAs; each is compiled for AVX-512F, AVX2 and baseline x86-64 (SLUICE_CLONES,
// cpu_util.hpp).
#include "train/cpu/conv_kernels.hpp"

#include <algorithm>
#include <cstring>

#include "train/cpu/cpu_util.hpp"

namespace sluice::train::cpu {
namespace {

// Output positions o in [lo, hi) whose input index o * stride - pad + tap lies in [0, size).
struct Span {
  int lo;
  int hi;
};
inline Span valid_span(int tap, int size, int out, int stride, int pad) {
  const int first = pad - tap;  // o * stride >= first
  const int lo = first > 0 ? (first + stride - 1) / stride : 0;
  const int last = size - 1 + pad - tap;  // o * stride <= last
  int hi = last < 0 ? 0 : last / stride + 1;
  hi = std::min(hi, out);
  return {std::min(lo, hi), hi};
}

// valid_span for every kernel column kx, computed once per plane rather than per output row (two
// integer divisions per row and tap were a tenth of a depthwise layer's time on 8x8 planes).
class Spans {
 public:
  static constexpr int kCached = 16;
  Spans(const Window2d& win, int w, int ow) : win_(win), w_(w), ow_(ow) {
    for (int kx = 0; kx < std::min(win.kernel_w, kCached); ++kx) cached_[kx] = valid_span(kx, w, ow, win.stride_w, win.pad_w);
  }
  Span operator[](int kx) const {
    return kx < kCached ? cached_[kx] : valid_span(kx, w_, ow_, win_.stride_w, win_.pad_w);
  }

 private:
  Span cached_[kCached];
  const Window2d& win_;
  int w_, ow_;
};

// ---- the 3x3, stride 1 depthwise fast path ----
// The layer every separable block of our CNNs uses. Over a zero-padded copy of the plane (on the
// stack, when it fits) every output row is one loop over the full width with the nine taps as
// one expression: no spans, no remainder loops at the row ends, one store per output instead of
// nine read-modify-writes. Planes up to 88 x 88 (padded) take it; larger ones the general loops.
constexpr int kPadMaxFloats = 8192;  // 32 KiB of stack

inline bool is_3x3_stride1(const Window2d& win) {
  return win.kernel_h == 3 && win.kernel_w == 3 && win.stride_h == 1 && win.stride_w == 1;
}

// dst ((h + 2 ph) x (w + 2 pw)) = src (h x w) with a border of zeros.
[[gnu::always_inline]] inline void pad_plane(const float* __restrict src, int h, int w, int ph, int pw,
                                             float* __restrict dst) {
  const int dw = w + 2 * pw;
  std::memset(dst, 0, sizeof(float) * static_cast<std::size_t>(ph) * dw);
  for (int y = 0; y < h; ++y) {
    float* row = dst + std::int64_t{y + ph} * dw;
    for (int x = 0; x < pw; ++x) row[x] = 0.0f;
    std::memcpy(row + pw, src + std::int64_t{y} * w, sizeof(float) * w);
    for (int x = pw + w; x < dw; ++x) row[x] = 0.0f;
  }
  std::memset(dst + std::int64_t{h + ph} * dw, 0, sizeof(float) * static_cast<std::size_t>(ph) * dw);
}

// out (rows x cols) = bias + the 3x3 correlation of the padded plane p (row stride pw) with k.
[[gnu::always_inline]] inline void correlate3x3(const float* __restrict p, int pw, const float* k, float bias, int rows,
                                                int cols, float* __restrict out) {
  const float k0 = k[0], k1 = k[1], k2 = k[2], k3 = k[3], k4 = k[4], k5 = k[5], k6 = k[6], k7 = k[7], k8 = k[8];
  for (int r = 0; r < rows; ++r) {
    const float* __restrict a = p + std::int64_t{r} * pw;
    const float* __restrict b = a + pw;
    const float* __restrict c = b + pw;
    float* __restrict o = out + std::int64_t{r} * cols;
    for (int x = 0; x < cols; ++x) {
      o[x] = bias + k0 * a[x] + k1 * a[x + 1] + k2 * a[x + 2] + k3 * b[x] + k4 * b[x + 1] + k5 * b[x + 2] +
             k6 * c[x] + k7 * c[x + 1] + k8 * c[x + 2];
    }
  }
}


// The general path of depthwise_plane_backward_weight: rows[tap][ox] += dy[oy][ox] * x under tap.
[[gnu::always_inline]] inline void depthwise_weight_rows(const float* __restrict x, int h, int w,
                                                         const float* __restrict dy, const Window2d& win, int oh,
                                                         int ow, float* __restrict rows) {
  const Spans spans(win, w, ow);
  for (int oy = 0; oy < oh; ++oy) {
    const float* __restrict g = dy + std::int64_t{oy} * ow;
    for (int ky = 0; ky < win.kernel_h; ++ky) {
      const int iy = oy * win.stride_h - win.pad_h + ky;
      if (iy < 0 || iy >= h) continue;
      for (int kx = 0; kx < win.kernel_w; ++kx) {
        float* __restrict acc = rows + std::int64_t{ky * win.kernel_w + kx} * ow;
        const Span s = spans[kx];
        const float* __restrict src = x + std::int64_t{iy} * w - win.pad_w + kx;
        if (win.stride_w == 1) {
          for (int ox = s.lo; ox < s.hi; ++ox) acc[ox] += g[ox] * src[ox];
        } else {
          for (int ox = s.lo; ox < s.hi; ++ox) acc[ox] += g[ox] * src[ox * win.stride_w];
        }
      }
    }
  }
}

}  // namespace

SLUICE_CLONES
void im2col(const float* x, int channels, int h, int w, const Window2d& win, int oh, int ow, float* col) {
  const std::int64_t plane_out = std::int64_t{oh} * ow;
  for (int c = 0; c < channels; ++c) {
    const float* plane = x + std::int64_t{c} * h * w;
    for (int ky = 0; ky < win.kernel_h; ++ky) {
      for (int kx = 0; kx < win.kernel_w; ++kx) {
        float* row = col + ((std::int64_t{c} * win.kernel_h + ky) * win.kernel_w + kx) * plane_out;
        const Span s = valid_span(kx, w, ow, win.stride_w, win.pad_w);
        for (int oy = 0; oy < oh; ++oy) {
          float* dst = row + std::int64_t{oy} * ow;
          const int iy = oy * win.stride_h - win.pad_h + ky;
          if (iy < 0 || iy >= h) {
            std::memset(dst, 0, sizeof(float) * ow);
            continue;
          }
          const float* src = plane + std::int64_t{iy} * w - win.pad_w + kx;
          for (int ox = 0; ox < s.lo; ++ox) dst[ox] = 0.0f;
          if (win.stride_w == 1) {
            for (int ox = s.lo; ox < s.hi; ++ox) dst[ox] = src[ox];
          } else {
            for (int ox = s.lo; ox < s.hi; ++ox) dst[ox] = src[ox * win.stride_w];
          }
          for (int ox = s.hi; ox < ow; ++ox) dst[ox] = 0.0f;
        }
      }
    }
  }
}

SLUICE_CLONES
void col2im(const float* col, int channels, int h, int w, const Window2d& win, int oh, int ow, float* dx) {
  const std::int64_t plane_out = std::int64_t{oh} * ow;
  std::memset(dx, 0, sizeof(float) * channels * h * w);
  for (int c = 0; c < channels; ++c) {
    float* plane = dx + std::int64_t{c} * h * w;
    for (int ky = 0; ky < win.kernel_h; ++ky) {
      for (int kx = 0; kx < win.kernel_w; ++kx) {
        const float* row = col + ((std::int64_t{c} * win.kernel_h + ky) * win.kernel_w + kx) * plane_out;
        const Span s = valid_span(kx, w, ow, win.stride_w, win.pad_w);
        for (int oy = 0; oy < oh; ++oy) {
          const int iy = oy * win.stride_h - win.pad_h + ky;
          if (iy < 0 || iy >= h) continue;
          const float* src = row + std::int64_t{oy} * ow;
          float* dst = plane + std::int64_t{iy} * w - win.pad_w + kx;
          if (win.stride_w == 1) {
            for (int ox = s.lo; ox < s.hi; ++ox) dst[ox] += src[ox];
          } else {
            for (int ox = s.lo; ox < s.hi; ++ox) dst[ox * win.stride_w] += src[ox];
          }
        }
      }
    }
  }
}

SLUICE_CLONES
void depthwise_plane_forward(const float* __restrict x, int h, int w, const float* __restrict weight,
                             float bias, const Window2d& win, int oh, int ow, float* __restrict y) {
  if (is_3x3_stride1(win) && (h + 2 * win.pad_h) * (w + 2 * win.pad_w) <= kPadMaxFloats) {
    alignas(64) float padded[kPadMaxFloats];
    pad_plane(x, h, w, win.pad_h, win.pad_w, padded);
    correlate3x3(padded, w + 2 * win.pad_w, weight, bias, oh, ow, y);
    return;
  }
  const Spans spans(win, w, ow);
  for (int oy = 0; oy < oh; ++oy) {
    float* __restrict dst = y + std::int64_t{oy} * ow;
    for (int ox = 0; ox < ow; ++ox) dst[ox] = bias;
    for (int ky = 0; ky < win.kernel_h; ++ky) {
      const int iy = oy * win.stride_h - win.pad_h + ky;
      if (iy < 0 || iy >= h) continue;
      for (int kx = 0; kx < win.kernel_w; ++kx) {
        const float wv = weight[ky * win.kernel_w + kx];
        const Span s = spans[kx];
        const float* __restrict src = x + std::int64_t{iy} * w - win.pad_w + kx;
        if (win.stride_w == 1) {
          for (int ox = s.lo; ox < s.hi; ++ox) dst[ox] += wv * src[ox];
        } else {
          for (int ox = s.lo; ox < s.hi; ++ox) dst[ox] += wv * src[ox * win.stride_w];
        }
      }
    }
  }
}

SLUICE_CLONES
void depthwise_plane_backward_input(const float* __restrict dy, int h, int w, const float* __restrict weight,
                                    const Window2d& win, int oh, int ow, float* __restrict dx) {
  // 3x3 stride 1: dx is the correlation of dy, padded by 2 - pad, with the kernel turned by
  // 180 degrees (dx[i][j] = sum w[a][b] dy[i + pad - a][j + pad - b]); the padded dy is
  // (h + 2) x (w + 2) whatever the padding.
  if (is_3x3_stride1(win) && (h + 2) * (w + 2) <= kPadMaxFloats) {
    alignas(64) float padded[kPadMaxFloats];
    pad_plane(dy, oh, ow, 2 - win.pad_h, 2 - win.pad_w, padded);
    const float turned[9] = {weight[8], weight[7], weight[6], weight[5], weight[4],
                             weight[3], weight[2], weight[1], weight[0]};
    correlate3x3(padded, w + 2, turned, 0.0f, h, w, dx);
    return;
  }
  const Spans spans(win, w, ow);
  std::memset(dx, 0, sizeof(float) * h * w);
  for (int oy = 0; oy < oh; ++oy) {
    const float* __restrict src = dy + std::int64_t{oy} * ow;
    for (int ky = 0; ky < win.kernel_h; ++ky) {
      const int iy = oy * win.stride_h - win.pad_h + ky;
      if (iy < 0 || iy >= h) continue;
      for (int kx = 0; kx < win.kernel_w; ++kx) {
        const float wv = weight[ky * win.kernel_w + kx];
        const Span s = spans[kx];
        float* __restrict dst = dx + std::int64_t{iy} * w - win.pad_w + kx;
        if (win.stride_w == 1) {
          for (int ox = s.lo; ox < s.hi; ++ox) dst[ox] += wv * src[ox];
        } else {
          for (int ox = s.lo; ox < s.hi; ++ox) dst[ox * win.stride_w] += wv * src[ox];
        }
      }
    }
  }
}

SLUICE_CLONES
void depthwise_plane_backward_weight(const float* __restrict x, int h, int w, const float* __restrict dy,
                                     const Window2d& win, int oh, int ow, float* __restrict rows,
                                     float* __restrict dw) {
  const int taps = win.kernel_h * win.kernel_w;
  std::memset(rows, 0, sizeof(float) * taps * ow);
  if (is_3x3_stride1(win) && (h + 2 * win.pad_h) * (w + 2 * win.pad_w) <= kPadMaxFloats) {
    // Per tap (a, b): rows[tap][ox] += dy[oy][ox] * xpad[oy + a][ox + b], full-width loops.
    alignas(64) float padded[kPadMaxFloats];
    const int pw = w + 2 * win.pad_w;
    pad_plane(x, h, w, win.pad_h, win.pad_w, padded);
    for (int oy = 0; oy < oh; ++oy) {
      const float* __restrict g = dy + std::int64_t{oy} * ow;
      for (int a = 0; a < 3; ++a) {
        const float* __restrict src = padded + std::int64_t{oy + a} * pw;
        for (int b = 0; b < 3; ++b) {
          float* __restrict acc = rows + std::int64_t{a * 3 + b} * ow;
          for (int ox = 0; ox < ow; ++ox) acc[ox] += g[ox] * src[ox + b];
        }
      }
    }
  } else {
    depthwise_weight_rows(x, h, w, dy, win, oh, ow, rows);
  }
  for (int t = 0; t < taps; ++t) {
    const float* acc = rows + std::int64_t{t} * ow;
    float lanes[8] = {};
    int ox = 0;
    for (; ox + 8 <= ow; ox += 8) {
      for (int j = 0; j < 8; ++j) lanes[j] += acc[ox + j];
    }
    float sum = 0.0f;
    for (; ox < ow; ++ox) sum += acc[ox];
    for (int j = 0; j < 8; ++j) sum += lanes[j];
    dw[t] += sum;
  }
}

SLUICE_CLONES
void add_row_bias(float* y, int rows, int cols, const float* bias) {
  for (int r = 0; r < rows; ++r) {
    float* __restrict row = y + std::int64_t{r} * cols;
    const float b = bias[r];
    for (int c = 0; c < cols; ++c) row[c] += b;
  }
}

SLUICE_CLONES
void add_row_sums(const float* dy, int rows, int cols, float* sums) {
  for (int r = 0; r < rows; ++r) {
    const float* row = dy + std::int64_t{r} * cols;
    float lanes[16] = {};
    int c = 0;
    for (; c + 16 <= cols; c += 16) {
      for (int j = 0; j < 16; ++j) lanes[j] += row[c + j];
    }
    float sum = 0.0f;
    for (; c < cols; ++c) sum += row[c];
    for (int j = 0; j < 16; ++j) sum += lanes[j];
    sums[r] += sum;
  }
}

}  // namespace sluice::train::cpu
