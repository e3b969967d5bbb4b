// Trainer: the training loop's step, fed directly by batches from any source as core types (a
// TensorView (N, C, H, W) f32 and the labels), so a sluice Loader's batches go in without a copy
// on the host: the loader prepares the next batches on its own threads while a step runs, and
// the caller only pulls the next one (sluice/train/epoch_runner.hpp). Batches already on the
// context's device are used in place; host batches for a CUDA context are copied into one reused
// device buffer.
//
// Each step: forward in training mode, softmax cross-entropy, backward, one optimizer update
// (with the learning rate from the schedule when one is set). evaluate() runs an inference
// forward and counts correct predictions. With TrainerOptions::precision mixed_f16 or mixed_bf16
// both run in 16-bit on f32 master weights (sluice/train/precision.hpp), and an f16 step whose
// gradients overflow is skipped. Memory comes from the context's allocator, whose
// statistics (memory()) say per category what the step held at its peak.
//
// Gradient accumulation (TrainerOptions::accumulate = K): a step runs K micro-batches of N / K
// (K must divide the batch), each forward, loss and backward, its loss gradient scaled by 1 / K
// and its parameter gradients added to the previous micro-batches' (GradMode::kAccumulate), then
// one optimizer update: the gradient is the full batch's mean gradient, while activations are
// held for N / K images only. The learning-rate schedule counts optimizer steps; the step's
// BatchResult covers the whole batch. Dropout: micro-batch j passes its first sample's index in
// the batch (ForwardMode::sample_offset), so the micro-batches together draw exactly the full
// batch's masks: distinct masks per micro-batch, and the same step as without accumulation.
// BatchNorm: each micro-batch is normalised with its own batch statistics and folds them into
// the running averages (K updates per step), as PyTorch does with accumulation; so the
// accumulated step equals the full-batch step (up to summation order) only for models without
// BatchNorm in training mode.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "sluice/core/device_id.hpp"
#include "sluice/core/shape.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/context.hpp"
#include "sluice/train/optimizer.hpp"
#include "sluice/train/precision.hpp"
#include "sluice/train/sequential.hpp"

namespace sluice::train {

struct BatchResult {
  double loss_sum = 0.0;      // the batch's mean loss times its size
  std::int64_t correct = 0;
  std::int64_t images = 0;

  BatchResult& operator+=(const BatchResult& o) {
    loss_sum += o.loss_sum;
    correct += o.correct;
    images += o.images;
    return *this;
  }
  double mean_loss() const { return images > 0 ? loss_sum / static_cast<double>(images) : 0.0; }
  double accuracy() const { return images > 0 ? static_cast<double>(correct) / static_cast<double>(images) : 0.0; }
};

class Profiler;

struct TrainerOptions {
  std::optional<CosineSchedule> schedule;  // none: the optimizer's learning rate throughout
  int accumulate = 1;  // micro-batches per optimizer step (>= 1; must divide every batch)
  // Marks "forward", "backward" and "optimizer" slices of each step in the trace (none: no cost).
  Profiler* profiler = nullptr;
  // Mixed precision (sluice/train/precision.hpp): 16-bit forward and backward, f32 master weights;
  // f16 with the dynamic loss scale of `loss_scaling`.
  Precision precision = Precision::kF32;
  LossScalerOptions loss_scaling;
};

class Trainer {
 public:
  // The model, the optimizer and the context must outlive the trainer. Throws
  // sluice::Error(kInvalidArgument) when options.accumulate < 1.
  Trainer(Context& ctx, Sequential& model, Optimizer& optimizer, TrainerOptions options = {});

  // One training step on `data` (N, C, H, W) f32 with `labels` (N values in [0, classes)), both in
  // memory of `where` (host, or the context's device). A batch on the device comes with the
  // event its producer recorded after writing it (`ready_event`, a cudaEvent_t: a sluice
  // Batch's ready_event()): the step's ops wait for it on the device, so the batch may still be
  // in flight on another stream when the call is made. Throws sluice::Error(kInvalidArgument)
  // when the batch does not fit the model, sits on another device, or does not split into
  // options.accumulate micro-batches of equal size.
  BatchResult step(const TensorView& data, std::span<const std::int32_t> labels, DeviceId where = host(),
                   void* ready_event = nullptr);
  // Loss and correct predictions with the running statistics and no dropout; no update.
  BatchResult evaluate(const TensorView& data, std::span<const std::int32_t> labels, DeviceId where = host(),
                       void* ready_event = nullptr);

  std::int64_t steps() const { return steps_; }
  int accumulate() const { return options_.accumulate; }
  float learning_rate() const { return optimizer_.learning_rate(); }
  AllocatorStats memory() const { return ctx_.allocator().stats(); }
  // The loss scale and the steps skipped for an inf or NaN gradient (f16), as of now.
  PrecisionStats precision_stats() const { return mixed_->stats(); }

 private:
  // The batch as tensors on the context's device: wrapped in place, or copied.
  struct Input {
    Tensor x;
    Tensor labels;
  };
  Input input(const TensorView& data, std::span<const std::int32_t> labels, DeviceId where, void* ready_event);

  Context& ctx_;
  Sequential& model_;
  Optimizer& optimizer_;
  TrainerOptions options_;
  std::vector<Parameter> params_;
  std::int64_t steps_ = 0;
  Tensor staged_x_, staged_labels_;  // host batches copied to a device context
  std::unique_ptr<MixedPrecision> mixed_;  // the identity in f32
};

}  // namespace sluice::train
