// What the layers' implementations share: argument checks with the layer's name in the message,
// and the activations and input gradients their forwards and backwards allocate.
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

// A new activation (or activation gradient) of `shape`, x's dtype.
inline Tensor activation(Context& ctx, const Shape& shape, DType dtype) {
  return ctx.empty(shape, dtype, TensorCategory::kActivations);
}

// The gradient with respect to a layer's input x (x's shape and dtype), or an undefined tensor
// when the caller skips it.
inline Tensor input_gradient(Context& ctx, const Tensor& x, InputGradient wanted) {
  return wanted == InputGradient::kCompute ? activation(ctx, x.shape(), x.dtype()) : Tensor();
}

// The ops take an optional output as a pointer: null for an undefined tensor.
inline Tensor* defined_or_null(Tensor& t) { return t.defined() ? &t : nullptr; }

}  // namespace sluice::train::detail
