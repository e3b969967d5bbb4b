// The training core's ops, forward and backward: the one interface every backend implements.
// Each op checks its arguments here (shapes against its shape struct, dtypes, devices) and then
// runs on the Context's backend: the CPU reference (src/train/cpu) or CUDA (src/train/cuda), the
// same signature for both, chosen by the context's device. Every tensor must be on that device.
//
// The DALI contract: a shape struct (Conv2dShape::make, ...) is the setup step, it derives the
// output shape and validates the geometry; `*_workspace` says how much scratch the op will take
// from Context::workspace, so a planner can reserve it (ops without a `*_workspace` take none);
// the op then fills outputs the caller allocated. No op allocates tensors.
//
// Types: the activations of one call (x, y, dx, dy) and its weights and their gradients share one
// floating dtype, f32, f16 or bf16 (16-bit values are widened to f32 on load and rounded back on
// store: the CPU backend computes in f32). BatchNorm's gamma, beta and statistics are f32 always
// (as cuDNN's), labels are i32. Outputs may not alias inputs unless the op says so.
//
// Parameter gradients (dw, dbias, dgamma, ...) are overwritten or, with GradMode::kAccumulate,
// added to (gradient accumulation). Input gradients (dx) are always overwritten and are skipped
// when the pointer is null (the first layer needs none).
#pragma once

#include <cstddef>
#include <cstdint>

#include "sluice/core/dtype.hpp"
#include "sluice/core/shape.hpp"
#include "sluice/train/context.hpp"
#include "sluice/train/tensor.hpp"

namespace sluice::train {

enum class GradMode : std::uint8_t { kOverwrite, kAccumulate };

// A 2-D window: convolution kernel or pooling window, its stride and zero padding.
struct Window2d {
  int kernel_h = 3;
  int kernel_w = 3;
  int stride_h = 1;
  int stride_w = 1;
  int pad_h = 0;
  int pad_w = 0;

  static Window2d square(int kernel, int stride = 1, int pad = 0) {
    return {kernel, kernel, stride, stride, pad, pad};
  }
  friend bool operator==(const Window2d&, const Window2d&) = default;
};

// The geometry of a Conv2D or DepthwiseConv2D over an NCHW batch.
struct Conv2dShape {
  std::int64_t batch = 0;  // N
  int in_channels = 0;     // C
  int in_h = 0;            // H
  int in_w = 0;            // W
  int out_channels = 0;    // K (== C for a depthwise convolution)
  Window2d window;
  int out_h = 0;           // (H + 2 pad_h - kernel_h) / stride_h + 1
  int out_w = 0;

  // From an input of shape (N, C, H, W). Throws sluice::Error(kInvalidArgument) naming what is
  // wrong (rank, non-positive sizes, a window larger than the padded input, ...).
  static Conv2dShape make(const Shape& input, int out_channels, const Window2d& window);
  static Conv2dShape make_depthwise(const Shape& input, const Window2d& window);

  Shape input() const { return {batch, in_channels, in_h, in_w}; }
  Shape output() const { return {batch, out_channels, out_h, out_w}; }
  Shape weight() const { return {out_channels, in_channels, window.kernel_h, window.kernel_w}; }
  Shape depthwise_weight() const { return {in_channels, 1, window.kernel_h, window.kernel_w}; }
  std::int64_t in_plane() const { return std::int64_t{in_h} * in_w; }
  std::int64_t out_plane() const { return std::int64_t{out_h} * out_w; }
};

// SeparableConv2D: a depthwise convolution (C channels, `depthwise.window`) followed by a 1x1
// pointwise convolution to `out_channels`, fused per image: the depthwise result of one image
// lives only in workspace and is recomputed in backward, never stored for the batch.
struct SeparableShape {
  Conv2dShape depthwise;  // out_channels == in_channels
  int out_channels = 0;

