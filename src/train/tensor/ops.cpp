// The ops' shape structs and argument checks, then dispatch to the Context's backend. Every
// check lives here, once, so the CPU and CUDA backends reject the same calls with the same
// messages ("conv2d_forward: w is f32 (64, 3, 3, 3) on host, weights; expected f32
// (64, 32, 3, 3) on host").
#include "sluice/train/ops.hpp"

#include <string>

#include "sluice/core/error.hpp"
#include "train/tensor/backend.hpp"

namespace sluice::train {
namespace {

[[noreturn]] void fail(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

std::string expected(const Shape& shape, DType dtype, DeviceId device) {
  return std::string(to_string(dtype)) + " " + shape.to_string() + " on " + to_string(device);
}

void check(const Context& ctx, const char* op, const char* name, const Tensor& t, const Shape& shape,
           DType dtype) {
  if (!t.defined() || t.shape() != shape || t.dtype() != dtype || t.device() != ctx.device() ||
      (t.data() == nullptr && t.elements() > 0)) {
    fail(std::string(op) + ": " + name + " is " + t.describe() + "; expected " +
         expected(shape, dtype, ctx.device()));
  }
}

void check_optional(const Context& ctx, const char* op, const char* name, const Tensor* t,
                    const Shape& shape, DType dtype) {
  if (t != nullptr) check(ctx, op, name, *t, shape, dtype);
}

// The activation dtype of a call: x's, which must be floating.
DType activation_dtype(const char* op, const Tensor& x) {
  if (!x.defined()) fail(std::string(op) + ": x is an undefined tensor");
  if (!is_floating(x.dtype())) {
    fail(std::string(op) + ": x is " + x.describe() + "; expected f32, f16 or bf16");
  }
  return x.dtype();
}

bool overlap(const Tensor& a, const Tensor& b) {
  const auto* a0 = static_cast<const std::byte*>(a.data());
  const auto* b0 = static_cast<const std::byte*>(b.data());
  return a.bytes() > 0 && b.bytes() > 0 && a0 < b0 + b.bytes() && b0 < a0 + a.bytes();
}

void check_distinct(const char* op, const char* out_name, const Tensor* out, const char* in_name,
                    const Tensor& in) {
  if (out != nullptr && overlap(*out, in)) {
    fail(std::string(op) + ": " + out_name + " overlaps " + in_name + "; this op does not work in place");
  }
}

int to_int(std::int64_t v, const char* what, const Shape& input) {
  if (v <= 0 || v > (std::int64_t{1} << 30)) {
    fail(std::string(what) + " of input " + input.to_string() + " must be in [1, 2^30]");
  }
  return static_cast<int>(v);
}

void check_window(const char* what, const Window2d& w) {
  if (w.kernel_h <= 0 || w.kernel_w <= 0 || w.stride_h <= 0 || w.stride_w <= 0 || w.pad_h < 0 ||
      w.pad_w < 0) {
    fail(std::string(what) + ": window " + std::to_string(w.kernel_h) + "x" + std::to_string(w.kernel_w) +
         " stride " + std::to_string(w.stride_h) + "x" + std::to_string(w.stride_w) + " pad " +
         std::to_string(w.pad_h) + "x" + std::to_string(w.pad_w) +
         ": kernel and stride must be positive and padding non-negative");
  }
  if (w.pad_h >= w.kernel_h || w.pad_w >= w.kernel_w) {
    fail(std::string(what) + ": padding must be smaller than the kernel (a window of padding only)");
  }
}

// Output size along one dimension; fails when the window does not fit the padded input.
int out_size(const char* what, int in, int kernel, int stride, int pad) {
  const int padded = in + 2 * pad;
  if (padded < kernel) {
    fail(std::string(what) + ": kernel " + std::to_string(kernel) + " is larger than the padded input (" +
         std::to_string(padded) + ")");
  }
  return (padded - kernel) / stride + 1;
}

}  // namespace

Conv2dShape Conv2dShape::make(const Shape& input, int out_channels, const Window2d& window) {
  if (input.rank() != 4) fail("conv2d: input must be (N, C, H, W), got " + input.to_string());
  if (input[0] < 0) fail("conv2d: negative batch in " + input.to_string());
  if (out_channels <= 0) fail("conv2d: out_channels must be positive, got " + std::to_string(out_channels));
  check_window("conv2d", window);
  Conv2dShape s;
  s.batch = input[0];
  s.in_channels = to_int(input[1], "channels", input);
  s.in_h = to_int(input[2], "height", input);
  s.in_w = to_int(input[3], "width", input);
  s.out_channels = out_channels;
  s.window = window;
  s.out_h = out_size("conv2d", s.in_h, window.kernel_h, window.stride_h, window.pad_h);
  s.out_w = out_size("conv2d", s.in_w, window.kernel_w, window.stride_w, window.pad_w);
  return s;
}

Conv2dShape Conv2dShape::make_depthwise(const Shape& input, const Window2d& window) {
  if (input.rank() != 4) fail("depthwise_conv2d: input must be (N, C, H, W), got " + input.to_string());
  return make(input, static_cast<int>(input[1]), window);
}

SeparableShape SeparableShape::make(const Shape& input, int out_channels, const Window2d& window) {
  if (out_channels <= 0) {
    fail("separable_conv2d: out_channels must be positive, got " + std::to_string(out_channels));
  }
  return {Conv2dShape::make_depthwise(input, window), out_channels};
}

DenseShape DenseShape::make(const Shape& input, std::int64_t out_features) {
  if (input.rank() != 2) fail("dense: input must be (N, features), got " + input.to_string());
  if (input[0] < 0 || input[1] <= 0) fail("dense: bad input shape " + input.to_string());
  if (out_features <= 0) fail("dense: out_features must be positive, got " + std::to_string(out_features));
  return {input[0], input[1], out_features};
}

Pool2dShape Pool2dShape::make(const Shape& input, const Window2d& window) {
  if (input.rank() != 4) fail("maxpool2d: input must be (N, C, H, W), got " + input.to_string());
  if (input[0] < 0) fail("maxpool2d: negative batch in " + input.to_string());
  check_window("maxpool2d", window);
  Pool2dShape s;
  s.batch = input[0];
  s.channels = to_int(input[1], "channels", input);
  s.in_h = to_int(input[2], "height", input);
  s.in_w = to_int(input[3], "width", input);
  s.window = window;
  s.out_h = out_size("maxpool2d", s.in_h, window.kernel_h, window.stride_h, window.pad_h);
  s.out_w = out_size("maxpool2d", s.in_w, window.kernel_w, window.stride_w, window.pad_w);
  return s;
}

BatchNormShape BatchNormShape::make(const Shape& input) {
  if (input.rank() != 2 && input.rank() != 4) {
    fail("batchnorm: input must be (N, C) or (N, C, H, W), got " + input.to_string());
  }
  if (input[0] <= 0) fail("batchnorm: the batch must not be empty, got " + input.to_string());
  BatchNormShape s;
  s.batch = input[0];
  s.channels = to_int(input[1], "channels", input);
  s.spatial = input.rank() == 4 ? input[2] * input[3] : 1;
  if (s.spatial <= 0) fail("batchnorm: empty planes in " + input.to_string());
  return s;
}

namespace ops {

std::size_t conv2d_workspace(const Context& ctx, const Conv2dShape& s, DType dtype) {
  return const_cast<Context&>(ctx).backend().conv2d_workspace(s, dtype);
}

void conv2d_forward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor& w,
                    const Tensor* bias, Tensor& y) {
  const char* op = "conv2d_forward";
  const DType t = activation_dtype(op, x);
  check(ctx, op, "x", x, s.input(), t);
  check(ctx, op, "w", w, s.weight(), t);
  check_optional(ctx, op, "bias", bias, {s.out_channels}, t);
  check(ctx, op, "y", y, s.output(), t);
  check_distinct(op, "y", &y, "x", x);
  ctx.backend().conv2d_forward(ctx, s, x, w, bias, y);
}

void conv2d_backward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor& w,
                     const Tensor& dy, Tensor* dx, Tensor& dw, Tensor* dbias, GradMode mode) {
  const char* op = "conv2d_backward";
  const DType t = activation_dtype(op, x);
  check(ctx, op, "x", x, s.input(), t);
  check(ctx, op, "w", w, s.weight(), t);
  check(ctx, op, "dy", dy, s.output(), t);
  check_optional(ctx, op, "dx", dx, s.input(), t);
  check(ctx, op, "dw", dw, s.weight(), t);
  check_optional(ctx, op, "dbias", dbias, {s.out_channels}, t);
  check_distinct(op, "dx", dx, "dy", dy);
  check_distinct(op, "dx", dx, "x", x);
  ctx.backend().conv2d_backward(ctx, s, x, w, dy, dx, dw, dbias, mode);
}

std::size_t depthwise_conv2d_workspace(const Context& ctx, const Conv2dShape& s, DType dtype) {
  return const_cast<Context&>(ctx).backend().depthwise_conv2d_workspace(s, dtype);
}

void depthwise_conv2d_forward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor& w,
                              const Tensor* bias, Tensor& y) {
  const char* op = "depthwise_conv2d_forward";
  if (s.out_channels != s.in_channels) fail(std::string(op) + ": out_channels must equal in_channels");
  const DType t = activation_dtype(op, x);
  check(ctx, op, "x", x, s.input(), t);
  check(ctx, op, "w", w, s.depthwise_weight(), t);
  check_optional(ctx, op, "bias", bias, {s.in_channels}, t);
  check(ctx, op, "y", y, s.output(), t);
  check_distinct(op, "y", &y, "x", x);
  ctx.backend().depthwise_conv2d_forward(ctx, s, x, w, bias, y);
}

