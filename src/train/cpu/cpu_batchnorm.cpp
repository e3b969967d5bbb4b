// BatchNorm on the CPU, one channel a task: a channel's statistics are sums over N x (H*W) values
// that no other channel needs, so splitting by channel needs no cross-worker reduction and the
// order of every sum is fixed (any thread count gives the same bits). A channel's total is kept in
// double across planes (a channel of a 256 x 32 x 32 batch has 262k values, where one f32 running
// sum loses digits); the variance takes a second pass about the mean rather than E[x^2] - E[x]^2,
// which cancels catastrophically when the mean is large.
#include <algorithm>
#include <cmath>

#include "train/cpu/cpu_backend.hpp"

namespace sluice::train::cpu {
namespace {

// Visits channel c's values: fn(const T* row, length) for each image's plane, images in order.
template <class T, class F>
void for_channel(const T* base, const BatchNormShape& s, int c, F&& fn) {
  for (std::int64_t n = 0; n < s.batch; ++n) fn(base + (n * s.channels + c) * s.spatial, s.spatial);
}

// The per-plane loops. Each is a template body for any storage type, always inlined, and an f32
// overload compiled for AVX-512F, AVX2 and SSE2 (SLUICE_CLONES), which overload resolution picks
// for float: the bodies are memory-bound loops that the baseline build would run 4 wide. They
// take everything by value: through references, a store could alias a bound or a pointer, which
// would be reloaded per element and keep the loop from vectorising.
//
// Sums run in sixteen f32 lanes (vectorisable, no long dependency chain; a plane is at most a few
// thousand values, where f32 is exact enough), returned as double for the channel's running total.
template <class F>
[[gnu::always_inline]] inline double lane_sum(std::int64_t len, F&& term) {
  float lanes[16] = {};
  std::int64_t i = 0;
  for (; i + 16 <= len; i += 16) {
    for (int j = 0; j < 16; ++j) lanes[j] += term(i + j);
  }
  float tail = 0.0f;
  for (; i < len; ++i) tail += term(i);
  double sum = tail;
  for (int j = 0; j < 16; ++j) sum += lanes[j];
  return sum;
}

template <class T>
[[gnu::always_inline]] inline double plane_sum_body(const T* x, std::int64_t len) {
  return lane_sum(len, [x](std::int64_t i) { return load(x, i); });
}
// sum (x - mean)^2
template <class T>
[[gnu::always_inline]] inline double plane_sq_dev_body(const T* x, std::int64_t len, float mean) {
  return lane_sum(len, [x, mean](std::int64_t i) {
    const float d = load(x, i) - mean;
    return d * d;
  });
}
// sum dy and sum dy * xhat, xhat = (x - mean) invstd
template <class T>
[[gnu::always_inline]] inline void plane_grad_sums_body(const T* x, const T* dy, std::int64_t len, float mean,
                                                        float invstd, double* sum_dy, double* sum_dy_xhat) {
  *sum_dy += lane_sum(len, [dy](std::int64_t i) { return load(dy, i); });
  *sum_dy_xhat += lane_sum(len, [x, dy, mean, invstd](std::int64_t i) { return load(dy, i) * ((load(x, i) - mean) * invstd); });
}
// y = a x + b
template <class T>
[[gnu::always_inline]] inline void affine_plane_body(const T* x, T* y, std::int64_t len, float a, float b) {
  for (std::int64_t i = 0; i < len; ++i) store(y, i, a * load(x, i) + b);
}
// dx = k (dy - mean_dy - xhat mean_dy_xhat)
template <class T>
[[gnu::always_inline]] inline void dx_plane_body(const T* x, const T* dy, T* dx, std::int64_t len, float mean,
                                                 float invstd, float k, float mean_dy, float mean_dy_xhat) {
  for (std::int64_t i = 0; i < len; ++i) {
    const float xhat = (load(x, i) - mean) * invstd;
    store(dx, i, k * (load(dy, i) - mean_dy - xhat * mean_dy_xhat));
  }
}

template <class T>
double plane_sum(const T* x, std::int64_t len) { return plane_sum_body(x, len); }
SLUICE_CLONES double plane_sum(const float* x, std::int64_t len) { return plane_sum_body(x, len); }
template <class T>
double plane_sq_dev(const T* x, std::int64_t len, float mean) { return plane_sq_dev_body(x, len, mean); }
SLUICE_CLONES double plane_sq_dev(const float* x, std::int64_t len, float mean) { return plane_sq_dev_body(x, len, mean); }
template <class T>
void plane_grad_sums(const T* x, const T* dy, std::int64_t len, float mean, float invstd, double* sdy, double* sdx) {
  plane_grad_sums_body(x, dy, len, mean, invstd, sdy, sdx);
}
SLUICE_CLONES void plane_grad_sums(const float* x, const float* dy, std::int64_t len, float mean, float invstd,
                                   double* sdy, double* sdx) {
  plane_grad_sums_body(x, dy, len, mean, invstd, sdy, sdx);
}
template <class T>
void affine_plane(const T* x, T* y, std::int64_t len, float a, float b) { affine_plane_body(x, y, len, a, b); }
SLUICE_CLONES void affine_plane(const float* x, float* y, std::int64_t len, float a, float b) {
  affine_plane_body(x, y, len, a, b);
}
template <class T>
void dx_plane(const T* x, const T* dy, T* dx, std::int64_t len, float mean, float invstd, float k, float mdy,
              float mdyx) {
  dx_plane_body(x, dy, dx, len, mean, invstd, k, mdy, mdyx);
}
SLUICE_CLONES void dx_plane(const float* x, const float* dy, float* dx, std::int64_t len, float mean, float invstd,
                            float k, float mdy, float mdyx) {
  dx_plane_body(x, dy, dx, len, mean, invstd, k, mdy, mdyx);
}

template <class T>
void normalize_channel(const T* x, T* y, const BatchNormShape& s, int c, float mean, float invstd, float gamma,
                       float beta) {
  const float a = gamma * invstd, b = beta - mean * a;  // y = a x + b
  for (std::int64_t n = 0; n < s.batch; ++n) {
    const std::int64_t off = (n * s.channels + c) * s.spatial;
    affine_plane(x + off, y + off, s.spatial, a, b);
  }
}

}  // namespace

void CpuBackend::batchnorm_forward_training(Context&, const BatchNormShape& s, const BatchNormParams& p,
                                            const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                            Tensor& running_mean, Tensor& running_var, Tensor& y, Tensor& saved_mean,
                                            Tensor& saved_invstd) {
  const double count = static_cast<double>(s.count());
  with_float_type(x.dtype(), [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* xs = x.data_as<T>();
    T* ys = y.data_as<T>();
    pool_.for_each(s.channels, 1, [&](std::int64_t c0, std::int64_t c1) {
      for (int c = static_cast<int>(c0); c < c1; ++c) {
        double sum = 0.0;
        for_channel(xs, s, c, [&](const T* row, std::int64_t len) { sum += plane_sum(row, len); });
        const double mean = sum / count;
        const float mean_f = static_cast<float>(mean);
        double sq = 0.0;
        for_channel(xs, s, c, [&](const T* row, std::int64_t len) { sq += plane_sq_dev(row, len, mean_f); });
        const double var = sq / count;  // biased: what normalises
        const float invstd = static_cast<float>(1.0 / std::sqrt(var + p.epsilon));
        saved_mean.data_as<float>()[c] = static_cast<float>(mean);
        saved_invstd.data_as<float>()[c] = invstd;
        if (p.update_running_stats) {
          const double unbiased = sq / (count - 1.0);  // ops.cpp requires count > 1
          float& rm = running_mean.data_as<float>()[c];
          float& rv = running_var.data_as<float>()[c];
          rm = static_cast<float>((1.0 - p.momentum) * rm + p.momentum * mean);
          rv = static_cast<float>((1.0 - p.momentum) * rv + p.momentum * unbiased);
        }
        normalize_channel(xs, ys, s, c, static_cast<float>(mean), invstd, gamma.data_as<float>()[c],
                          beta.data_as<float>()[c]);
      }
    });
  });
}

void CpuBackend::batchnorm_forward_inference(Context&, const BatchNormShape& s, const BatchNormParams& p,
                                             const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                             const Tensor& running_mean, const Tensor& running_var, Tensor& y) {
  with_float_type(x.dtype(), [&](auto* tag) {  // y may be x: each element is read before written
    using T = std::remove_pointer_t<decltype(tag)>;
    pool_.for_each(s.channels, 1, [&](std::int64_t c0, std::int64_t c1) {
      for (int c = static_cast<int>(c0); c < c1; ++c) {
        const float invstd = static_cast<float>(1.0 / std::sqrt(double{running_var.data_as<float>()[c]} + p.epsilon));
        normalize_channel(x.data_as<T>(), y.data_as<T>(), s, c, running_mean.data_as<float>()[c], invstd,
                          gamma.data_as<float>()[c], beta.data_as<float>()[c]);
      }
    });
  });
}

void CpuBackend::batchnorm_backward(Context&, const BatchNormShape& s, const Tensor& x, const Tensor& gamma,
                                    const Tensor& saved_mean, const Tensor& saved_invstd, const Tensor& dy, Tensor* dx,
                                    Tensor& dgamma, Tensor& dbeta, GradMode mode) {
  // With xhat = (x - mean) * invstd: dbeta = sum dy, dgamma = sum dy * xhat, and
  // dx = gamma * invstd / M * (M dy - dbeta - xhat dgamma), M = N * H * W (the batch statistics'
  // own gradient included, as training mode needs).
  const bool accumulate = mode == GradMode::kAccumulate;
  const double count = static_cast<double>(s.count());
  with_float_type(x.dtype(), [&](auto* tag) {  // dx may be dy: each element is read before written
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* xs = x.data_as<T>();
    const T* dys = dy.data_as<T>();
    pool_.for_each(s.channels, 1, [&](std::int64_t c0, std::int64_t c1) {
      for (int c = static_cast<int>(c0); c < c1; ++c) {
        const float mean = saved_mean.data_as<float>()[c], invstd = saved_invstd.data_as<float>()[c];
        double sum_dy = 0.0, sum_dy_xhat = 0.0;
        for (std::int64_t n = 0; n < s.batch; ++n) {
          const T* g = dys + (n * s.channels + c) * s.spatial;
          const T* xr = xs + (n * s.channels + c) * s.spatial;
          plane_grad_sums(xr, g, s.spatial, mean, invstd, &sum_dy, &sum_dy_xhat);
        }
        float& dg = dgamma.data_as<float>()[c];
        float& db = dbeta.data_as<float>()[c];
        dg = static_cast<float>(accumulate ? dg + sum_dy_xhat : sum_dy_xhat);
        db = static_cast<float>(accumulate ? db + sum_dy : sum_dy);
        if (dx == nullptr) continue;
        T* dxs = dx->data_as<T>();
        const float k = gamma.data_as<float>()[c] * invstd;
        const float mean_dy = static_cast<float>(sum_dy / count);
        const float mean_dy_xhat = static_cast<float>(sum_dy_xhat / count);
        for (std::int64_t n = 0; n < s.batch; ++n) {
          const std::int64_t off = (n * s.channels + c) * s.spatial;
          dx_plane(xs + off, dys + off, dxs + off, s.spatial, mean, invstd, k, mean_dy, mean_dy_xhat);
        }
      }
    });
  });
}

}  // namespace sluice::train::cpu
