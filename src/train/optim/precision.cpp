// Mixed precision: the precision names, the dynamic loss scale, and the casts and checks the
// Trainer runs around a 16-bit step.
#include "sluice/train/precision.hpp"

#include <string>

#include "sluice/core/error.hpp"
#include "sluice/train/ops.hpp"
#include "sluice/train/sequential.hpp"

namespace sluice::train {

std::string_view to_string(Precision p) {
  switch (p) {
    case Precision::kF32: return "f32";
    case Precision::kMixedF16: return "mixed_f16";
    case Precision::kMixedBF16: return "mixed_bf16";
  }
  return "f32";
}

Precision parse_precision(std::string_view text) {
  for (Precision p : {Precision::kF32, Precision::kMixedF16, Precision::kMixedBF16}) {
    if (text == to_string(p)) return p;
  }
  throw Error(ErrorCode::kInvalidArgument,
              "unknown precision \"" + std::string(text) + "\"; known: f32, mixed_f16, mixed_bf16");
}

DType compute_dtype(Precision p) {
  switch (p) {
    case Precision::kMixedF16: return DType::kF16;
    case Precision::kMixedBF16: return DType::kBF16;
    case Precision::kF32: break;
  }
  return DType::kF32;
}

// ---- LossScaler ------------------------------------------------------------------------------

LossScaler::LossScaler(LossScalerOptions options) : options_(options), scale_(options.initial_scale) {
  if (!(options.initial_scale > 0.0f) || options.growth_interval < 1 || !(options.growth_factor > 1.0f) ||
      !(options.backoff_factor > 0.0f && options.backoff_factor < 1.0f)) {
    throw Error(ErrorCode::kInvalidArgument,
                "LossScaler: needs initial scale > 0, growth interval >= 1, growth factor > 1 and backoff "
                "factor in (0, 1)");
  }
}

bool LossScaler::update(bool finite) {
  if (!finite) {
    scale_ *= options_.backoff_factor;
    streak_ = 0;
    ++skipped_;
    return false;
  }
  if (++streak_ == options_.growth_interval) {
    scale_ *= options_.growth_factor;
    streak_ = 0;
    ++growths_;
  }
  return true;
}

// ---- MixedPrecision --------------------------------------------------------------------------

MixedPrecision::MixedPrecision(Context& ctx, Sequential& model, Precision precision, LossScalerOptions options)
    : ctx_(ctx), model_(model), precision_(precision), dtype_(train::compute_dtype(precision)), scaler_(options) {
  for (std::size_t i = 0; i < model_.size(); ++i) model_.layer(i).set_compute_dtype(ctx_, dtype_);
  if (!enabled()) return;
  params_ = model_.parameters();
  if (!scaling()) return;
  buffers_ = model_.buffers();
  for (const Buffer& b : buffers_) {
    buffer_copies_.push_back(ctx_.empty(b.value->shape(), b.value->dtype(), TensorCategory::kWeights));
  }
  flag_ = ctx_.empty({1}, DType::kF32, TensorCategory::kWorkspace);
}

MixedPrecision::~MixedPrecision() {
  // The layers go back to f32, so a model that outlives its trainer holds no 16-bit copies.
  try {
    for (std::size_t i = 0; i < model_.size(); ++i) model_.layer(i).set_compute_dtype(ctx_, DType::kF32);
  } catch (...) {  // dropping tensors does not throw; nothing to report from a destructor
  }
}

void MixedPrecision::begin_step(StepKind kind) {
  if (!enabled()) return;
  for (const Parameter& p : params_) {
    if (p.compute != nullptr) ops::cast(ctx_, *p.value, *p.compute);
  }
  if (kind == StepKind::kTraining && scaling()) {
    for (std::size_t i = 0; i < buffers_.size(); ++i) ops::cast(ctx_, *buffers_[i].value, buffer_copies_[i]);
  }
}

Tensor MixedPrecision::cast_input(const Tensor& x) {
  if (!enabled()) return x;
  Tensor x16 = ctx_.empty(x.shape(), dtype_, TensorCategory::kActivations);
  ops::cast(ctx_, x, x16);
  return x16;
}

Tensor MixedPrecision::logits_f32(Tensor logits) {
  if (logits.dtype() == DType::kF32) return logits;
  Tensor out = ctx_.empty(logits.shape(), DType::kF32, TensorCategory::kActivations);
  ops::cast(ctx_, logits, out);
  return out;
}

Tensor MixedPrecision::scale_loss_gradient(Tensor dlogits) {
  if (!enabled()) return dlogits;
  Tensor out = ctx_.empty(dlogits.shape(), dtype_, TensorCategory::kActivations);
  ops::scale_cast(ctx_, dlogits, scaling() ? scaler_.scale() : 1.0f, out);
  return out;
}

bool MixedPrecision::finish_backward() {
  if (!enabled()) return true;
  const float inv_scale = scaling() ? 1.0f / scaler_.scale() : 1.0f;
  if (scaling()) ops::fill(ctx_, flag_, 0.0f);
  for (const Parameter& p : params_) {
    // The 16-bit gradient into the f32 master gradient; an f32 gradient (BatchNorm's) in place.
    const Tensor& g = p.compute_grad != nullptr ? *p.compute_grad : *p.grad;
    if (p.compute_grad != nullptr || scaling()) ops::scale_cast(ctx_, g, inv_scale, *p.grad);
    if (scaling()) ops::find_nonfinite(ctx_, *p.grad, flag_);
  }
  if (!scaling()) return true;
  float found = 0.0f;
  ops::copy_to_host(ctx_, flag_, &found);
  const bool apply = scaler_.update(found == 0.0f);
  if (!apply) {
    for (std::size_t i = 0; i < buffers_.size(); ++i) ops::cast(ctx_, buffer_copies_[i], *buffers_[i].value);
  }
  return apply;
}

PrecisionStats MixedPrecision::stats() const {
  return {.precision = precision_,
          .loss_scale = scaling() ? scaler_.scale() : 1.0f,
          .skipped_steps = scaler_.skipped_steps(),
          .growth_events = scaler_.growth_events()};
}

}  // namespace sluice::train