void depthwise_conv2d_backward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor& w,
                               const Tensor& dy, Tensor* dx, Tensor& dw, Tensor* dbias, GradMode mode) {
  const char* op = "depthwise_conv2d_backward";
  if (s.out_channels != s.in_channels) fail(std::string(op) + ": out_channels must equal in_channels");
  const DType t = activation_dtype(op, x);
  check(ctx, op, "x", x, s.input(), t);
  check(ctx, op, "w", w, s.depthwise_weight(), t);
  check(ctx, op, "dy", dy, s.output(), t);
  check_optional(ctx, op, "dx", dx, s.input(), t);
  check(ctx, op, "dw", dw, s.depthwise_weight(), t);
  check_optional(ctx, op, "dbias", dbias, {s.in_channels}, t);
  check_distinct(op, "dx", dx, "dy", dy);
  check_distinct(op, "dx", dx, "x", x);
  ctx.backend().depthwise_conv2d_backward(ctx, s, x, w, dy, dx, dw, dbias, mode);
}

std::size_t separable_conv2d_workspace(const Context& ctx, const SeparableShape& s, DType dtype) {
  return const_cast<Context&>(ctx).backend().separable_conv2d_workspace(s, dtype);
}

void separable_conv2d_forward(Context& ctx, const SeparableShape& s, const Tensor& x, const Tensor& wd,
                              const Tensor& wp, const Tensor* bias, Tensor& y) {
  const char* op = "separable_conv2d_forward";
  const DType t = activation_dtype(op, x);
  check(ctx, op, "x", x, s.input(), t);
  check(ctx, op, "wd", wd, s.depthwise_weight(), t);
  check(ctx, op, "wp", wp, s.pointwise_weight(), t);
  check_optional(ctx, op, "bias", bias, {s.out_channels}, t);
  check(ctx, op, "y", y, s.output(), t);
  check_distinct(op, "y", &y, "x", x);
  ctx.backend().separable_conv2d_forward(ctx, s, x, wd, wp, bias, y);
}

