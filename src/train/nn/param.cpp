// Param: a layer's trainable tensor with its gradient and its mixed-precision copies, and the
// Parameter view of it that optimizers, checkpoints and pruning take.
#include <utility>

#include "sluice/train/layer.hpp"

namespace sluice::train {

Param::Param(Context& ctx, const Shape& shape, WeightDecay decay)
    : value(ctx.zeros(shape, DType::kF32, TensorCategory::kWeights)),
      grad(ctx.zeros(shape, DType::kF32, TensorCategory::kGradients)),
      decay(decay) {}

void Param::set_compute_dtype(Context& ctx, DType dtype) {
  value16.reset();
  grad16.reset();
  if (!defined() || dtype == DType::kF32) return;
  value16 = ctx.empty(value.shape(), dtype, TensorCategory::kWeights);
  // Zero for the reason grad is (the constructor's comment in layer.hpp).
  grad16 = ctx.zeros(value.shape(), dtype, TensorCategory::kGradients);
}

void Param::append_to(std::vector<Parameter>& out, std::string name) {
  if (!defined()) return;
  out.push_back(Parameter{.name = std::move(name), .value = &value, .grad = &grad, .decay = decay,
                          .compute = value16.defined() ? &value16 : nullptr,
                          .compute_grad = grad16.defined() ? &grad16 : nullptr});
}

}  // namespace sluice::train
