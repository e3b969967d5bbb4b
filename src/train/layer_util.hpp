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

// Mixed precision: the 16-bit copy of a parameter and its 16-bit gradient (Layer::
// set_compute_dtype), both undefined for an undefined parameter or f32.
inline void make_compute_copy(Context& ctx, const Tensor& master, DType dtype, Tensor& value, Tensor& grad) {
  value.reset();
  grad.reset();
  if (!master.defined() || dtype == DType::kF32) return;
  value = ctx.empty(master.shape(), dtype, TensorCategory::kWeights);
  grad = ctx.zeros(master.shape(), dtype, TensorCategory::kGradients);
}

// The tensor a call on activations of `dtype` computes with: the 16-bit copy when it is of that
// dtype, else the f32 master (its gradient likewise).
inline Tensor& compute_tensor(Tensor& master, Tensor& copy, DType dtype) {
  return copy.defined() && copy.dtype() == dtype ? copy : master;
}
// The same for an optional parameter (a bias): null when it is undefined.
inline Tensor* compute_tensor_or_null(Tensor& master, Tensor& copy, DType dtype) {
  return master.defined() ? &compute_tensor(master, copy, dtype) : nullptr;
}

// add_parameter with the parameter's 16-bit copy and its gradient (defined in mixed precision).
inline void add_parameter(std::vector<Parameter>& out, const std::string& name, Tensor& value, Tensor& grad,
                          bool decay, Tensor& compute, Tensor& compute_grad) {
  if (!value.defined()) return;
  out.push_back(Parameter{name, &value, &grad, decay, compute.defined() ? &compute : nullptr,
                          compute_grad.defined() ? &compute_grad : nullptr});
}

// A new activation (or activation gradient) of `shape`, x's dtype.
inline Tensor activation(Context& ctx, const Shape& shape, DType dtype) {
  return ctx.empty(shape, dtype, TensorCategory::kActivations);
}

}  // namespace sluice::train::detail