void separable_conv2d_backward(Context& ctx, const SeparableShape& s, const Tensor& x, const Tensor& wd,
                               const Tensor& wp, const Tensor& dy, Tensor* dx, Tensor& dwd, Tensor& dwp,
                               Tensor* dbias, GradMode mode) {
  const char* op = "separable_conv2d_backward";
  const DType t = activation_dtype(op, x);
  check(ctx, op, "x", x, s.input(), t);
  check(ctx, op, "wd", wd, s.depthwise_weight(), t);
  check(ctx, op, "wp", wp, s.pointwise_weight(), t);
  check(ctx, op, "dy", dy, s.output(), t);
  check_optional(ctx, op, "dx", dx, s.input(), t);
  check(ctx, op, "dwd", dwd, s.depthwise_weight(), t);
  check(ctx, op, "dwp", dwp, s.pointwise_weight(), t);
  check_optional(ctx, op, "dbias", dbias, {s.out_channels}, t);
  check_distinct(op, "dx", dx, "dy", dy);
  check_distinct(op, "dx", dx, "x", x);
  ctx.backend().separable_conv2d_backward(ctx, s, x, wd, wp, dy, dx, dwd, dwp, dbias, mode);
}

std::size_t dense_workspace(const Context& ctx, const DenseShape& s, DType dtype) {
  return const_cast<Context&>(ctx).backend().dense_workspace(s, dtype);
}