  static SeparableShape make(const Shape& input, int out_channels, const Window2d& window);
  Shape input() const { return depthwise.input(); }
  Shape output() const { return {depthwise.batch, out_channels, depthwise.out_h, depthwise.out_w}; }
  Shape depthwise_weight() const { return depthwise.depthwise_weight(); }
  Shape pointwise_weight() const { return {out_channels, depthwise.in_channels, 1, 1}; }
};

// A fully connected layer: x (N, in) -> y (N, out), weight (out, in) as torch.nn.Linear.
struct DenseShape {
  std::int64_t batch = 0;
  std::int64_t in_features = 0;
  std::int64_t out_features = 0;

  static DenseShape make(const Shape& input, std::int64_t out_features);
  Shape input() const { return {batch, in_features}; }
  Shape output() const { return {batch, out_features}; }
  Shape weight() const { return {out_features, in_features}; }
};

// Max pooling over an NCHW batch (padding counts as -infinity).
struct Pool2dShape {
  std::int64_t batch = 0;
  int channels = 0;
  int in_h = 0;
  int in_w = 0;
  Window2d window;
  int out_h = 0;
  int out_w = 0;

  static Pool2dShape make(const Shape& input, const Window2d& window);
  Shape input() const { return {batch, channels, in_h, in_w}; }
  Shape output() const { return {batch, channels, out_h, out_w}; }
};

// BatchNorm over (N, C, H, W) or (N, C): statistics per channel over N x spatial.
struct BatchNormShape {
  std::int64_t batch = 0;
  int channels = 0;
  std::int64_t spatial = 1;  // H * W, 1 for (N, C)

  static BatchNormShape make(const Shape& input);
  std::int64_t count() const { return batch * spatial; }  // values per channel
  Shape channel_shape() const { return {channels}; }
};

struct BatchNormParams {
  float epsilon = 1e-5f;
  // running = (1 - momentum) * running + momentum * batch statistic (PyTorch's convention; the
  // running variance takes the unbiased batch variance).
  float momentum = 0.1f;
  // False when a forward is recomputed (gradient checkpointing): the statistics were already
  // folded into the running averages once.
  bool update_running_stats = true;
};

// Which elements an inverted dropout zeroes: element i of the tensor is dropped when the Philox
// draw keyed on (key, step, i) falls below `rate`; kept ones are scaled by 1 / (1 - rate). A pure
// function of (key, step, i), so a recomputation (checkpointing) or the backward pass reproduce
// the mask without storing it. Exactly, so every backend draws the same mask: the block
// philox4x32(key {key low, key high}, counter {q low, q high, step low, step high}) for q = i / 4,
// its word i % 4 shifted right by 8 as u = word * 2^-24; element i is dropped when u < rate.
struct DropoutMask {
  float rate = 0.5f;        // in [0, 1)
  std::uint64_t key = 0;    // the layer's stream (derive_key(seed, layer))
  std::uint64_t step = 0;   // the training step
  // Element i of the tensor takes the draw of element offset + i: a micro-batch that starts at
  // sample j of its step's batch passes j times the elements of a sample, so gradient
  // accumulation draws the full batch's mask, micro-batch by micro-batch.
  std::uint64_t offset = 0;
};

struct LossResult {
  double loss = 0.0;          // mean over the batch
  std::int64_t correct = 0;   // rows whose arg-max logit is the label
};

struct SgdUpdate {
  float learning_rate = 0.1f;
  float momentum = 0.0f;
  bool nesterov = false;
  float weight_decay = 0.0f;  // L2, added to the gradient (torch.optim.SGD)
  bool first_step = false;    // the momentum buffer is initialised to the gradient, as PyTorch
};

struct AdamWUpdate {
  float learning_rate = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
  float weight_decay = 0.01f;  // decoupled: w -= lr * weight_decay * w (torch.optim.AdamW)
  std::int64_t step = 1;       // 1 for the first update (bias correction)
};

namespace ops {

// ---- convolutions --------------------------------------------------------------------------
// x (N, C, H, W), w (K, C, kh, kw), bias (K) or null, y (N, K, OH, OW).
std::size_t conv2d_workspace(const Context& ctx, const Conv2dShape& s, DType dtype);
void conv2d_forward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor& w,
                    const Tensor* bias, Tensor& y);
void conv2d_backward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor& w,
                     const Tensor& dy, Tensor* dx, Tensor& dw, Tensor* dbias,
                     GradMode mode = GradMode::kOverwrite);

