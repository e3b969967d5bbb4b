// Conv2D, DepthwiseConv2D and SeparableConv2D: each keeps its input for backward and nothing
// else (the separable op recomputes its depthwise result per image instead of storing it).
#include <string>

#include "sluice/core/rng.hpp"
#include "sluice/train/init.hpp"
#include "sluice/train/layers.hpp"
#include "train/nn/layer_util.hpp"

namespace sluice::train {
namespace {

std::string window_text(const Window2d& w) {
  std::string s = std::to_string(w.kernel_h) + "x" + std::to_string(w.kernel_w) + "/" + std::to_string(w.stride_h);
  if (w.pad_h != 0 || w.pad_w != 0) s += " pad " + std::to_string(w.pad_h);
  return s;
}

void check_channels(const std::string& layer, const Shape& input, int channels) {
  if (input.rank() != 4) detail::layer_error(layer, "expects (N, C, H, W), got " + input.to_string());
  if (input[1] != channels) {
    detail::layer_error(layer, "expects " + std::to_string(channels) + " input channels, got " + input.to_string());
  }
}

}  // namespace

// ---- Conv2D -------------------------------------------------------------------------------

Conv2D::Conv2D(Context& ctx, Conv2DOptions options) : options_(options) {
  detail::require_positive(options.in_channels, "Conv2D", "in_channels");
  detail::require_positive(options.out_channels, "Conv2D", "out_channels");
  const Window2d& w = options.window;
  weight_ = Param(ctx, {options.out_channels, options.in_channels, w.kernel_h, w.kernel_w}, WeightDecay::kApply);
  if (options.bias) bias_ = Param(ctx, {options.out_channels}, WeightDecay::kExempt);
}

std::string Conv2D::describe() const {
  return "Conv2D " + window_text(options_.window) + ", " + std::to_string(options_.in_channels) + " -> " +
         std::to_string(options_.out_channels);
}

Shape Conv2D::output_shape(const Shape& input) const {
  check_channels("Conv2D", input, options_.in_channels);
  return Conv2dShape::make(input, options_.out_channels, options_.window).output();
}

void Conv2D::initialize(Context& ctx, std::uint64_t key) {
  const Window2d& w = options_.window;
  he_normal(ctx, weight_.value, std::int64_t{options_.in_channels} * w.kernel_h * w.kernel_w, key);
  if (bias_.defined()) ops::fill(ctx, bias_.value, 0.0f);
}

Tensor Conv2D::forward(Context& ctx, Tensor x, const ForwardMode& mode) {
  check_channels("Conv2D", x.shape(), options_.in_channels);
  const Conv2dShape s = Conv2dShape::make(x.shape(), options_.out_channels, options_.window);
  const DType t = x.dtype();
  Tensor y = detail::activation(ctx, s.output(), t);
  ops::conv2d_forward(ctx, s, x, weight_.value_for(t), bias_.value_or_null(t), y);
  x_ = mode.training ? std::move(x) : Tensor();
  return y;
}

Tensor Conv2D::backward(Context& ctx, Tensor dy, InputGradient input_gradient) {
  detail::require_saved(x_.defined(), "Conv2D");
  const Conv2dShape s = Conv2dShape::make(x_.shape(), options_.out_channels, options_.window);
  Tensor dx = detail::input_gradient(ctx, x_, input_gradient);
  const DType t = x_.dtype();
  ops::conv2d_backward(ctx, s, x_, weight_.value_for(t), dy, detail::defined_or_null(dx), weight_.grad_for(t),
                       bias_.grad_or_null(t), grad_mode());
  x_.reset();
  return dx;
}

void Conv2D::parameters(const std::string& prefix, std::vector<Parameter>& out) {
  weight_.append_to(out, prefix + "weight");
  bias_.append_to(out, prefix + "bias");
}

void Conv2D::set_compute_dtype(Context& ctx, DType dtype) {
  weight_.set_compute_dtype(ctx, dtype);
  bias_.set_compute_dtype(ctx, dtype);
}

// ---- DepthwiseConv2D ----------------------------------------------------------------------

DepthwiseConv2D::DepthwiseConv2D(Context& ctx, DepthwiseConv2DOptions options) : options_(options) {
  detail::require_positive(options.channels, "DepthwiseConv2D", "channels");
  const Window2d& w = options.window;
  weight_ = Param(ctx, {options.channels, 1, w.kernel_h, w.kernel_w}, WeightDecay::kApply);
  if (options.bias) bias_ = Param(ctx, {options.channels}, WeightDecay::kExempt);
}

std::string DepthwiseConv2D::describe() const {
  return "DepthwiseConv2D " + window_text(options_.window) + ", " + std::to_string(options_.channels);
}

Shape DepthwiseConv2D::output_shape(const Shape& input) const {
  check_channels("DepthwiseConv2D", input, options_.channels);
  return Conv2dShape::make_depthwise(input, options_.window).output();
}

void DepthwiseConv2D::initialize(Context& ctx, std::uint64_t key) {
  he_normal(ctx, weight_.value, std::int64_t{options_.window.kernel_h} * options_.window.kernel_w, key);
  if (bias_.defined()) ops::fill(ctx, bias_.value, 0.0f);
}

Tensor DepthwiseConv2D::forward(Context& ctx, Tensor x, const ForwardMode& mode) {
  check_channels("DepthwiseConv2D", x.shape(), options_.channels);
  const Conv2dShape s = Conv2dShape::make_depthwise(x.shape(), options_.window);
  const DType t = x.dtype();
  Tensor y = detail::activation(ctx, s.output(), t);
  ops::depthwise_conv2d_forward(ctx, s, x, weight_.value_for(t), bias_.value_or_null(t), y);
  x_ = mode.training ? std::move(x) : Tensor();
  return y;
}

Tensor DepthwiseConv2D::backward(Context& ctx, Tensor dy, InputGradient input_gradient) {
  detail::require_saved(x_.defined(), "DepthwiseConv2D");
  const Conv2dShape s = Conv2dShape::make_depthwise(x_.shape(), options_.window);
  Tensor dx = detail::input_gradient(ctx, x_, input_gradient);
  const DType t = x_.dtype();
  ops::depthwise_conv2d_backward(ctx, s, x_, weight_.value_for(t), dy, detail::defined_or_null(dx),
                                 weight_.grad_for(t), bias_.grad_or_null(t), grad_mode());
  x_.reset();
  return dx;
}

void DepthwiseConv2D::parameters(const std::string& prefix, std::vector<Parameter>& out) {
  weight_.append_to(out, prefix + "weight");
  bias_.append_to(out, prefix + "bias");
}

void DepthwiseConv2D::set_compute_dtype(Context& ctx, DType dtype) {
  weight_.set_compute_dtype(ctx, dtype);
  bias_.set_compute_dtype(ctx, dtype);
}

// ---- SeparableConv2D ----------------------------------------------------------------------

SeparableConv2D::SeparableConv2D(Context& ctx, SeparableConv2DOptions options) : options_(options) {
  detail::require_positive(options.in_channels, "SeparableConv2D", "in_channels");
  detail::require_positive(options.out_channels, "SeparableConv2D", "out_channels");
  const Window2d& w = options.window;
  depthwise_ = Param(ctx, {options.in_channels, 1, w.kernel_h, w.kernel_w}, WeightDecay::kApply);
  pointwise_ = Param(ctx, {options.out_channels, options.in_channels, 1, 1}, WeightDecay::kApply);
  if (options.bias) bias_ = Param(ctx, {options.out_channels}, WeightDecay::kExempt);
}

std::string SeparableConv2D::describe() const {
  return "SeparableConv2D " + window_text(options_.window) + ", " + std::to_string(options_.in_channels) + " -> " +
         std::to_string(options_.out_channels);
}

Shape SeparableConv2D::output_shape(const Shape& input) const {
  check_channels("SeparableConv2D", input, options_.in_channels);
  return SeparableShape::make(input, options_.out_channels, options_.window).output();
}

void SeparableConv2D::initialize(Context& ctx, std::uint64_t key) {
  const Window2d& w = options_.window;
  he_normal(ctx, depthwise_.value, std::int64_t{w.kernel_h} * w.kernel_w, derive_key(key, 0));
  he_normal(ctx, pointwise_.value, options_.in_channels, derive_key(key, 1));
  if (bias_.defined()) ops::fill(ctx, bias_.value, 0.0f);
}

Tensor SeparableConv2D::forward(Context& ctx, Tensor x, const ForwardMode& mode) {
  check_channels("SeparableConv2D", x.shape(), options_.in_channels);
  const SeparableShape s = SeparableShape::make(x.shape(), options_.out_channels, options_.window);
  const DType t = x.dtype();
  Tensor y = detail::activation(ctx, s.output(), t);
  ops::separable_conv2d_forward(ctx, s, x, depthwise_.value_for(t), pointwise_.value_for(t), bias_.value_or_null(t),
                                y);
  x_ = mode.training ? std::move(x) : Tensor();
  return y;
}

Tensor SeparableConv2D::backward(Context& ctx, Tensor dy, InputGradient input_gradient) {
  detail::require_saved(x_.defined(), "SeparableConv2D");
  const SeparableShape s = SeparableShape::make(x_.shape(), options_.out_channels, options_.window);
  Tensor dx = detail::input_gradient(ctx, x_, input_gradient);
  const DType t = x_.dtype();
  ops::separable_conv2d_backward(ctx, s, x_, depthwise_.value_for(t), pointwise_.value_for(t), dy,
                                 detail::defined_or_null(dx), depthwise_.grad_for(t), pointwise_.grad_for(t),
                                 bias_.grad_or_null(t), grad_mode());
  x_.reset();
  return dx;
}

void SeparableConv2D::parameters(const std::string& prefix, std::vector<Parameter>& out) {
  depthwise_.append_to(out, prefix + "depthwise");
  pointwise_.append_to(out, prefix + "pointwise");
  bias_.append_to(out, prefix + "bias");
}

void SeparableConv2D::set_compute_dtype(Context& ctx, DType dtype) {
  depthwise_.set_compute_dtype(ctx, dtype);
  pointwise_.set_compute_dtype(ctx, dtype);
  bias_.set_compute_dtype(ctx, dtype);
}

}  // namespace sluice::train