void dense_forward(Context& ctx, const DenseShape& s, const Tensor& x, const Tensor& w, const Tensor* bias,
                   Tensor& y) {
  const char* op = "dense_forward";
  const DType t = activation_dtype(op, x);
  check(ctx, op, "x", x, s.input(), t);
  check(ctx, op, "w", w, s.weight(), t);
  check_optional(ctx, op, "bias", bias, {s.out_features}, t);
  check(ctx, op, "y", y, s.output(), t);
  check_distinct(op, "y", &y, "x", x);
  ctx.backend().dense_forward(ctx, s, x, w, bias, y);
}

void dense_backward(Context& ctx, const DenseShape& s, const Tensor& x, const Tensor& w, const Tensor& dy,
                    Tensor* dx, Tensor& dw, Tensor* dbias, GradMode mode) {
  const char* op = "dense_backward";
  const DType t = activation_dtype(op, x);
  check(ctx, op, "x", x, s.input(), t);
  check(ctx, op, "w", w, s.weight(), t);
  check(ctx, op, "dy", dy, s.output(), t);
  check_optional(ctx, op, "dx", dx, s.input(), t);
  check(ctx, op, "dw", dw, s.weight(), t);
  check_optional(ctx, op, "dbias", dbias, {s.out_features}, t);
  check_distinct(op, "dx", dx, "dy", dy);
  check_distinct(op, "dx", dx, "x", x);
  ctx.backend().dense_backward(ctx, s, x, w, dy, dx, dw, dbias, mode);
}

void relu_forward(Context& ctx, const Tensor& x, Tensor& y) {
  const char* op = "relu_forward";
  const DType t = activation_dtype(op, x);
  check(ctx, op, "x", x, x.shape(), t);
  check(ctx, op, "y", y, x.shape(), t);
  if (y.data() != x.data()) check_distinct(op, "y", &y, "x", x);
  ctx.backend().relu_forward(ctx, x, y);
}

void relu_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx) {
  const char* op = "relu_backward";
  const DType t = activation_dtype(op, y);
  check(ctx, op, "y", y, y.shape(), t);
  check(ctx, op, "dy", dy, y.shape(), t);
  check(ctx, op, "dx", dx, y.shape(), t);
  if (dx.data() != dy.data()) check_distinct(op, "dx", &dx, "dy", dy);
  check_distinct(op, "dx", &dx, "y", y);
  ctx.backend().relu_backward(ctx, y, dy, dx);
}

void maxpool2d_forward(Context& ctx, const Pool2dShape& s, const Tensor& x, Tensor& y) {
  const char* op = "maxpool2d_forward";
  const DType t = activation_dtype(op, x);
  check(ctx, op, "x", x, s.input(), t);
  check(ctx, op, "y", y, s.output(), t);
  check_distinct(op, "y", &y, "x", x);
  ctx.backend().maxpool2d_forward(ctx, s, x, y);
}

void maxpool2d_backward(Context& ctx, const Pool2dShape& s, const Tensor& x, const Tensor& dy, Tensor& dx) {
  const char* op = "maxpool2d_backward";
  const DType t = activation_dtype(op, x);
  check(ctx, op, "x", x, s.input(), t);
  check(ctx, op, "dy", dy, s.output(), t);
  check(ctx, op, "dx", dx, s.input(), t);
  check_distinct(op, "dx", &dx, "dy", dy);
  check_distinct(op, "dx", &dx, "x", x);
  ctx.backend().maxpool2d_backward(ctx, s, x, dy, dx);
}

void global_avg_pool_forward(Context& ctx, const Tensor& x, Tensor& y) {
  const char* op = "global_avg_pool_forward";
  const DType t = activation_dtype(op, x);
  if (x.rank() != 4 || x.dim(2) * x.dim(3) <= 0) fail(std::string(op) + ": x must be (N, C, H, W), got " + x.describe());
  check(ctx, op, "x", x, x.shape(), t);
  check(ctx, op, "y", y, {x.dim(0), x.dim(1)}, t);
  check_distinct(op, "y", &y, "x", x);
  ctx.backend().global_avg_pool_forward(ctx, x, y);
}

