// Sequential: a model as a list of layers, each feeding the next (torch.nn.Sequential). Forward
// runs the layers in order; backward runs them in reverse from the gradient of the logits,
// writing every parameter's gradient; parameters() lists them for an optimizer and a checkpoint,
// in layer order with stable names ("3.weight").
//
// Gradient checkpointing (set_checkpointing, sluice/train/gradient_checkpointing.hpp): a training
// forward keeps only the input of each segment of layers (the last segment's activations as
// usual), and backward runs each earlier segment's forward again (training mode, the same step
// and sample offset, so the same dropout masks; BatchNorm does not update its running statistics
// the second time) before backpropagating through it. Gradients and running statistics are
// bit-identical to a run without checkpointing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sluice/core/shape.hpp"
#include "sluice/train/gradient_checkpointing.hpp"
#include "sluice/train/layer.hpp"

namespace sluice::train {

class Sequential {
 public:
  // `input` is the shape of one sample, (C, H, W) or (features): the model checks each layer
  // against it as it is added.
  explicit Sequential(Shape input);

  // Appends a layer constructed from `args`, checking that it takes the previous layer's output
  // (throws sluice::Error(kInvalidArgument) naming the layer when not).
  template <class L, class... Args>
  L& add(Args&&... args) {
    auto layer = std::make_unique<L>(std::forward<Args>(args)...);
    L& ref = *layer;
    append(std::move(layer));
    return ref;
  }
  void append(std::unique_ptr<Layer> layer);

  // Every layer's parameters (and buffers) set as Layer::initialize says, layer i keyed on
  // derive_key(seed, i): the same seed, the same model, on any device.
  void initialize(Context& ctx, std::uint64_t seed);

  // Logits for x (N, C, H, W). A training forward keeps what backward needs.
  Tensor forward(Context& ctx, const Tensor& x, const ForwardMode& mode);
  // From the gradient of the loss with respect to the logits of the last training forward: every
  // parameter's gradient, written over the previous values or, with GradMode::kAccumulate, added
  // to them (gradient accumulation). No input gradient is computed for the first layer.
  void backward(Context& ctx, Tensor dlogits, GradMode mode = GradMode::kOverwrite);
  // Drops what a training forward kept (a step abandoned before its backward).
  void release_saved();

  // Gradient checkpointing for the training forwards from now on (none by default).
  void set_checkpointing(CheckpointPolicy policy) { checkpoint_ = policy; }
  const CheckpointPolicy& checkpointing() const { return checkpoint_; }

  std::vector<Parameter> parameters();
  std::vector<Buffer> buffers();
  std::int64_t parameter_count();

  std::size_t size() const { return layers_.size(); }
  Layer& layer(std::size_t i) { return *layers_[i]; }
  const Shape& input_shape() const { return input_; }    // one sample
  Shape output_shape(std::int64_t batch) const;           // (batch, classes)

  // One line a layer: its description and output shape for a batch of `batch`.
  std::string summary(std::int64_t batch = 1) const;

 private:
  Shape batch_shape(std::int64_t batch) const;

  Shape input_;
  std::vector<std::unique_ptr<Layer>> layers_;
  CheckpointPolicy checkpoint_;
  // The last training forward's checkpoints: the inputs of the segments before the last one
  // (segment i starts at layer i * segment_), and its mode, which the recomputation repeats.
  std::vector<Tensor> segment_inputs_;
  std::size_t segment_ = 0;
  ForwardMode checkpointed_mode_;
};

}  // namespace sluice::train
