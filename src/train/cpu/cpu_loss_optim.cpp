// Softmax cross-entropy and the optimizer updates (SGD with momentum, AdamW) on the CPU.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>

#include "train/cpu/cpu_backend.hpp"

namespace sluice::train::cpu {

// ---- softmax cross-entropy -------------------------------------------------------------------

namespace {
// One row: its loss (log-sum-exp minus the label's logit, both after subtracting the row maximum)
// and whether its first maximum is the label; writes (softmax - onehot) / N into dz when given.
template <class T>
double row_loss(const T* z, std::int64_t K, std::int32_t label, float inv_n, T* dz, bool* hit) {
  std::int64_t arg = 0;
  float mx = load(z, 0);
  for (std::int64_t k = 1; k < K; ++k) {
    const float v = load(z, k);
    if (v > mx) {  // the first maximum, as torch.argmax
      mx = v;
      arg = k;
    }
  }
  double se = 0.0;
  for (std::int64_t k = 0; k < K; ++k) se += std::exp(static_cast<double>(load(z, k) - mx));
  const double lse = std::log(se);
  *hit = arg == label;
  if (dz != nullptr) {
    for (std::int64_t k = 0; k < K; ++k) {
      const double softmax = std::exp(static_cast<double>(load(z, k) - mx) - lse);
      store(dz, k, static_cast<float>(softmax - (k == label ? 1.0 : 0.0)) * inv_n);
    }
  }
  return lse - static_cast<double>(load(z, label) - mx);
}
}  // namespace

LossResult CpuBackend::softmax_cross_entropy(Context&, const Tensor& logits, const Tensor& labels, Tensor* dlogits) {
  const std::int64_t N = logits.dim(0), K = logits.dim(1);
  const std::int32_t* lab = labels.data_as<std::int32_t>();
  // Labels first, before anything is written: a bad label is the caller's bug (or a dataset's),
  // and the message names the row.
  for (std::int64_t n = 0; n < N; ++n) {
    if (lab[n] < 0 || lab[n] >= K) {
      throw Error(ErrorCode::kInvalidArgument, "softmax_cross_entropy: label " + std::to_string(lab[n]) + " of row " +
                                                   std::to_string(n) + " is out of range [0, " + std::to_string(K) +
                                                   ")");
    }
  }
  // Rows in kReduceGroups fixed groups: a group's loss is summed in row order, the groups' in
  // group order, so the total is the same at any thread count, and needs no workspace.
  const int groups = reduce_groups(N);
  std::array<double, kReduceGroups> loss{};
  std::array<std::int64_t, kReduceGroups> correct{};
  const float inv_n = 1.0f / static_cast<float>(N);
  with_float_type(logits.dtype(), [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* z = logits.data_as<T>();
    T* dz = dlogits == nullptr ? nullptr : dlogits->data_as<T>();
    pool_.run(groups, workers(groups), [&](int, std::int64_t g0, std::int64_t g1) {
      for (std::int64_t g = g0; g < g1; ++g) {
        for (std::int64_t n = N * g / groups; n < N * (g + 1) / groups; ++n) {
          bool hit = false;
          loss[g] += row_loss(z + n * K, K, lab[n], inv_n, dz == nullptr ? nullptr : dz + n * K, &hit);
          correct[g] += hit ? 1 : 0;
        }
      }
    });
  });
  LossResult r;
  double total = 0.0;
  for (int g = 0; g < groups; ++g) {
    total += loss[g];
    r.correct += correct[g];
  }
  r.loss = total / static_cast<double>(N);
  return r;
}

// ---- optimizers ------------------------------------------------------------------------------

namespace {
// The update loops as free functions over plain pointers (vectorised; see relu_f32).
void sgd_span(const SgdUpdate& u, float* w, const float* g, float* buf, std::int64_t n) {
  const float lr = u.learning_rate, wd = u.weight_decay, mu = u.momentum;
  const bool first = u.first_step, nesterov = u.nesterov;
  if (buf == nullptr) {
    for (std::int64_t i = 0; i < n; ++i) w[i] -= lr * (g[i] + wd * w[i]);
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const float d = g[i] + wd * w[i];
    const float b = first ? d : mu * buf[i] + d;
    buf[i] = b;
    w[i] -= lr * (nesterov ? d + mu * b : b);
  }
}

void adamw_span(float b1, float b2, float eps, float decay, float step_size, float inv_sqrt_bc2, float* w,
                const float* g, float* m, float* v, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = b1 * m[i] + (1.0f - b1) * gi;
    const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] = w[i] * decay - step_size * mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps);
  }
}
}  // namespace

void CpuBackend::sgd_update(Context&, const SgdUpdate& u, Tensor& w, const Tensor& g, Tensor* momentum_buf) {
  float* wp = w.data_as<float>();
  const float* gp = g.data_as<float>();
  float* buf = momentum_buf == nullptr ? nullptr : momentum_buf->data_as<float>();
  elementwise(w.elements(), [&](std::int64_t b, std::int64_t e) { sgd_span(u, wp + b, gp + b, buf ? buf + b : nullptr, e - b); });
}

void CpuBackend::adamw_update(Context&, const AdamWUpdate& u, Tensor& w, const Tensor& g, Tensor& m, Tensor& v) {
  // torch.optim.AdamW (its documented algorithm and its implementation's order of operations):
  //   w *= 1 - lr wd;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
  //   w -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
  const double t = static_cast<double>(u.step);
  const float step_size = static_cast<float>(u.learning_rate / (1.0 - std::pow(double{u.beta1}, t)));
  const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(double{u.beta2}, t)));
  const float decay = 1.0f - u.learning_rate * u.weight_decay;
  float* wp = w.data_as<float>();
  const float* gp = g.data_as<float>();
  float* mp = m.data_as<float>();
  float* vp = v.data_as<float>();
  elementwise(w.elements(), [&](std::int64_t b, std::int64_t e) {
    adamw_span(u.beta1, u.beta2, u.epsilon, decay, step_size, inv_sqrt_bc2, wp + b, gp + b, mp + b, vp + b, e - b);
  });
}

}  // namespace sluice::train::cpu