void global_avg_pool_backward(Context& ctx, const Tensor& dy, Tensor& dx) {
  const char* op = "global_avg_pool_backward";
  const DType t = activation_dtype(op, dy);
  if (dx.rank() != 4 || dx.dim(2) * dx.dim(3) <= 0) fail(std::string(op) + ": dx must be (N, C, H, W), got " + dx.describe());
  check(ctx, op, "dy", dy, {dx.dim(0), dx.dim(1)}, t);
  check(ctx, op, "dx", dx, dx.shape(), t);
  check_distinct(op, "dx", &dx, "dy", dy);
  ctx.backend().global_avg_pool_backward(ctx, dy, dx);
}

namespace {
Shape bn_input_shape(const BatchNormShape& s, const Tensor& x) {
  // (N, C) or (N, C, H, W): x's own shape, once it is known to agree with s.
  const bool ok = (x.rank() == 2 || x.rank() == 4) && x.dim(0) == s.batch && x.dim(1) == s.channels &&
                  (x.rank() == 2 ? s.spatial == 1 : x.dim(2) * x.dim(3) == s.spatial);
  if (!ok) fail("batchnorm: x is " + x.describe() + ", which does not match (N=" + std::to_string(s.batch) +
                ", C=" + std::to_string(s.channels) + ", H*W=" + std::to_string(s.spatial) + ")");
  return x.shape();
}
void check_bn_params(const char* op, const BatchNormParams& p) {
  if (!(p.epsilon > 0.0f)) fail(std::string(op) + ": epsilon must be positive");
  if (!(p.momentum >= 0.0f && p.momentum <= 1.0f)) fail(std::string(op) + ": momentum must be in [0, 1]");
}
}  // namespace

void batchnorm_forward_training(Context& ctx, const BatchNormShape& s, const BatchNormParams& p,
                                const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                                Tensor& running_var, Tensor& y, Tensor& saved_mean, Tensor& saved_invstd) {
  const char* op = "batchnorm_forward_training";
  const DType t = activation_dtype(op, x);
  check_bn_params(op, p);
  const Shape in = bn_input_shape(s, x);
  if (s.count() < 2) {  // as PyTorch: one value has no variance to normalise with
    fail(std::string(op) + ": needs more than one value per channel (N * H * W), got " + x.describe());
  }
  check(ctx, op, "x", x, in, t);
  check(ctx, op, "y", y, in, t);
  const Shape c = s.channel_shape();
  check(ctx, op, "gamma", gamma, c, DType::kF32);
  check(ctx, op, "beta", beta, c, DType::kF32);
  check(ctx, op, "running_mean", running_mean, c, DType::kF32);
  check(ctx, op, "running_var", running_var, c, DType::kF32);
  check(ctx, op, "saved_mean", saved_mean, c, DType::kF32);
  check(ctx, op, "saved_invstd", saved_invstd, c, DType::kF32);
  check_distinct(op, "y", &y, "x", x);
  ctx.backend().batchnorm_forward_training(ctx, s, p, x, gamma, beta, running_mean, running_var, y, saved_mean,
                                           saved_invstd);
}

void batchnorm_forward_inference(Context& ctx, const BatchNormShape& s, const BatchNormParams& p,
                                 const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                 const Tensor& running_mean, const Tensor& running_var, Tensor& y) {
  const char* op = "batchnorm_forward_inference";
  const DType t = activation_dtype(op, x);
  check_bn_params(op, p);
  const Shape in = bn_input_shape(s, x);
  check(ctx, op, "x", x, in, t);
  check(ctx, op, "y", y, in, t);
  const Shape c = s.channel_shape();
  check(ctx, op, "gamma", gamma, c, DType::kF32);
  check(ctx, op, "beta", beta, c, DType::kF32);
  check(ctx, op, "running_mean", running_mean, c, DType::kF32);
  check(ctx, op, "running_var", running_var, c, DType::kF32);
  if (y.data() != x.data()) check_distinct(op, "y", &y, "x", x);
  ctx.backend().batchnorm_forward_inference(ctx, s, p, x, gamma, beta, running_mean, running_var, y);
}

