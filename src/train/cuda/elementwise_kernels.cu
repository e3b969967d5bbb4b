// The CUDA backend's element-wise and reduction kernels: ReLU, dropout (the CPU backend's Philox
// mask, bit for bit), scale, fill and cast, batch normalisation (training, inference, backward),
// softmax cross-entropy with labels checked on the device, and the SGD / AdamW updates. CPU
// twins: src/train/cpu/.
//
// Reductions run one block per channel (batch norm) or one warp per row (the loss) with fixed
// shapes, so results are deterministic; batch-norm statistics accumulate in f64 per thread.
#include <climits>
#include <cmath>

#include "train/cuda/cuda_common.cuh"
#include "train/cuda/cuda_kernels.hpp"

namespace sluice::train::cuda_detail {
namespace {

// ---- ReLU ------------------------------------------------------------------------------------
template <class T>
__global__ void relu_forward_kernel(const T* x, T* y, std::int64_t n) {
  // x may be y (in place): each element is read and written by the same thread.
  SLUICE_GRID_LOOP(i, n) {
    const float v = ld(x, i);
    st(y, i, v > 0.0f ? v : 0.0f);
  }
}

template <class T>
__global__ void relu_backward_kernel(const T* y, const T* dy, T* dx, std::int64_t n) {
  SLUICE_GRID_LOOP(i, n) { st(dx, i, ld(y, i) > 0.0f ? ld(dy, i) : 0.0f); }
}

// ---- dropout ---------------------------------------------------------------------------------
// Philox4x32-10 exactly as sluice::philox4x32 (src/core/rng.cpp).
__device__ __forceinline__ uint4 philox4x32(uint2 key, uint4 ctr) {
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    const unsigned hi0 = __umulhi(0xD2511F53u, ctr.x);
    const unsigned lo0 = 0xD2511F53u * ctr.x;
    const unsigned hi1 = __umulhi(0xCD9E8D57u, ctr.z);
    const unsigned lo1 = 0xCD9E8D57u * ctr.z;
    ctr = make_uint4(hi1 ^ ctr.y ^ key.x, lo1, hi0 ^ ctr.w ^ key.y, lo0);
    key.x += 0x9E3779B9u;
    key.y += 0xBB67AE85u;
  }
  return ctr;
}

struct DropoutLaunch {
  uint2 key;
  unsigned step_lo, step_hi;
  std::int64_t offset;  // element i draws as element offset + i (DropoutMask::offset)
  float rate;
  float scale;  // 1 / (1 - rate)
};

// The CPU's rule (cpu_elementwise.cpp, keep_scales): block q = i / 4 of Philox4x32-10 with key
// (key low, key high) and counter (q low, q high, step low, step high); word i % 4, its top 24
// bits as u in [0, 1) (exact in f32); element i dropped when u < rate. out = in * (0 or scale),
// so a dropped NaN stays NaN, as on the CPU. One thread per block of four.
__device__ __forceinline__ float keep_scale(unsigned word, const DropoutLaunch& p) {
  const float u = static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
  return u < p.rate ? 0.0f : p.scale;
}

template <class T>
__global__ void dropout_kernel(DropoutLaunch p, const T* in, T* out, std::int64_t n) {
  const std::int64_t q_first = p.offset / 4;
  const std::int64_t quads = (p.offset + n + 3) / 4 - q_first;
  SLUICE_GRID_LOOP(q, quads) {
    const auto u = static_cast<std::uint64_t>(q_first + q);
    const uint4 r = philox4x32(p.key, make_uint4(static_cast<unsigned>(u), static_cast<unsigned>(u >> 32),
                                                 p.step_lo, p.step_hi));
    const unsigned words[4] = {r.x, r.y, r.z, r.w};
    const std::int64_t i0 = (q_first + q) * 4 - p.offset;  // the tensor index of word 0
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (i0 + j >= 0 && i0 + j < n) st(out, i0 + j, ld(in, i0 + j) * keep_scale(words[j], p));
    }
  }
}

// ---- scale -----------------------------------------------------------------------------------
template <class T>
__global__ void scale_kernel(T* t, float alpha, std::int64_t n) {
  SLUICE_GRID_LOOP(i, n) { st(t, i, ld(t, i) * alpha); }
}

