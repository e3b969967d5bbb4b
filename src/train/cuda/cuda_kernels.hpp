// The CUDA backend's kernels as host-callable launch functions (conv_kernels.cu,
// elementwise_kernels.cu, precision_kernels.cu). Each launches on `stream` and throws
// sluice::Error when the launch fails; none synchronises. Activations are of `t` (f32, f16 or
// bf16) and computed in f32; the shapes are those of sluice/train/ops.hpp. Private to
// src/train/cuda.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "sluice/core/dtype.hpp"
#include "sluice/train/ops.hpp"
#include "train/cuda/cuda_workspace.hpp"

namespace sluice::train::cuda_detail {

// ---- convolution pieces (conv_kernels.cu) ----------------------------------------------------
// x (images, C, H, W) of t -> col (images, C * kh * kw, OH * OW) of t, zero in the padding.
void im2col(DType t, const void* x, std::int64_t images, const Conv2dShape& s, void* col, cudaStream_t stream);
// The adjoint, gathering: dx (images, C, H, W) of t = the sum of col (f32) over the taps that
// read each pixel (overwritten).
void col2im(const float* col, std::int64_t images, const Conv2dShape& s, DType t, void* dx, cudaStream_t stream);

// y (images, C, OH, OW) of t = depthwise convolution of x with w (C, 1, kh, kw) [+ bias (C)].
void depthwise_forward(DType t, const void* x, const void* w, const void* bias, std::int64_t images,
                       const Conv2dShape& s, void* y, cudaStream_t stream);
// dx (images, C, H, W) of t = the transposed depthwise convolution of dy with w. dy is of t, or
// f32 when dy_f32 (the separable convolution's depthwise gradient in workspace).
void depthwise_backward_input(DType t, const void* dy, bool dy_f32, const void* w, std::int64_t images,
                              const Conv2dShape& s, void* dx, cudaStream_t stream);
// acc (C, kh, kw) f32 += correlation of x with dy over `images` images (dy as above).
void depthwise_backward_weight(DType t, const void* x, const void* dy, bool dy_f32, std::int64_t images,
                               const Conv2dShape& s, float* acc, cudaStream_t stream);

// y (n, C, S) of t: every element of channel c = bias[c] (bias of t): the bias a GEMM then adds
// to with beta = 1.
void broadcast_bias(DType t, const void* bias, std::int64_t n, std::int64_t channels, std::int64_t spatial,
                    void* y, cudaStream_t stream);
// out (C) of t = [out +] the sum of a (n, C, S) of t over n and S, per channel.
void channel_sum(DType t, const void* a, std::int64_t n, std::int64_t channels, std::int64_t spatial,
                 void* out, bool accumulate, cudaStream_t stream);
// acc (count) f32 = [acc +] the sum of `parts` partials (parts, count) f32, in order: per-image
// weight gradients from one batched GEMM folded into the running sum (overwrite when `first`).
void sum_partials(const float* partials, std::int64_t parts, std::int64_t count, float* acc, bool first,
                  cudaStream_t stream);
// dst (count) of t = [dst +] src (f32): a gradient accumulated in f32 workspace, finished.
void finish_gradient(const float* src, std::int64_t count, DType t, void* dst, bool accumulate,
                     cudaStream_t stream);

// ---- pooling (conv_kernels.cu) ---------------------------------------------------------------
void maxpool_forward(DType t, const void* x, const Pool2dShape& s, void* y, cudaStream_t stream);
void maxpool_backward(DType t, const void* x, const void* dy, const Pool2dShape& s, void* dx, cudaStream_t stream);
// x (rows, plane) -> y (rows): the mean of each row; backward spreads dy / plane.
void global_avg_pool_forward(DType t, const void* x, std::int64_t rows, std::int64_t plane, void* y,
                             cudaStream_t stream);
void global_avg_pool_backward(DType t, const void* dy, std::int64_t rows, std::int64_t plane, void* dx,
                              cudaStream_t stream);

// ---- element-wise, normalisation, loss, optimizers (elementwise_kernels.cu) ------------------
void relu_forward(DType t, const void* x, void* y, std::int64_t n, cudaStream_t stream);
void relu_backward(DType t, const void* y, const void* dy, void* dx, std::int64_t n, cudaStream_t stream);
// out = in * keep(i) / (1 - rate): element i kept unless its Philox draw on (key, step, i) is
// below the rate (elementwise_kernels.cu says exactly how, the CPU backend draws the same).
void dropout_apply(DType t, const DropoutMask& m, const void* in, void* out, std::int64_t n, cudaStream_t stream);
// data *= alpha, in place.
void scale(DType t, void* data, float alpha, std::int64_t n, cudaStream_t stream);

// Every element of dst (n elements of element_size 1, 2 or 4 bytes) = the low element_size bytes
// of `bits` (the value already converted on the host, as the CPU converts it).
void fill_bits(int element_size, std::uint32_t bits, void* dst, std::int64_t n, cudaStream_t stream);
// dst = src converted between floating dtypes (different ones; equal dtypes are a memcpy).
void cast(DType src_t, const void* src, DType dst_t, void* dst, std::int64_t n, cudaStream_t stream);

// ---- mixed precision (precision_kernels.cu) -------------------------------------------------
// dst (of dst_t) = src (of src_t) * scale, computed in f32, rounded once; src may be dst when the
// types are equal.
void scale_cast(DType src_t, const void* src, float scale, DType dst_t, void* dst, std::int64_t n,
                cudaStream_t stream);
// *flag (f32, device) = 1 when an element of data (n of t) is an infinity or a NaN; else left.
void find_nonfinite(DType t, const void* data, std::int64_t n, float* flag, cudaStream_t stream);

struct BatchNormLaunch {
  std::int64_t batch = 0;
  int channels = 0;
  std::int64_t spatial = 1;
  float epsilon = 1e-5f;
  float momentum = 0.1f;
  bool update_running_stats = true;
};
void batchnorm_training(DType t, const BatchNormLaunch& p, const void* x, const float* gamma, const float* beta,
                        float* running_mean, float* running_var, void* y, float* saved_mean,
                        float* saved_invstd, cudaStream_t stream);
void batchnorm_inference(DType t, const BatchNormLaunch& p, const void* x, const float* gamma, const float* beta,
                         const float* running_mean, const float* running_var, void* y, cudaStream_t stream);
// dx may be null, or equal to dy (in place).
void batchnorm_backward(DType t, const BatchNormLaunch& p, const void* x, const float* gamma,
                        const float* saved_mean, const float* saved_invstd, const void* dy, void* dx,
                        float* dgamma, float* dbeta, bool accumulate, cudaStream_t stream);

// What softmax_cross_entropy leaves on the device for the host to read.
struct LossSummary {
  double loss_sum = 0.0;       // over the rows with a valid label
  long long correct = 0;
  long long bad_row = -1;      // the first row whose label is out of [0, K), or -1
  int bad_label = 0;
};
static_assert(sizeof(LossSummary) <= kLossSummaryBytes, "cuda_workspace.hpp sizes the loss's workspace");
// logits (rows, classes) of t, labels i32 (rows); dlogits (of t) may be null. Returns where in
// `workspace` (softmax_cross_entropy_workspace(rows) bytes, cuda_workspace.hpp) the summary lies
// (device memory), ready once the stream reaches it; nullptr, launching nothing, for no rows.
const LossSummary* softmax_cross_entropy(DType t, const void* logits, const std::int32_t* labels,
                                         std::int64_t rows, std::int64_t classes, void* dlogits,
                                         void* workspace, cudaStream_t stream);

// torch.optim.SGD / AdamW on f32 tensors of n elements (ops.hpp); momentum_buf may be null.
void sgd_update(const SgdUpdate& u, float* w, const float* g, float* momentum_buf, std::int64_t n,
                cudaStream_t stream);
void adamw_update(const AdamWUpdate& u, float* w, const float* g, float* m, float* v, std::int64_t n,
                  cudaStream_t stream);

}  // namespace sluice::train::cuda_detail
