// The layers without parameters: ReLU, MaxPool2D, GlobalAvgPool, Dropout and Flatten. ReLU and
// Dropout work in place on an activation no one else holds, and their backward in place on the
// incoming gradient, so they add no tensor of their own to the peak.
#include <algorithm>
#include <string>

#include "sluice/train/layers.hpp"
#include "train/nn/layer_util.hpp"

namespace sluice::train {
namespace {

// True when `t` is an allocator block of activations that only the caller's reference holds:
// writing over it cannot change anything another layer (or the user's batch) still needs.
bool writable_in_place(const Tensor& t) {
  return t.owns_storage() && t.use_count() == 1 && t.category() == TensorCategory::kActivations;
}

}  // namespace

// ---- ReLU ---------------------------------------------------------------------------------

Tensor ReLU::forward(Context& ctx, Tensor x, const ForwardMode& mode) {
  Tensor y = writable_in_place(x) ? x : detail::activation(ctx, x.shape(), x.dtype());
  ops::relu_forward(ctx, x, y);
  y_ = mode.training ? y : Tensor();
  return y;
}

Tensor ReLU::backward(Context& ctx, Tensor dy, InputGradient input_gradient) {
  detail::require_saved(y_.defined(), "ReLU");
  Tensor dx;
  if (input_gradient == InputGradient::kCompute) {
    dx = writable_in_place(dy) ? dy : detail::activation(ctx, dy.shape(), dy.dtype());
    ops::relu_backward(ctx, y_, dy, dx);
  }
  y_.reset();
  return dx;
}

// ---- MaxPool2D ----------------------------------------------------------------------------

std::string MaxPool2D::describe() const {
  return "MaxPool2D " + std::to_string(window_.kernel_h) + "x" + std::to_string(window_.kernel_w) + "/" +
         std::to_string(window_.stride_h);
}

Shape MaxPool2D::output_shape(const Shape& input) const { return Pool2dShape::make(input, window_).output(); }

Tensor MaxPool2D::forward(Context& ctx, Tensor x, const ForwardMode& mode) {
  const Pool2dShape s = Pool2dShape::make(x.shape(), window_);
  Tensor y = detail::activation(ctx, s.output(), x.dtype());
  ops::maxpool2d_forward(ctx, s, x, y);
  x_ = mode.training ? std::move(x) : Tensor();
  return y;
}

Tensor MaxPool2D::backward(Context& ctx, Tensor dy, InputGradient input_gradient) {
  detail::require_saved(x_.defined(), "MaxPool2D");
  Tensor dx;
  if (input_gradient == InputGradient::kCompute) {
    const Pool2dShape s = Pool2dShape::make(x_.shape(), window_);
    dx = detail::activation(ctx, x_.shape(), x_.dtype());
    ops::maxpool2d_backward(ctx, s, x_, dy, dx);
  }
  x_.reset();
  return dx;
}

// ---- GlobalAvgPool ------------------------------------------------------------------------

Shape GlobalAvgPool::output_shape(const Shape& input) const {
  if (input.rank() != 4) detail::layer_error("GlobalAvgPool", "expects (N, C, H, W), got " + input.to_string());
  return {input[0], input[1]};
}

Tensor GlobalAvgPool::forward(Context& ctx, Tensor x, const ForwardMode& mode) {
  Tensor y = detail::activation(ctx, output_shape(x.shape()), x.dtype());
  ops::global_avg_pool_forward(ctx, x, y);
  input_shape_ = mode.training ? x.shape() : Shape{};
  return y;
}

Tensor GlobalAvgPool::backward(Context& ctx, Tensor dy, InputGradient input_gradient) {
  detail::require_saved(input_shape_.rank() == 4, "GlobalAvgPool");
  Tensor dx;
  if (input_gradient == InputGradient::kCompute) {
    dx = detail::activation(ctx, input_shape_, dy.dtype());
    ops::global_avg_pool_backward(ctx, dy, dx);
  }
  input_shape_ = {};
  return dx;
}

// ---- Dropout ------------------------------------------------------------------------------

Dropout::Dropout(float rate, std::uint64_t key) {
  if (!(rate >= 0.0f && rate < 1.0f)) detail::layer_error("Dropout", "rate must be in [0, 1), got " + std::to_string(rate));
  mask_.rate = rate;
  mask_.key = key;
}

std::string Dropout::describe() const { return "Dropout " + std::to_string(mask_.rate).substr(0, 4); }

void Dropout::initialize(Context& ctx, std::uint64_t key) {
  (void)ctx;
  mask_.key = key;
}

Tensor Dropout::forward(Context& ctx, Tensor x, const ForwardMode& mode) {
  if (!mode.training || mask_.rate == 0.0f) {
    pending_ = mode.training;
    return x;
  }
  mask_.step = mode.step;
  mask_.offset = mode.sample_offset * static_cast<std::uint64_t>(x.elements() / std::max<std::int64_t>(x.dim(0), 1));
  Tensor y = writable_in_place(x) ? x : detail::activation(ctx, x.shape(), x.dtype());
  ops::dropout_forward(ctx, mask_, x, y);
  pending_ = true;
  return y;
}

Tensor Dropout::backward(Context& ctx, Tensor dy, InputGradient input_gradient) {
  detail::require_saved(pending_, "Dropout");
  pending_ = false;
  if (input_gradient == InputGradient::kSkip) return Tensor();
  if (mask_.rate == 0.0f) return dy;
  Tensor dx = writable_in_place(dy) ? dy : detail::activation(ctx, dy.shape(), dy.dtype());
  ops::dropout_backward(ctx, mask_, dy, dx);
  return dx;
}

// ---- Flatten ------------------------------------------------------------------------------

Shape Flatten::output_shape(const Shape& input) const {
  if (input.rank() < 2) detail::layer_error("Flatten", "expects (N, ...), got " + input.to_string());
  return {input[0], input.elements() / std::max<std::int64_t>(input[0], 1)};
}

Tensor Flatten::forward(Context& ctx, Tensor x, const ForwardMode& mode) {
  (void)ctx;
  const Shape out = output_shape(x.shape());
  input_shape_ = mode.training ? x.shape() : Shape{};
  return x.reshaped(out);
}

Tensor Flatten::backward(Context& ctx, Tensor dy, InputGradient input_gradient) {
  (void)ctx;
  detail::require_saved(input_shape_.rank() >= 2, "Flatten");
  const Shape in = input_shape_;
  input_shape_ = {};
  return input_gradient == InputGradient::kCompute ? dy.reshaped(in) : Tensor();
}

}  // namespace sluice::train