// ---- fill and cast ---------------------------------------------------------------------------
template <class U>
__global__ void fill_kernel(U value, U* dst, std::int64_t n) {
  SLUICE_GRID_LOOP(i, n) { dst[i] = value; }
}

template <class S, class D>
__global__ void cast_kernel(const S* src, D* dst, std::int64_t n) {
  SLUICE_GRID_LOOP(i, n) { st(dst, i, ld(src, i)); }
}

// ---- batch norm ------------------------------------------------------------------------------
// Element j of channel c among count = batch * spatial.
__device__ __forceinline__ std::int64_t bn_index(const BatchNormLaunch& p, int c, std::int64_t j) {
  return ((j / p.spatial) * p.channels + c) * p.spatial + j % p.spatial;
}

// One block per channel: mean, biased variance (two passes), the running averages, then y.
template <class T>
__global__ void batchnorm_training_kernel(BatchNormLaunch p, const T* x, const float* gamma, const float* beta,
                                          float* running_mean, float* running_var, T* y, float* saved_mean,
                                          float* saved_invstd) {
  __shared__ double shared[32];
  const int c = blockIdx.x;
  const std::int64_t count = p.batch * p.spatial;
  double sum = 0.0;
  for (std::int64_t j = threadIdx.x; j < count; j += blockDim.x) sum += ld(x, bn_index(p, c, j));
  const double mean = block_sum(sum, shared) / static_cast<double>(count);
  double squares = 0.0;
  for (std::int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const double d = ld(x, bn_index(p, c, j)) - mean;
    squares += d * d;
  }
  const double var = block_sum(squares, shared) / static_cast<double>(count);
  const float invstd = static_cast<float>(1.0 / sqrt(var + static_cast<double>(p.epsilon)));
  const float m = static_cast<float>(mean);
  if (threadIdx.x == 0) {
    saved_mean[c] = m;
    saved_invstd[c] = invstd;
    if (p.update_running_stats) {
      const double unbiased = count > 1 ? var * static_cast<double>(count) / static_cast<double>(count - 1) : var;
      running_mean[c] = (1.0f - p.momentum) * running_mean[c] + p.momentum * m;
      running_var[c] = (1.0f - p.momentum) * running_var[c] + p.momentum * static_cast<float>(unbiased);
    }
  }
  const float scale = gamma[c] * invstd;
  const float shift = beta[c];
  // y may be x: every element is read before it is written, by the same thread.
  for (std::int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const std::int64_t i = bn_index(p, c, j);
    st(y, i, (ld(x, i) - m) * scale + shift);
  }
}

template <class T>
__global__ void batchnorm_inference_kernel(BatchNormLaunch p, const T* x, const float* gamma, const float* beta,
                                           const float* running_mean, const float* running_var, T* y) {
  const std::int64_t n = p.batch * p.channels * p.spatial;
  SLUICE_GRID_LOOP(i, n) {
    const int c = static_cast<int>((i / p.spatial) % p.channels);
    const float invstd = 1.0f / sqrtf(running_var[c] + p.epsilon);
    st(y, i, (ld(x, i) - running_mean[c]) * invstd * gamma[c] + beta[c]);
  }
}

// One block per channel: dbeta = sum dy, dgamma = sum dy * xhat, then
// dx = gamma * invstd * (dy - dbeta / count - xhat * dgamma / count).
template <class T>
__global__ void batchnorm_backward_kernel(BatchNormLaunch p, const T* x, const float* gamma, const float* saved_mean,
                                          const float* saved_invstd, const T* dy, T* dx, float* dgamma,
                                          float* dbeta, bool accumulate) {
  __shared__ double shared[32];
  const int c = blockIdx.x;
  const std::int64_t count = p.batch * p.spatial;
  const float mean = saved_mean[c];
  const float invstd = saved_invstd[c];
  double sum_dy = 0.0;
  double sum_dy_xhat = 0.0;
  for (std::int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const std::int64_t i = bn_index(p, c, j);
    const float g = ld(dy, i);
    sum_dy += g;
    sum_dy_xhat += static_cast<double>(g) * ((ld(x, i) - mean) * invstd);
  }
  sum_dy = block_sum(sum_dy, shared);
  sum_dy_xhat = block_sum(sum_dy_xhat, shared);
  if (threadIdx.x == 0) {
    dbeta[c] = (accumulate ? dbeta[c] : 0.0f) + static_cast<float>(sum_dy);
    dgamma[c] = (accumulate ? dgamma[c] : 0.0f) + static_cast<float>(sum_dy_xhat);
  }
  if (dx == nullptr) return;
  const float mean_dy = static_cast<float>(sum_dy / static_cast<double>(count));
  const float mean_dy_xhat = static_cast<float>(sum_dy_xhat / static_cast<double>(count));
  const float scale = gamma[c] * invstd;
  // dx may be dy: every element is read before it is written, by the same thread.
  for (std::int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const std::int64_t i = bn_index(p, c, j);
    const float xhat = (ld(x, i) - mean) * invstd;
    st(dx, i, scale * (ld(dy, i) - mean_dy - xhat * mean_dy_xhat));
  }
}

