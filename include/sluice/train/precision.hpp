// Mixed precision: the training step's forward and backward in 16-bit (f16 or bf16) with f32
// master weights (what the optimizer updates and checkpoints save), as torch.cuda.amp does.
//
//  - Precision names the mode (`sluice train --precision f32 | mixed_f16 | mixed_bf16`).
//  - LossScaler is the dynamic loss scale of f16 as a plain state machine: start at 2^16, x2
//    after `growth_interval` (2000) finite steps in a row, x0.5 and the step skipped on an inf or
//    a NaN in any gradient. bf16 has f32's exponent range and runs without it.
//  - MixedPrecision is what the Trainer runs around its step: it gives the model's layers 16-bit
//    copies of their weights (Layer::set_compute_dtype; the copies are category weights, their
//    16-bit gradients category gradients), casts the masters into them before each forward,
//    casts the input batch to 16-bit once (an activation, as every 16-bit activation after it),
//    scales the f32 gradient of the loss into 16-bit for backward, and after it unscales the
//    gradients into the f32 master gradients (ops::scale_cast) and checks them (ops::
//    find_nonfinite) before the optimizer may step. Loss and softmax stay f32 (the logits are
//    cast up); BatchNorm's gamma, beta and statistics stay f32.
//
// A skipped step leaves the master weights, the BatchNorm running statistics (restored from a
// copy taken before the forward) and the optimizer's state as they were.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "sluice/core/dtype.hpp"
#include "sluice/train/context.hpp"
#include "sluice/train/layer.hpp"
#include "sluice/train/tensor.hpp"

namespace sluice::train {

class Sequential;

enum class Precision : std::uint8_t { kF32, kMixedF16, kMixedBF16 };

// "f32", "mixed_f16", "mixed_bf16".
std::string_view to_string(Precision p);
// The inverse of to_string; anything else throws sluice::Error(kInvalidArgument) listing the
// known names.
Precision parse_precision(std::string_view text);
// The dtype forward and backward compute in: f32, f16 or bf16.
DType compute_dtype(Precision p);

struct LossScalerOptions {
  float initial_scale = 65536.0f;      // 2^16
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  std::int64_t growth_interval = 2000;  // finite steps in a row before the scale grows
};

// The dynamic loss scale (torch.cuda.amp.GradScaler's rule). Host-only state.
class LossScaler {
 public:
  // Throws sluice::Error(kInvalidArgument) for a non-positive scale or interval, a growth factor
  // not above 1 or a backoff factor not in (0, 1).
  explicit LossScaler(LossScalerOptions options = {});

  float scale() const { return scale_; }
  // Records a step whose gradients were all finite (true) or not. Returns whether the step is
  // to be applied: false skips it and halves the scale; the growth_interval-th finite step in a
  // row doubles it.
  bool update(bool finite);

  std::int64_t skipped_steps() const { return skipped_; }
  std::int64_t growth_events() const { return growths_; }
  std::int64_t finite_streak() const { return streak_; }  // finite steps since the last change
  const LossScalerOptions& options() const { return options_; }

 private:
  LossScalerOptions options_;
  float scale_;
  std::int64_t streak_ = 0;
  std::int64_t skipped_ = 0;
  std::int64_t growths_ = 0;
};

// What a mixed-precision run reports (per epoch and in --json).
struct PrecisionStats {
  Precision precision = Precision::kF32;
  float loss_scale = 1.0f;           // 1 when no scaling (f32, bf16)
  std::int64_t skipped_steps = 0;
  std::int64_t growth_events = 0;
};

// What a pass over a batch does: a training step (forward, backward, update) or an evaluation
// (an inference forward only).
enum class StepKind : std::uint8_t { kTraining, kEvaluation };

class MixedPrecision {
 public:
  // Gives every layer of `model` its 16-bit weight copies (none for Precision::kF32, where every
  // method below is the identity). The context and the model must outlive it.
  MixedPrecision(Context& ctx, Sequential& model, Precision precision, LossScalerOptions options = {});
  ~MixedPrecision();
  MixedPrecision(const MixedPrecision&) = delete;
  MixedPrecision& operator=(const MixedPrecision&) = delete;

  Precision precision() const { return precision_; }
  DType compute_dtype() const { return dtype_; }
  bool enabled() const { return precision_ != Precision::kF32; }
  bool scaling() const { return precision_ == Precision::kMixedF16; }

  // Before a step's forwards (all its micro-batches) or an evaluation's: casts the master weights
  // into their 16-bit copies. For a training step (f16), also copies the model's buffers
  // (BatchNorm's running statistics) so a skipped step can put them back.
  void begin_step(StepKind kind);
  // x (an f32 batch) cast to the compute dtype, a new activation; x itself in f32.
  Tensor cast_input(const Tensor& x);
  // The logits as f32 for the loss (a new activation; the 16-bit one is left to the caller).
  Tensor logits_f32(Tensor logits);
  // dlogits (f32) times the loss scale, in the compute dtype: the gradient backward starts from.
  Tensor scale_loss_gradient(Tensor dlogits);
  // After backward: every master gradient = its 16-bit gradient / scale (in place for f32
  // gradients such as BatchNorm's), checked for inf and NaN, and the scaler updated. Returns
  // whether the optimizer is to step; false (f16 only) restores the buffers copied by
  // begin_step. Once per step: gradients accumulated over micro-batches (in 16-bit) are unscaled
  // and checked together.
  bool finish_backward();

  const LossScaler& scaler() const { return scaler_; }
  PrecisionStats stats() const;

 private:
  Context& ctx_;
  Sequential& model_;
  Precision precision_;
  DType dtype_;
  LossScaler scaler_;
  std::vector<Parameter> params_;
  std::vector<Buffer> buffers_;
  std::vector<Tensor> buffer_copies_;  // category weights: a skipped step's restore point
  Tensor flag_;                         // f32 (1) on the device: 1 when a gradient was not finite
};

}  // namespace sluice::train
