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

// Whether the optimizer's weight decay applies to a parameter: to weights, never to biases nor
// to BatchNorm's gamma and beta (decaying an offset or a scale only pulls the model off its
// normalisation, the exemption PyTorch's and TF's recipes make).
enum class WeightDecay : std::uint8_t { kApply, kExempt };

// A trainable tensor and its gradient, as optimizers and checkpoints see it: a view of a Param
// (below) under the name its model gives it.
struct Parameter {
  std::string name;         // "3.weight": the layer's index in the model, then the tensor's role
  Tensor* value = nullptr;  // category weights, f32
  Tensor* grad = nullptr;   // category gradients, value's shape; written by backward
  WeightDecay decay = WeightDecay::kApply;
  // Mixed precision (sluice/train/precision.hpp): the 16-bit copy of value that the ops compute
  // with (category weights) and its 16-bit gradient (category gradients), written by backward in
  // place of grad; null where the layer computes on value itself (f32, and BatchNorm's gamma and
  // beta, f32 always).
  Tensor* compute = nullptr;
  Tensor* compute_grad = nullptr;
};

// A parameter as its layer holds it: the f32 value and gradient, the 16-bit copies mixed
// precision computes with, and whether weight decay applies. Default-constructed it is
// undefined: an optional parameter that is switched off (a bias a BatchNorm makes redundant).
struct Param {
  Tensor value;         // f32, category weights
  Tensor grad;          // f32, category gradients
  Tensor value16;       // mixed precision: value in the compute dtype (category weights)
  Tensor grad16;        // and its gradient (category gradients); both undefined in f32
  WeightDecay decay = WeightDecay::kApply;

  Param() = default;
  // Value and gradient of `shape`, f32 and zero: the gradient of a layer whose backward never
  // ran is zero rather than garbage, so an optimizer step is harmless.
  Param(Context& ctx, const Shape& shape, WeightDecay decay);

  bool defined() const { return value.defined(); }

  // The tensors a call on activations of `dtype` computes with: the 16-bit copy when it is of
  // that dtype, else the f32 master.
  Tensor& value_for(DType dtype) { return value16.defined() && value16.dtype() == dtype ? value16 : value; }
  Tensor& grad_for(DType dtype) { return grad16.defined() && grad16.dtype() == dtype ? grad16 : grad; }
  // The same for an optional parameter: null when it is undefined.
  Tensor* value_or_null(DType dtype) { return defined() ? &value_for(dtype) : nullptr; }
  Tensor* grad_or_null(DType dtype) { return defined() ? &grad_for(dtype) : nullptr; }

  // Mixed precision: 16-bit copies of `dtype` (f16, bf16) for a defined parameter; kF32 drops
  // them. Who casts value into value16, and grad16 back, is the caller's (MixedPrecision).
  void set_compute_dtype(Context& ctx, DType dtype);
  // Appends the view of this parameter named `name` to `out`; nothing when it is undefined.
  void append_to(std::vector<Parameter>& out, std::string name);
};

// A tensor that is saved with the weights but not trained (BatchNorm's running statistics).
struct Buffer {
  std::string name;
  Tensor* value = nullptr;
};

// Whether backward computes the gradient with respect to the layer's input.
enum class InputGradient : std::uint8_t { kCompute, kSkip };

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
  // the parameter gradients and returns dx, or an undefined tensor for InputGradient::kSkip (the
  // model's first layer, whose input is the batch). Releases what forward kept. dy may be
  // consumed (a ReLU writes dx over it when no one else holds it). Throws
  // sluice::Error(kInvalidArgument) without a training forward before it.
  virtual Tensor backward(Context& ctx, Tensor dy, InputGradient input_gradient) = 0;

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