void batchnorm_backward(Context& ctx, const BatchNormShape& s, const Tensor& x, const Tensor& gamma,
                        const Tensor& saved_mean, const Tensor& saved_invstd, const Tensor& dy, Tensor* dx,
                        Tensor& dgamma, Tensor& dbeta, GradMode mode) {
  const char* op = "batchnorm_backward";
  const DType t = activation_dtype(op, x);
  const Shape in = bn_input_shape(s, x);
  check(ctx, op, "x", x, in, t);
  check(ctx, op, "dy", dy, in, t);
  check_optional(ctx, op, "dx", dx, in, t);
  const Shape c = s.channel_shape();
  check(ctx, op, "gamma", gamma, c, DType::kF32);
  check(ctx, op, "saved_mean", saved_mean, c, DType::kF32);
  check(ctx, op, "saved_invstd", saved_invstd, c, DType::kF32);
  check(ctx, op, "dgamma", dgamma, c, DType::kF32);
  check(ctx, op, "dbeta", dbeta, c, DType::kF32);
  check_distinct(op, "dx", dx, "x", x);
  if (dx != nullptr && dx->data() != dy.data()) check_distinct(op, "dx", dx, "dy", dy);
  ctx.backend().batchnorm_backward(ctx, s, x, gamma, saved_mean, saved_invstd, dy, dx, dgamma, dbeta, mode);
}

void dropout_forward(Context& ctx, const DropoutMask& m, const Tensor& x, Tensor& y) {
  const char* op = "dropout_forward";
  const DType t = activation_dtype(op, x);
  if (!(m.rate >= 0.0f && m.rate < 1.0f)) fail(std::string(op) + ": rate must be in [0, 1), got " + std::to_string(m.rate));
  check(ctx, op, "x", x, x.shape(), t);
  check(ctx, op, "y", y, x.shape(), t);
  if (y.data() != x.data()) check_distinct(op, "y", &y, "x", x);
  ctx.backend().dropout_forward(ctx, m, x, y);
}

void dropout_backward(Context& ctx, const DropoutMask& m, const Tensor& dy, Tensor& dx) {
  const char* op = "dropout_backward";
  const DType t = activation_dtype(op, dy);
  if (!(m.rate >= 0.0f && m.rate < 1.0f)) fail(std::string(op) + ": rate must be in [0, 1), got " + std::to_string(m.rate));
  check(ctx, op, "dy", dy, dy.shape(), t);
  check(ctx, op, "dx", dx, dy.shape(), t);
  if (dx.data() != dy.data()) check_distinct(op, "dx", &dx, "dy", dy);
  ctx.backend().dropout_backward(ctx, m, dy, dx);
}

void scale(Context& ctx, Tensor& t, float alpha) {
  const char* op = "scale";
  const DType dt = activation_dtype(op, t);
  check(ctx, op, "t", t, t.shape(), dt);
  ctx.backend().scale(ctx, t, alpha);
}

LossResult softmax_cross_entropy(Context& ctx, const Tensor& logits, const Tensor& labels, Tensor* dlogits) {
  const char* op = "softmax_cross_entropy";
  const DType t = activation_dtype(op, logits);
  if (logits.rank() != 2 || logits.dim(0) <= 0 || logits.dim(1) <= 0) {
    fail(std::string(op) + ": logits must be (N, K) with N, K > 0, got " + logits.describe());
  }
  check(ctx, op, "logits", logits, logits.shape(), t);
  check(ctx, op, "labels", labels, {logits.dim(0)}, DType::kI32);
  check_optional(ctx, op, "dlogits", dlogits, logits.shape(), t);
  check_distinct(op, "dlogits", dlogits, "logits", logits);
  return ctx.backend().softmax_cross_entropy(ctx, logits, labels, dlogits);
}

void sgd_update(Context& ctx, const SgdUpdate& u, Tensor& w, const Tensor& g, Tensor* momentum_buf) {
  const char* op = "sgd_update";
  check(ctx, op, "w", w, w.shape(), DType::kF32);
  check(ctx, op, "g", g, w.shape(), DType::kF32);
  if (u.momentum != 0.0f && momentum_buf == nullptr) fail(std::string(op) + ": momentum needs a momentum buffer");
  check_optional(ctx, op, "momentum_buf", momentum_buf, w.shape(), DType::kF32);
  ctx.backend().sgd_update(ctx, u, w, g, u.momentum != 0.0f ? momentum_buf : nullptr);
}

