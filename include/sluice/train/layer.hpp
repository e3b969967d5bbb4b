// Layer: one stage of a Sequential model (sluice/train/sequential.hpp). A layer owns its
// parameters and their gradients (categories weights and gradients, from the context's
// allocator), runs forward and backward through the ops (sluice/train/ops.hpp), and keeps between
// a training forward and its backward only what that backward needs (category activations: a
// convolution its input, a ReLU its output, a BatchNorm its input and batch statistics). An
// inference forward keeps nothing, so evaluation holds one activation at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sluice/core/shape.hpp"
#include "sluice/train/context.hpp"
#include "sluice/train/ops.hpp"
#include "sluice/train/tensor.hpp"

namespace sluice::train {

// A trainable tensor and its gradient, as optimizers and checkpoints see it.
struct Parameter {
  std::string name;         // "3.weight": the layer's index in the model, then the tensor's role
  Tensor* value = nullptr;  // category weights, f32
  Tensor* grad = nullptr;   // category gradients, value's shape; written by backward
  bool decay = true;        // weight decay applies (false for biases and BatchNorm's gamma, beta)
  // Mixed precision (sluice/train/precision.hpp): the 16-bit copy of value that the ops compute
  // with (category weights) and its 16-bit gradient (category gradients), written by backward in
  // place of grad; null where the layer computes on value itself (f32, and BatchNorm's gamma and
  // beta, f32 always).
  Tensor* compute = nullptr;
  Tensor* compute_grad = nullptr;
};

// A tensor that is saved with the weights but not trained (BatchNorm's running statistics).
struct Buffer {
  std::string name;
  Tensor* value = nullptr;
};

struct ForwardMode {
  bool training = false;    // batch statistics, dropout on, keep what backward needs
  std::uint64_t step = 0;   // the training step: keys dropout's mask
  // The index of x's first sample in the step's batch: a micro-batch of gradient accumulation
  // starts after the ones before it, so dropout draws the full batch's mask (DropoutMask::offset).
  std::uint64_t sample_offset = 0;
  // A forward run again in backward (gradient checkpointing): BatchNorm does not fold its batch
  // statistics into the running averages a second time.
  bool recompute = false;
};

class Layer {
 public:
  virtual ~Layer() = default;

  // "Conv2D 3x3/1 pad 1, 32 -> 64": for summaries.
  virtual std::string describe() const = 0;
  // The output shape for an input batch shape (N, ...). Throws sluice::Error(kInvalidArgument)
  // naming the mismatch when the layer cannot take that input.
  virtual Shape output_shape(const Shape& input) const = 0;

  // Sets the parameters to their initial values (He normal weights, zero biases, BatchNorm
  // gamma 1 and beta 0), as a pure function of `key`. Layers without parameters do nothing.
  virtual void initialize(Context& ctx, std::uint64_t key) { (void)ctx, (void)key; }

  // y = layer(x). A training forward keeps what backward needs until backward runs. x is taken
  // by value: handed over as the only reference to an activation (std::move, as Sequential
  // does), a ReLU or Dropout writes y over it; a caller that keeps its copy keeps its values.
  virtual Tensor forward(Context& ctx, Tensor x, const ForwardMode& mode) = 0;
  // From dy, the gradient of the loss with respect to the last training forward's output: writes
  // the parameter gradients and returns dx (an undefined tensor when `need_dx` is false: the
  // model's first layer). Releases what forward kept. dy may be consumed (a ReLU writes dx over
  // it when no one else holds it). Throws sluice::Error(kInvalidArgument) without a training
  // forward before it.
  virtual Tensor backward(Context& ctx, Tensor dy, bool need_dx) = 0;

  // Appends this layer's parameters and buffers, names prefixed with `prefix` ("3.").
  virtual void parameters(const std::string& prefix, std::vector<Parameter>& out) {
    (void)prefix, (void)out;
  }
  virtual void buffers(const std::string& prefix, std::vector<Buffer>& out) { (void)prefix, (void)out; }

  // Drops what a training forward kept (a step abandoned before its backward).
  virtual void release_saved() {}

  // Mixed precision: the layer keeps copies of its weights in `dtype` (f16 or bf16) and
  // gradients of that dtype for them, and computes with them whenever its input is of that dtype
  // (with the f32 weights on an f32 input); kF32 drops the copies. Who casts the f32 weights into
  // the copies, and the gradients back, is the caller's (MixedPrecision). Layers without
  // parameters, and BatchNorm (f32 parameters at every activation dtype), have none to keep.
  virtual void set_compute_dtype(Context& ctx, DType dtype) { (void)ctx, (void)dtype; }

  // How backward writes the parameter gradients: overwrite them (the default) or add to them
  // (gradient accumulation; Sequential::backward sets it on every layer).
  void set_grad_mode(GradMode mode) { grad_mode_ = mode; }
  GradMode grad_mode() const { return grad_mode_; }

 private:
  GradMode grad_mode_ = GradMode::kOverwrite;
};

}  // namespace sluice::train