// ---- softmax cross-entropy -------------------------------------------------------------------
// Per row: 0 wrong, 1 correct, 2 label out of range.
constexpr int kRowWrong = 0;
constexpr int kRowCorrect = 1;
constexpr int kRowBadLabel = 2;

// One warp per row: the stable log-sum-exp, the first arg-max, and dlogits.
template <class T>
__global__ void softmax_xent_rows_kernel(const T* logits, const std::int32_t* labels, std::int64_t rows,
                                         std::int64_t classes, T* dlogits, float* row_loss, int* row_flag) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rows) return;  // uniform per warp
  const int lane = threadIdx.x & 31;
  const T* z = logits + row * classes;
  float best = -INFINITY;
  std::int64_t best_at = classes;  // no candidate yet
  for (std::int64_t j = lane; j < classes; j += 32) {
    const float v = ld(z, j);
    if (best_at == classes || v > best) {  // ascending j per lane: the first maximum wins ties
      best = v;
      best_at = j;
    }
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, best, offset);
    const std::int64_t other_at = __shfl_xor_sync(0xffffffffu, best_at, offset);
    if (other_at != classes && (best_at == classes || other > best || (other == best && other_at < best_at))) {
      best = other;
      best_at = other_at;
    }
  }
  float sum = 0.0f;
  for (std::int64_t j = lane; j < classes; j += 32) sum += expf(ld(z, j) - best);
  sum = warp_sum(sum);
  sum = __shfl_sync(0xffffffffu, sum, 0);
  const std::int32_t label = labels[row];
  const bool valid = label >= 0 && label < classes;
  if (lane == 0) {
    row_loss[row] = valid ? (best + logf(sum)) - ld(z, label) : 0.0f;
    row_flag[row] = !valid ? kRowBadLabel : (best_at == label ? kRowCorrect : kRowWrong);
  }
  if (dlogits == nullptr) return;
  const float inv_rows = 1.0f / static_cast<float>(rows);
  T* d = dlogits + row * classes;
  for (std::int64_t j = lane; j < classes; j += 32) {
    const float softmax = expf(ld(z, j) - best) / sum;
    st(d, j, (softmax - (j == label ? 1.0f : 0.0f)) * inv_rows);
  }
}

// One block: sums the rows into the summary.
__global__ void softmax_xent_summary_kernel(const float* row_loss, const int* row_flag, const std::int32_t* labels,
                                            std::int64_t rows, LossSummary* summary) {
  __shared__ double shared_loss[32];
  __shared__ long long shared_count[32];
  __shared__ long long first_bad;
  if (threadIdx.x == 0) first_bad = LLONG_MAX;
  __syncthreads();
  double loss = 0.0;
  long long correct = 0;
  long long bad = LLONG_MAX;
  for (std::int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    loss += row_loss[r];
    correct += row_flag[r] == kRowCorrect ? 1 : 0;
    if (row_flag[r] == kRowBadLabel && r < bad) bad = r;
  }
  loss = block_sum(loss, shared_loss);
  correct = block_sum(correct, shared_count);
  if (bad != LLONG_MAX) atomicMin(&first_bad, bad);
  __syncthreads();
  if (threadIdx.x == 0) {
    summary->loss_sum = loss;
    summary->correct = correct;
    summary->bad_row = first_bad == LLONG_MAX ? -1 : first_bad;
    summary->bad_label = first_bad == LLONG_MAX ? 0 : labels[first_bad];
  }
}