void adamw_update(Context& ctx, const AdamWUpdate& u, Tensor& w, const Tensor& g, Tensor& m, Tensor& v) {
  const char* op = "adamw_update";
  if (u.step < 1) fail(std::string(op) + ": step counts from 1");
  check(ctx, op, "w", w, w.shape(), DType::kF32);
  check(ctx, op, "g", g, w.shape(), DType::kF32);
  check(ctx, op, "m", m, w.shape(), DType::kF32);
  check(ctx, op, "v", v, w.shape(), DType::kF32);
  ctx.backend().adamw_update(ctx, u, w, g, m, v);
}

void fill(Context& ctx, Tensor& t, float value) {
  check(ctx, "fill", "t", t, t.shape(), t.dtype());
  ctx.backend().fill(ctx, t, value);
}

void cast(Context& ctx, const Tensor& src, Tensor& dst) {
  const char* op = "cast";
  check(ctx, op, "src", src, src.shape(), src.dtype());
  check(ctx, op, "dst", dst, src.shape(), dst.dtype());
  if (src.dtype() != dst.dtype() && (!is_floating(src.dtype()) || !is_floating(dst.dtype()))) {
    fail(std::string(op) + ": converts between f32, f16 and bf16 only, not " + std::string(to_string(src.dtype())) +
         " to " + std::string(to_string(dst.dtype())));
  }
  // In place only as a no-op (equal dtypes): a widening or narrowing cast in place would read
  // elements it already overwrote.
  if (src.data() != dst.data() || src.dtype() != dst.dtype()) check_distinct(op, "dst", &dst, "src", src);
  ctx.backend().cast(ctx, src, dst);
}

void scale_cast(Context& ctx, const Tensor& src, float scale, Tensor& dst) {
  const char* op = "scale_cast";
  const DType t = activation_dtype(op, src);
  check(ctx, op, "src", src, src.shape(), t);
  check(ctx, op, "dst", dst, src.shape(), dst.dtype());
  if (!is_floating(dst.dtype())) fail(std::string(op) + ": dst is " + dst.describe() + "; expected f32, f16 or bf16");
  if (src.data() != dst.data() || src.dtype() != dst.dtype()) check_distinct(op, "dst", &dst, "src", src);
  ctx.backend().scale_cast(ctx, src, scale, dst);
}

void find_nonfinite(Context& ctx, const Tensor& t, Tensor& flag) {
  const char* op = "find_nonfinite";
  const DType dt = activation_dtype(op, t);
  check(ctx, op, "t", t, t.shape(), dt);
  check(ctx, op, "flag", flag, {1}, DType::kF32);
  check_distinct(op, "flag", &flag, "t", t);
  ctx.backend().find_nonfinite(ctx, t, flag);
}

void copy_to_host(Context& ctx, const Tensor& src, void* dst) {
  check(ctx, "copy_to_host", "src", src, src.shape(), src.dtype());
  if (dst == nullptr && src.bytes() > 0) fail("copy_to_host: null destination");
  ctx.backend().copy_to_host(ctx, src, dst);
}

void copy_from_host(Context& ctx, const void* src, Tensor& dst) {
  check(ctx, "copy_from_host", "dst", dst, dst.shape(), dst.dtype());
  if (src == nullptr && dst.bytes() > 0) fail("copy_from_host: null source");
  ctx.backend().copy_from_host(ctx, src, dst);
}

void copy_to_host_async(Context& ctx, const Tensor& src, void* dst) {
  check(ctx, "copy_to_host_async", "src", src, src.shape(), src.dtype());
  if (dst == nullptr && src.bytes() > 0) fail("copy_to_host_async: null destination");
  ctx.backend().copy_to_host_async(ctx, src, dst);
}

void copy_from_host_async(Context& ctx, const void* src, Tensor& dst) {
  check(ctx, "copy_from_host_async", "dst", dst, dst.shape(), dst.dtype());
  if (src == nullptr && dst.bytes() > 0) fail("copy_from_host_async: null source");
  ctx.backend().copy_from_host_async(ctx, src, dst);
}

}  // namespace ops
}  // namespace sluice::train
