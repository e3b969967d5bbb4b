// Dense: y = x w^T + b over (N, in), PyTorch's Linear; keeps its input for backward.
#include <string>

#include "sluice/core/rng.hpp"
#include "sluice/train/init.hpp"
#include "sluice/train/layers.hpp"
#include "train/layer_util.hpp"

namespace sluice::train {

Dense::Dense(Context& ctx, DenseOptions options) : options_(options) {
  detail::require_positive(options.in_features, "Dense", "in_features");
  detail::require_positive(options.out_features, "Dense", "out_features");
  detail::make_parameter(ctx, {options.out_features, options.in_features}, weight_, weight_grad_);
  if (options.bias) detail::make_parameter(ctx, {options.out_features}, bias_, bias_grad_);
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
  he_normal(ctx, weight_, options_.in_features, key);
  if (bias_.defined()) ops::fill(ctx, bias_, 0.0f);
}

Tensor Dense::forward(Context& ctx, Tensor x, const ForwardMode& mode) {
  output_shape(x.shape());  // checks in_features
  const DenseShape s = DenseShape::make(x.shape(), options_.out_features);
  const DType t = x.dtype();
  Tensor y = detail::activation(ctx, s.output(), t);
  ops::dense_forward(ctx, s, x, detail::compute_tensor(weight_, weight16_, t),
                     detail::compute_tensor_or_null(bias_, bias16_, t), y);
  x_ = mode.training ? std::move(x) : Tensor();
  return y;
}

Tensor Dense::backward(Context& ctx, Tensor dy, bool need_dx) {
  detail::require_saved(x_.defined(), "Dense");
  const DenseShape s = DenseShape::make(x_.shape(), options_.out_features);
  Tensor dx = need_dx ? detail::activation(ctx, x_.shape(), x_.dtype()) : Tensor();
  const DType t = x_.dtype();
  ops::dense_backward(ctx, s, x_, detail::compute_tensor(weight_, weight16_, t), dy, need_dx ? &dx : nullptr,
                      detail::compute_tensor(weight_grad_, weight16_grad_, t),
                      bias_.defined() ? &detail::compute_tensor(bias_grad_, bias16_grad_, t) : nullptr, grad_mode());
  x_.reset();
  return dx;
}

void Dense::parameters(const std::string& prefix, std::vector<Parameter>& out) {
  detail::add_parameter(out, prefix + "weight", weight_, weight_grad_, true, weight16_, weight16_grad_);
  detail::add_parameter(out, prefix + "bias", bias_, bias_grad_, false, bias16_, bias16_grad_);
}

void Dense::set_compute_dtype(Context& ctx, DType dtype) {
  detail::make_compute_copy(ctx, weight_, dtype, weight16_, weight16_grad_);
  detail::make_compute_copy(ctx, bias_, dtype, bias16_, bias16_grad_);
}

}  // namespace sluice::train