// ---- optimizers ------------------------------------------------------------------------------
__global__ void sgd_kernel(SgdUpdate u, float* w, const float* g, float* buf, std::int64_t n) {
  SLUICE_GRID_LOOP(i, n) {
    float grad = g[i] + u.weight_decay * w[i];
    if (buf != nullptr) {
      const float b = u.first_step ? grad : u.momentum * buf[i] + grad;
      buf[i] = b;
      grad = u.nesterov ? grad + u.momentum * b : b;
    }
    w[i] -= u.learning_rate * grad;
  }
}

struct AdamWLaunch {
  float lr, beta1, beta2, epsilon, decay;  // decay = 1 - lr * weight_decay
  float step_size;                         // lr / (1 - beta1^t)
  float inv_sqrt_bias2;                    // 1 / sqrt(1 - beta2^t)
};

__global__ void adamw_kernel(AdamWLaunch a, float* w, const float* g, float* m, float* v, std::int64_t n) {
  SLUICE_GRID_LOOP(i, n) {
    const float grad = g[i];
    const float wi = w[i] * a.decay;
    const float mi = a.beta1 * m[i] + (1.0f - a.beta1) * grad;
    const float vi = a.beta2 * v[i] + (1.0f - a.beta2) * grad * grad;
    m[i] = mi;
    v[i] = vi;
    w[i] = wi - a.step_size * mi / (sqrtf(vi) * a.inv_sqrt_bias2 + a.epsilon);
  }
}

}  // namespace

void relu_forward(DType t, const void* x, void* y, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  with_float_type(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch("relu_forward", &relu_forward_kernel<T>, grid_for(n), stream, static_cast<const T*>(x), static_cast<T*>(y),
           n);
  });
}

void relu_backward(DType t, const void* y, const void* dy, void* dx, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  with_float_type(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch("relu_backward", &relu_backward_kernel<T>, grid_for(n), stream, static_cast<const T*>(y),
           static_cast<const T*>(dy), static_cast<T*>(dx), n);
  });
}

void dropout_apply(DType t, const DropoutMask& m, const void* in, void* out, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  DropoutLaunch p{};
  p.key = make_uint2(static_cast<unsigned>(m.key), static_cast<unsigned>(m.key >> 32));
  p.step_lo = static_cast<unsigned>(m.step);
  p.step_hi = static_cast<unsigned>(m.step >> 32);
  p.offset = static_cast<std::int64_t>(m.offset);
  p.rate = m.rate;
  p.scale = 1.0f / (1.0f - m.rate);
  with_float_type(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch("dropout", &dropout_kernel<T>, grid_for((n + 3) / 4), stream, p, static_cast<const T*>(in),
           static_cast<T*>(out), n);
  });
}

void scale(DType t, void* data, float alpha, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  with_float_type(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch("scale", &scale_kernel<T>, grid_for(n), stream, static_cast<T*>(data), alpha, n);
  });
}

void fill_bits(int element_size, std::uint32_t bits, void* dst, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  switch (element_size) {
    case 1:
      launch("fill", &fill_kernel<std::uint8_t>, grid_for(n), stream, static_cast<std::uint8_t>(bits),
             static_cast<std::uint8_t*>(dst), n);
      break;
    case 2:
      launch("fill", &fill_kernel<std::uint16_t>, grid_for(n), stream, static_cast<std::uint16_t>(bits),
             static_cast<std::uint16_t*>(dst), n);
      break;
    case 4:
      launch("fill", &fill_kernel<std::uint32_t>, grid_for(n), stream, bits, static_cast<std::uint32_t*>(dst), n);
      break;
    default:
      throw Error(ErrorCode::kInternal, "CUDA backend: fill of " + std::to_string(element_size) + "-byte elements");
  }
}

void cast(DType src_t, const void* src, DType dst_t, void* dst, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  with_float_type(src_t, [&](auto src_tag) {
    using S = typename decltype(src_tag)::type;
    with_float_type(dst_t, [&](auto dst_tag) {
      using D = typename decltype(dst_tag)::type;
      launch("cast", &cast_kernel<S, D>, grid_for(n), stream, static_cast<const S*>(src), static_cast<D*>(dst), n);
    });
  });
}

