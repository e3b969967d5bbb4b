// CpuBackend: the training core's CPU reference backend (src/train/tensor/backend.hpp has the contract).
// Its methods are split by op family over cpu_*.cpp; this header holds the class and the pieces
// they share:
//
//  - Compute is f32. A 16-bit (f16, bf16) convolution or dense call widens each 16-bit tensor it
//    reads into the workspace, runs the f32 code, and rounds its outputs back: 16-bit on the CPU
//    is there so mixed-precision code runs and is tested everywhere, not for speed, and one f32
//    GEMM path per op keeps the reference small enough to trust. Weights, biases and their
//    gradients are staged whole (Staging below); a convolution's batch operands (x, y, dy, dx)
//    one image or plane at a time in each worker's buffer (image_in/image_out), so its workspace
//    stays near the f32 one instead of holding an f32 copy of the batch (dense still stages
//    whole: its operands are small). The
//    element-wise and per-plane ops (ReLU, pooling, BatchNorm, dropout, the loss) load and store
//    16-bit values directly, widening in registers, and take no workspace. Either way a 16-bit
//    result is the f32 result on the same values rounded once (ops_contract_test checks it).
//  - No op allocates: every piece of scratch (staged tensors, im2col columns, per-group partial
//    gradients) is carved from Context::workspace, and the *_workspace() methods return exactly
//    what the op will ask for, so a planner can reserve it up front.
//  - Determinism across thread counts: batch dimensions are cut into a fixed number of groups
//    (kReduceGroups, independent of the thread count); a parameter gradient is summed within a
//    group in image order and across groups in group order, and threads only decide which worker
//    runs which groups. Per-channel reductions (biases, BatchNorm) run one channel per task in a
//    fixed order. So 1 thread and 16 give bit-identical results.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>

#include "train/tensor/backend.hpp"
#include "train/cpu/cpu_util.hpp"

namespace sluice::train::cpu {

// Batch-wise reductions are split into at most this many groups, whatever the thread count: more
// than a CPU training job has cores (so all can work), few enough that the per-group partial
// gradients stay small next to the activations.
constexpr int kReduceGroups = 16;

// Elements per task below which an element-wise op does not split further (the cost of waking a
// worker is about that of 16k simple element operations).
constexpr std::int64_t kElementGrain = 16384;

// Groups a batch of n items is cut into; group g covers [n * g / G, n * (g + 1) / G).
constexpr int reduce_groups(std::int64_t n) {
  return static_cast<int>(n < kReduceGroups ? n : kReduceGroups);
}

// Floats the staging of a call takes for its 16-bit tensors of these element counts (0 for f32).
template <class... Counts>
std::size_t staged_floats(DType dtype, Counts... counts) {
  if (dtype == DType::kF32) return 0;
  return (std::size_t{0} + ... + aligned_floats(static_cast<std::size_t>(counts)));
}

// Widens a call's 16-bit tensors into the workspace and rounds its outputs back. For f32 tensors
// it hands out their own memory and does nothing else.
class Staging {
 public:
  Staging(WorkerPool& pool, Scratch& scratch) : pool_(pool), scratch_(scratch) {}
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  // An input as f32 (null for a null tensor).
  const float* in(const Tensor& t);
  const float* in(const Tensor* t) { return t == nullptr ? nullptr : in(*t); }
  // An output as f32; with `load`, its current values are widened first (GradMode::kAccumulate).
  // finish() rounds it back into the tensor.
  float* out(Tensor& t, bool load = false);
  float* out(Tensor* t, bool load = false) { return t == nullptr ? nullptr : out(*t, load); }
  void finish();

 private:
  WorkerPool& pool_;
  Scratch& scratch_;
  std::array<std::pair<Tensor*, float*>, 8> outs_{};
  int out_count_ = 0;
};

// Per-image staging of a batch operand (x, y, dy, dx of a convolution): one image, or one plane,
// at a time in a worker's own buffer, so a 16-bit call's workspace holds a few images' f32 copies
// per worker rather than the whole batch's. Widening and rounding are exact per element, so the
// results are those of staging the whole tensor. For f32 tensors the tensor's own memory is used.
// Elements [offset, offset + n) of t as f32: t's memory, or widened into buf.
inline const float* image_in(const Tensor& t, std::int64_t offset, std::int64_t n, float* buf) {
  if (t.dtype() == DType::kF32) return t.data_as<float>() + offset;
  to_f32(t.dtype(), t.data(), offset, n, buf);
  return buf;
}
// Where to compute elements [offset, offset + n) of t: t's memory, or buf until image_done().
inline float* image_out(Tensor& t, std::int64_t offset, float* buf) {
  return t.dtype() == DType::kF32 ? t.data_as<float>() + offset : buf;
}
// Rounds what image_out() handed out back into t (nothing for f32).
inline void image_done(Tensor& t, std::int64_t offset, std::int64_t n, const float* f) {
  if (t.dtype() != DType::kF32) from_f32(t.dtype(), f, n, t.data(), offset);
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads);

  std::string describe() const override;
  void synchronize() override {}