// x (N, C, H, W), w (C, 1, kh, kw), bias (C) or null, y (N, C, OH, OW).
std::size_t depthwise_conv2d_workspace(const Context& ctx, const Conv2dShape& s, DType dtype);
void depthwise_conv2d_forward(Context& ctx, const Conv2dShape& s, const Tensor& x,
                              const Tensor& w, const Tensor* bias, Tensor& y);
void depthwise_conv2d_backward(Context& ctx, const Conv2dShape& s, const Tensor& x,
                               const Tensor& w, const Tensor& dy, Tensor* dx, Tensor& dw,
                               Tensor* dbias, GradMode mode = GradMode::kOverwrite);

// x (N, C, H, W), wd (C, 1, kh, kw), wp (K, C, 1, 1), bias (K) or null, y (N, K, OH, OW).
std::size_t separable_conv2d_workspace(const Context& ctx, const SeparableShape& s, DType dtype);
void separable_conv2d_forward(Context& ctx, const SeparableShape& s, const Tensor& x,
                              const Tensor& wd, const Tensor& wp, const Tensor* bias, Tensor& y);
void separable_conv2d_backward(Context& ctx, const SeparableShape& s, const Tensor& x,
                               const Tensor& wd, const Tensor& wp, const Tensor& dy, Tensor* dx,
                               Tensor& dwd, Tensor& dwp, Tensor* dbias,
                               GradMode mode = GradMode::kOverwrite);

// ---- dense ---------------------------------------------------------------------------------
// x (N, I), w (O, I), bias (O) or null, y (N, O): y = x w^T + bias.
std::size_t dense_workspace(const Context& ctx, const DenseShape& s, DType dtype);
void dense_forward(Context& ctx, const DenseShape& s, const Tensor& x, const Tensor& w,
                   const Tensor* bias, Tensor& y);
void dense_backward(Context& ctx, const DenseShape& s, const Tensor& x, const Tensor& w,
                    const Tensor& dy, Tensor* dx, Tensor& dw, Tensor* dbias,
                    GradMode mode = GradMode::kOverwrite);

// ---- activations and pooling ---------------------------------------------------------------
// y = max(x, 0); y may be x (in place). Backward from the output: dx = dy where y > 0; dx may
// be dy.
void relu_forward(Context& ctx, const Tensor& x, Tensor& y);
void relu_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx);

// The gradient goes to the first maximum of each window, found again from x (no index tensor
// is stored).
void maxpool2d_forward(Context& ctx, const Pool2dShape& s, const Tensor& x, Tensor& y);
void maxpool2d_backward(Context& ctx, const Pool2dShape& s, const Tensor& x, const Tensor& dy,
                        Tensor& dx);

// x (N, C, H, W) -> y (N, C), the mean of each plane.
void global_avg_pool_forward(Context& ctx, const Tensor& x, Tensor& y);
void global_avg_pool_backward(Context& ctx, const Tensor& dy, Tensor& dx);

// ---- batch normalisation -------------------------------------------------------------------
// Training: normalises with the batch's mean and (biased) variance, folds them into the running
// averages, and keeps mean and 1 / sqrt(var + eps) for backward. gamma, beta, running_*,
// saved_* are f32 (C).
void batchnorm_forward_training(Context& ctx, const BatchNormShape& s, const BatchNormParams& p,
                                const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                Tensor& running_mean, Tensor& running_var, Tensor& y,
                                Tensor& saved_mean, Tensor& saved_invstd);
// Inference: normalises with the running statistics.
void batchnorm_forward_inference(Context& ctx, const BatchNormShape& s, const BatchNormParams& p,
                                 const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                 const Tensor& running_mean, const Tensor& running_var, Tensor& y);