void batchnorm_training(DType t, const BatchNormLaunch& p, const void* x, const float* gamma, const float* beta,
                        float* running_mean, float* running_var, void* y, float* saved_mean, float* saved_invstd,
                        cudaStream_t stream) {
  // No channel, or no element per channel: no statistics to take (ops.cpp refuses such shapes).
  if (p.channels <= 0 || p.batch * p.spatial <= 0) return;
  with_float_type(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch("batchnorm_training", &batchnorm_training_kernel<T>, LaunchShape::per_block(p.channels, 512), stream, p,
           static_cast<const T*>(x), gamma, beta, running_mean, running_var, static_cast<T*>(y), saved_mean,
           saved_invstd);
  });
}

void batchnorm_inference(DType t, const BatchNormLaunch& p, const void* x, const float* gamma, const float* beta,
                         const float* running_mean, const float* running_var, void* y, cudaStream_t stream) {
  const std::int64_t n = p.batch * p.channels * p.spatial;
  if (n == 0) return;
  with_float_type(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch("batchnorm_inference", &batchnorm_inference_kernel<T>, grid_for(n), stream, p, static_cast<const T*>(x),
           gamma, beta, running_mean, running_var, static_cast<T*>(y));
  });
}

void batchnorm_backward(DType t, const BatchNormLaunch& p, const void* x, const float* gamma,
                        const float* saved_mean, const float* saved_invstd, const void* dy, void* dx,
                        float* dgamma, float* dbeta, bool accumulate, cudaStream_t stream) {
  if (p.channels <= 0 || p.batch * p.spatial <= 0) return;
  with_float_type(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch("batchnorm_backward", &batchnorm_backward_kernel<T>, LaunchShape::per_block(p.channels, 512), stream, p,
           static_cast<const T*>(x), gamma, saved_mean, saved_invstd, static_cast<const T*>(dy), static_cast<T*>(dx),
           dgamma, dbeta, accumulate);
  });
}

const LossSummary* softmax_cross_entropy(DType t, const void* logits, const std::int32_t* labels, std::int64_t rows,
                                         std::int64_t classes, void* dlogits, void* workspace, cudaStream_t stream) {
  if (rows <= 0 || classes <= 0) return nullptr;  // no rows: nothing to launch, nothing to sum
  auto* base = static_cast<unsigned char*>(workspace);
  const auto r = static_cast<std::size_t>(rows);
  auto* row_loss = reinterpret_cast<float*>(base);
  auto* row_flag = reinterpret_cast<int*>(base + align256(r * sizeof(float)));
  auto* summary = reinterpret_cast<LossSummary*>(base + align256(r * sizeof(float)) + align256(r * sizeof(int)));
  constexpr int kRowsPerBlock = kThreads / 32;  // a warp per row
  with_float_type(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch("softmax_cross_entropy", &softmax_xent_rows_kernel<T>, LaunchShape::grouped(rows, kRowsPerBlock, kThreads),
           stream,
           static_cast<const T*>(logits), labels, rows, classes, static_cast<T*>(dlogits), row_loss, row_flag);
  });
  launch("softmax_cross_entropy summary", &softmax_xent_summary_kernel, LaunchShape::per_block(1, 1024), stream,
         row_loss, row_flag, labels, rows, summary);
  return summary;
}

void sgd_update(const SgdUpdate& u, float* w, const float* g, float* momentum_buf, std::int64_t n,
                cudaStream_t stream) {
  if (n == 0) return;
  launch("sgd_update", &sgd_kernel, grid_for(n), stream, u, w, g, momentum_buf, n);
}

void adamw_update(const AdamWUpdate& u, float* w, const float* g, float* m, float* v, std::int64_t n,
                  cudaStream_t stream) {
  if (n == 0) return;
  const double t = static_cast<double>(u.step);
  AdamWLaunch a{};
  a.lr = u.learning_rate;
  a.beta1 = u.beta1;
  a.beta2 = u.beta2;
  a.epsilon = u.epsilon;
  a.decay = 1.0f - u.learning_rate * u.weight_decay;
  a.step_size = static_cast<float>(u.learning_rate / (1.0 - std::pow(static_cast<double>(u.beta1), t)));
  a.inv_sqrt_bias2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(static_cast<double>(u.beta2), t)));
  launch("adamw_update", &adamw_kernel, grid_for(n), stream, a, w, g, m, v, n);
}

}  // namespace sluice::train::cuda_detail
