// BatchNorm: batch statistics in training (folded into the running averages), running
// statistics in inference. Keeps its input and the batch mean and 1/sqrt(var + eps) for backward.
#include <string>

#include "sluice/train/layers.hpp"
#include "train/nn/layer_util.hpp"

namespace sluice::train {
namespace {

void check_input(const Shape& input, int channels) {
  if ((input.rank() != 4 && input.rank() != 2) || input[1] != channels) {
    detail::layer_error("BatchNorm", "expects (N, " + std::to_string(channels) + ", H, W) or (N, " +
                                         std::to_string(channels) + "), got " + input.to_string());
  }
}

}  // namespace

BatchNorm::BatchNorm(Context& ctx, BatchNormOptions options) : options_(options) {
  detail::require_positive(options.channels, "BatchNorm", "channels");
  const Shape c{options.channels};
  gamma_ = Param(ctx, c, WeightDecay::kExempt);
  beta_ = Param(ctx, c, WeightDecay::kExempt);
  running_mean_ = ctx.zeros(c, DType::kF32, TensorCategory::kWeights);
  running_var_ = ctx.empty(c, DType::kF32, TensorCategory::kWeights);
  ops::fill(ctx, running_var_, 1.0f);
  ops::fill(ctx, gamma_.value, 1.0f);
}

std::string BatchNorm::describe() const { return "BatchNorm " + std::to_string(options_.channels); }

Shape BatchNorm::output_shape(const Shape& input) const {
  check_input(input, options_.channels);
  return input;
}

void BatchNorm::initialize(Context& ctx, std::uint64_t key) {
  (void)key;
  ops::fill(ctx, gamma_.value, 1.0f);
  ops::fill(ctx, beta_.value, 0.0f);
  ops::fill(ctx, running_mean_, 0.0f);
  ops::fill(ctx, running_var_, 1.0f);
}

Tensor BatchNorm::forward(Context& ctx, Tensor x, const ForwardMode& mode) {
  check_input(x.shape(), options_.channels);
  const BatchNormShape s = BatchNormShape::make(x.shape());
  Tensor y = detail::activation(ctx, x.shape(), x.dtype());
  if (!mode.training) {
    release_saved();
    ops::batchnorm_forward_inference(ctx, s, options_.params, x, gamma_.value, beta_.value, running_mean_,
                                     running_var_, y);
    return y;
  }
  saved_mean_ = ctx.empty(s.channel_shape(), DType::kF32, TensorCategory::kActivations);
  saved_invstd_ = ctx.empty(s.channel_shape(), DType::kF32, TensorCategory::kActivations);
  BatchNormParams params = options_.params;
  if (mode.recompute) params.update_running_stats = false;  // folded in by the first forward
  ops::batchnorm_forward_training(ctx, s, params, x, gamma_.value, beta_.value, running_mean_, running_var_, y,
                                  saved_mean_, saved_invstd_);
  x_ = x;
  return y;
}

Tensor BatchNorm::backward(Context& ctx, Tensor dy, InputGradient input_gradient) {
  detail::require_saved(x_.defined(), "BatchNorm");
  const BatchNormShape s = BatchNormShape::make(x_.shape());
  Tensor dx = detail::input_gradient(ctx, x_, input_gradient);
  ops::batchnorm_backward(ctx, s, x_, gamma_.value, saved_mean_, saved_invstd_, dy, detail::defined_or_null(dx),
                          gamma_.grad, beta_.grad, grad_mode());
  release_saved();
  return dx;
}

void BatchNorm::parameters(const std::string& prefix, std::vector<Parameter>& out) {
  gamma_.append_to(out, prefix + "gamma");
  beta_.append_to(out, prefix + "beta");
}

void BatchNorm::buffers(const std::string& prefix, std::vector<Buffer>& out) {
  out.push_back(Buffer{prefix + "running_mean", &running_mean_});
  out.push_back(Buffer{prefix + "running_var", &running_var_});
}

void BatchNorm::release_saved() {
  x_.reset();
  saved_mean_.reset();
  saved_invstd_.reset();
}

}  // namespace sluice::train
