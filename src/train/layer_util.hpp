// What the layers' implementations share: argument checks with the layer's name in the message,
// and the parameter-tensor pairs (value and gradient) every trainable layer allocates.
#pragma once

#include <string>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/train/layer.hpp"

namespace sluice::train::detail {

[[noreturn]] inline void layer_error(const std::string& layer, const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, layer + ": " + what);
}

// backward() without the training forward it needs.
inline void require_saved(bool saved, const std::string& layer) {
  if (!saved) layer_error(layer, "backward without a training forward before it");
}

inline void require_positive(std::int64_t v, const std::string& layer, const char* what) {
  if (v < 1) layer_error(layer, std::string(what) + " must be >= 1, got " + std::to_string(v));
}

// A parameter and its gradient, both f32 and zero: the gradient of a layer whose backward never
// ran is zero rather than garbage, so an optimizer step is harmless.
inline void make_parameter(Context& ctx, const Shape& shape, Tensor& value, Tensor& grad) {
  value = ctx.zeros(shape, DType::kF32, TensorCategory::kWeights);
  grad = ctx.zeros(shape, DType::kF32, TensorCategory::kGradients);
}

inline void add_parameter(std::vector<Parameter>& out, const std::string& name, Tensor& value, Tensor& grad,
                          bool decay) {
  if (value.defined()) out.push_back(Parameter{name, &value, &grad, decay});
}

// A new activation (or activation gradient) of `shape`, x's dtype.
inline Tensor activation(Context& ctx, const Shape& shape, DType dtype) {
  return ctx.empty(shape, dtype, TensorCategory::kActivations);
}

}  // namespace sluice::train::detail