void batchnorm_backward(Context& ctx, const BatchNormShape& s, const Tensor& x,
                        const Tensor& gamma, const Tensor& saved_mean, const Tensor& saved_invstd,
                        const Tensor& dy, Tensor* dx, Tensor& dgamma, Tensor& dbeta,
                        GradMode mode = GradMode::kOverwrite);

// ---- dropout -------------------------------------------------------------------------------
// y = x * keep / (1 - rate); backward dx = dy * keep / (1 - rate), the same mask.
void dropout_forward(Context& ctx, const DropoutMask& m, const Tensor& x, Tensor& y);
void dropout_backward(Context& ctx, const DropoutMask& m, const Tensor& dy, Tensor& dx);

// ---- scaling -------------------------------------------------------------------------------
// t *= alpha, in place (f32, f16 or bf16; 16-bit values are widened, scaled and rounded back).
// Gradient accumulation scales each micro-batch's loss gradient by 1 / K with it.
void scale(Context& ctx, Tensor& t, float alpha);

// ---- loss ----------------------------------------------------------------------------------
// Softmax cross-entropy, fused and stable (log-sum-exp with the row maximum subtracted): logits
// (N, K), labels i32 (N) in [0, K). Returns the mean loss and the count of correct arg-maxes;
// writes dlogits = (softmax - onehot) / N when dlogits is not null. A label out of range throws
// sluice::Error(kInvalidArgument).
LossResult softmax_cross_entropy(Context& ctx, const Tensor& logits, const Tensor& labels,
                                 Tensor* dlogits);

// ---- optimizer updates (element-wise, f32 parameters) --------------------------------------
// SGD (torch.optim.SGD): g += wd * w; buf = momentum * buf + g (buf = g on the first step);
// g = nesterov ? g + momentum * buf : buf; w -= lr * g. momentum_buf may be null when
// momentum is 0.
void sgd_update(Context& ctx, const SgdUpdate& u, Tensor& w, const Tensor& g, Tensor* momentum_buf);
// AdamW (torch.optim.AdamW): w *= 1 - lr * wd; m, v moments; bias-corrected step.
void adamw_update(Context& ctx, const AdamWUpdate& u, Tensor& w, const Tensor& g, Tensor& m, Tensor& v);

// ---- mixed precision -----------------------------------------------------------------------
// dst = src * scale, converted to dst's dtype (f32, f16 or bf16 each way; same shape): computed in
// f32 and rounded once, overflow to infinity as IEEE says. dst may be src when their dtypes are
// equal (in place). For loss scaling: the f32 gradient of the loss scaled into 16-bit, 16-bit
// gradients unscaled into f32 master gradients (sluice/train/precision.hpp).
void scale_cast(Context& ctx, const Tensor& src, float scale, Tensor& dst);
// Sets flag (f32, one element, on this device) to 1 when an element of t (f32, f16 or bf16) is an
// infinity or a NaN, and leaves it as it was otherwise: one flag collects many tensors and is read
// once (copy_to_host), the only synchronisation of a mixed-precision step's check.
void find_nonfinite(Context& ctx, const Tensor& t, Tensor& flag);

// ---- memory --------------------------------------------------------------------------------
// Every element set to `value` (converted to the tensor's dtype; integers truncate).
void fill(Context& ctx, Tensor& t, float value);
// dst = src converted (f32 <-> f16 <-> bf16, or a plain copy for equal dtypes); same shape.
void cast(Context& ctx, const Tensor& src, Tensor& dst);
// Between this device and host memory of t.bytes() bytes.
void copy_to_host(Context& ctx, const Tensor& src, void* dst);
void copy_from_host(Context& ctx, const void* src, Tensor& dst);
// The same, queued on the device's stream without waiting (asynchronous for pinned host memory
// on CUDA; a plain copy on the CPU). The host memory must neither be read (copy_to_host_async)
// nor changed or freed (both) before ctx.synchronize(); ops queued after them see their result.
void copy_to_host_async(Context& ctx, const Tensor& src, void* dst);
void copy_from_host_async(Context& ctx, const void* src, Tensor& dst);

}  // namespace ops
}  // namespace sluice::train
