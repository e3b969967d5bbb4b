// Dense: y = x w^T + b over (N, in), PyTorch's Linear; keeps its input for backward.
#include <string>

#include "sluice/core/rng.hpp"
#include "sluice/train/init.hpp"
#include "sluice/train/layers.hpp"
#include "train/nn/layer_util.hpp"

namespace sluice::train {

Dense::Dense(Context& ctx, DenseOptions options) : options_(options) {
  detail::require_positive(options.in_features, "Dense", "in_features");
  detail::require_positive(options.out_features, "Dense", "out_features");
  weight_ = Param(ctx, {options.out_features, options.in_features}, WeightDecay::kApply);
  if (options.bias) bias_ = Param(ctx, {options.out_features}, WeightDecay::kExempt);
}

std::string Dense::describe() const {
  return "Dense " + std::to_string(options_.in_features) + " -> " + std::to_string(options_.out_features);
}

Shape Dense::output_shape(const Shape& input) const {
  if (input.rank() != 2 || input[1] != options_.in_features) {
    detail::layer_error("Dense", "expects (N, " + std::to_string(options_.in_features) + "), got " + input.to_string());
  }
  return DenseShape::make(input, options_.out_features).output();
}

void Dense::initialize(Context& ctx, std::uint64_t key) {
  he_normal(ctx, weight_.value, options_.in_features, key);
  if (bias_.defined()) ops::fill(ctx, bias_.value, 0.0f);
}

Tensor Dense::forward(Context& ctx, Tensor x, const ForwardMode& mode) {
  output_shape(x.shape());  // checks in_features
  const DenseShape s = DenseShape::make(x.shape(), options_.out_features);
  const DType t = x.dtype();
  Tensor y = detail::activation(ctx, s.output(), t);
  ops::dense_forward(ctx, s, x, weight_.value_for(t), bias_.value_or_null(t), y);
  x_ = mode.training ? std::move(x) : Tensor();
  return y;
}

Tensor Dense::backward(Context& ctx, Tensor dy, InputGradient input_gradient) {
  detail::require_saved(x_.defined(), "Dense");
  const DenseShape s = DenseShape::make(x_.shape(), options_.out_features);
  Tensor dx = detail::input_gradient(ctx, x_, input_gradient);
  const DType t = x_.dtype();
  ops::dense_backward(ctx, s, x_, weight_.value_for(t), dy, detail::defined_or_null(dx), weight_.grad_for(t),
                      bias_.grad_or_null(t), grad_mode());
  x_.reset();
  return dx;
}

void Dense::parameters(const std::string& prefix, std::vector<Parameter>& out) {
  weight_.append_to(out, prefix + "weight");
  bias_.append_to(out, prefix + "bias");
}

void Dense::set_compute_dtype(Context& ctx, DType dtype) {
  weight_.set_compute_dtype(ctx, dtype);
  bias_.set_compute_dtype(ctx, dtype);
}

}  // namespace sluice::train