  std::size_t conv2d_workspace(const Conv2dShape& s, DType dtype) const override;
  void conv2d_forward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor& w,
                      const Tensor* bias, Tensor& y) override;
  void conv2d_backward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor& w,
                       const Tensor& dy, Tensor* dx, Tensor& dw, Tensor* dbias, GradMode mode) override;

  std::size_t depthwise_conv2d_workspace(const Conv2dShape& s, DType dtype) const override;
  void depthwise_conv2d_forward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor& w,
                                const Tensor* bias, Tensor& y) override;
  void depthwise_conv2d_backward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor& w,
                                 const Tensor& dy, Tensor* dx, Tensor& dw, Tensor* dbias,
                                 GradMode mode) override;

  std::size_t separable_conv2d_workspace(const SeparableShape& s, DType dtype) const override;
  void separable_conv2d_forward(Context& ctx, const SeparableShape& s, const Tensor& x, const Tensor& wd,
                                const Tensor& wp, const Tensor* bias, Tensor& y) override;
  void separable_conv2d_backward(Context& ctx, const SeparableShape& s, const Tensor& x, const Tensor& wd,
                                 const Tensor& wp, const Tensor& dy, Tensor* dx, Tensor& dwd, Tensor& dwp,
                                 Tensor* dbias, GradMode mode) override;

  std::size_t dense_workspace(const DenseShape& s, DType dtype) const override;
  void dense_forward(Context& ctx, const DenseShape& s, const Tensor& x, const Tensor& w, const Tensor* bias,
                     Tensor& y) override;
  void dense_backward(Context& ctx, const DenseShape& s, const Tensor& x, const Tensor& w, const Tensor& dy,
                      Tensor* dx, Tensor& dw, Tensor* dbias, GradMode mode) override;

  void relu_forward(Context& ctx, const Tensor& x, Tensor& y) override;
  void relu_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx) override;
  void maxpool2d_forward(Context& ctx, const Pool2dShape& s, const Tensor& x, Tensor& y) override;
  void maxpool2d_backward(Context& ctx, const Pool2dShape& s, const Tensor& x, const Tensor& dy,
                          Tensor& dx) override;
  void global_avg_pool_forward(Context& ctx, const Tensor& x, Tensor& y) override;
  void global_avg_pool_backward(Context& ctx, const Tensor& dy, Tensor& dx) override;

  void batchnorm_forward_training(Context& ctx, const BatchNormShape& s, const BatchNormParams& p,
                                  const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  Tensor& running_mean, Tensor& running_var, Tensor& y, Tensor& saved_mean,
                                  Tensor& saved_invstd) override;
  void batchnorm_forward_inference(Context& ctx, const BatchNormShape& s, const BatchNormParams& p,
                                   const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                   const Tensor& running_mean, const Tensor& running_var, Tensor& y) override;
  void batchnorm_backward(Context& ctx, const BatchNormShape& s, const Tensor& x, const Tensor& gamma,
                          const Tensor& saved_mean, const Tensor& saved_invstd, const Tensor& dy, Tensor* dx,
                          Tensor& dgamma, Tensor& dbeta, GradMode mode) override;

  void dropout_forward(Context& ctx, const DropoutMask& m, const Tensor& x, Tensor& y) override;
  void dropout_backward(Context& ctx, const DropoutMask& m, const Tensor& dy, Tensor& dx) override;
  void scale(Context& ctx, Tensor& t, float alpha) override;

  LossResult softmax_cross_entropy(Context& ctx, const Tensor& logits, const Tensor& labels,
                                   Tensor* dlogits) override;

  void sgd_update(Context& ctx, const SgdUpdate& u, Tensor& w, const Tensor& g, Tensor* momentum_buf) override;
  void adamw_update(Context& ctx, const AdamWUpdate& u, Tensor& w, const Tensor& g, Tensor& m,
                    Tensor& v) override;

  void scale_cast(Context& ctx, const Tensor& src, float scale, Tensor& dst) override;
  void find_nonfinite(Context& ctx, const Tensor& t, Tensor& flag) override;
  void fill(Context& ctx, Tensor& t, float value) override;
  void cast(Context& ctx, const Tensor& src, Tensor& dst) override;
  void copy_to_host(Context& ctx, const Tensor& src, void* dst) override;
  void copy_from_host(Context& ctx, const void* src, Tensor& dst) override;

 private:
  // Workers a loop over n items uses (at least 1).
  int workers(std::int64_t n) const;
  // The workspace of exactly `bytes` (Context::workspace), as a Scratch to carve.
  static Scratch scratch(Context& ctx, std::size_t bytes) { return Scratch(ctx.workspace(bytes)); }
  // Element-wise map over a staged op: fn(begin, end) on [0, n) in parallel.
  template <class F>
  void elementwise(std::int64_t n, F&& fn) {
    pool_.for_each(n, kElementGrain, fn);
  }
  // The sum of kReduceGroups partials (`groups` of `n` floats each, group stride `stride`) in
  // group order into out (added to it with `accumulate`), parallel over elements.
  void reduce_partials(const float* partials, int groups, std::size_t stride, std::int64_t n, float* out,
                       bool accumulate);
  // sums[k] (+)= the sum over images and positions of channel k of dy (N, K, P); one channel a
  // task, images in order. A 16-bit dy is widened a row at a time into `rows`, one row of
  // sum_rows_floats() per worker (channel_sums_floats() in all; unused for f32).
  void channel_sums(const Tensor& dy, std::int64_t batch, int channels, std::int64_t plane, float* rows,
                    float* sums, bool accumulate);
  std::size_t channel_sums_floats(DType dtype, int channels, std::int64_t plane) const {
    return static_cast<std::size_t>(workers(channels)) * staged_floats(dtype, plane);
  }

  WorkerPool pool_;
  const char* blas_;
};

}  // namespace sluice::train::cpu
