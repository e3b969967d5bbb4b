// Sequential: the layer list, the forward and backward sweeps, the parameter listing.
#include "sluice/train/sequential.hpp"

#include <string>

#include "sluice/core/error.hpp"
#include "sluice/core/rng.hpp"

namespace sluice::train {
namespace {

// The first layer's input is the batch, whose gradient nobody uses.
InputGradient input_gradient(std::size_t layer) {
  return layer > 0 ? InputGradient::kCompute : InputGradient::kSkip;
}

}  // namespace

Sequential::Sequential(Shape input) : input_(input) {
  if (input.rank() < 1 || input.rank() >= Shape::kMaxRank || input.elements() < 1) {
    throw Error(ErrorCode::kInvalidArgument, "Sequential: the sample shape must be (C, H, W) or (features), got " +
                                                 input.to_string());
  }
}

Shape Sequential::batch_shape(std::int64_t batch) const {
  Shape out;
  switch (input_.rank()) {
    case 1: out = {batch, input_[0]}; break;
    case 2: out = {batch, input_[0], input_[1]}; break;
    case 3: out = {batch, input_[0], input_[1], input_[2]}; break;
    case 4: out = {batch, input_[0], input_[1], input_[2], input_[3]}; break;
    default: out = {batch, input_[0], input_[1], input_[2], input_[3], input_[4]}; break;
  }
  return out;
}

void Sequential::append(std::unique_ptr<Layer> layer) {
  if (!layer) throw Error(ErrorCode::kInvalidArgument, "Sequential: null layer");
  Shape in = output_shape(1);
  try {
    (void)layer->output_shape(in);
  } catch (const Error& e) {
    throw Error(ErrorCode::kInvalidArgument, "Sequential: layer " + std::to_string(layers_.size()) + " (" +
                                                 layer->describe() + ") cannot take " + in.to_string() + ": " +
                                                 e.cause());
  }
  layers_.push_back(std::move(layer));
}

void Sequential::initialize(Context& ctx, std::uint64_t seed) {
  for (std::size_t i = 0; i < layers_.size(); ++i) layers_[i]->initialize(ctx, derive_key(seed, i));
}

Tensor Sequential::forward(Context& ctx, const Tensor& x, const ForwardMode& mode) {
  if (layers_.empty()) throw Error(ErrorCode::kInvalidArgument, "Sequential: forward on a model without layers");
  segment_inputs_.clear();
  segment_ = 0;
  Tensor h = x;  // the caller's x stays as it was: this copy is not the only reference
  const std::size_t seg = mode.training ? checkpoint_.segment_length(layers_.size()) : 0;
  if (seg == 0 || seg >= layers_.size()) {
    for (auto& layer : layers_) h = layer->forward(ctx, std::move(h), mode);
    return h;
  }
  // Checkpointed: the layers before the last segment drop what they saved as soon as their
  // forward is done; a segment's input stays (held here, so no layer writes over it in place).
  segment_ = seg;
  checkpointed_mode_ = mode;
  const std::size_t last_start = (layers_.size() - 1) / seg * seg;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    if (i < last_start && i % seg == 0) segment_inputs_.push_back(h);
    h = layers_[i]->forward(ctx, std::move(h), mode);
    if (i < last_start) layers_[i]->release_saved();
  }
  return h;
}

void Sequential::backward(Context& ctx, Tensor dlogits, GradMode mode) {
  for (auto& layer : layers_) layer->set_grad_mode(mode);
  Tensor g = std::move(dlogits);
  const std::size_t first_kept = segment_inputs_.size() * segment_;  // 0 without checkpoints
  for (std::size_t i = layers_.size(); i-- > first_kept;) {
    g = layers_[i]->backward(ctx, std::move(g), input_gradient(i));
  }
  // The checkpointed segments, last to first: forward again from the segment's input, then back.
  ForwardMode again = checkpointed_mode_;
  again.recompute = true;
  while (!segment_inputs_.empty()) {
    const std::size_t begin = (segment_inputs_.size() - 1) * segment_;
    Tensor h = std::move(segment_inputs_.back());
    segment_inputs_.pop_back();
    for (std::size_t i = begin; i < begin + segment_; ++i) h = layers_[i]->forward(ctx, std::move(h), again);
    h.reset();  // the segment's output: its backward needs only what the layers kept
    for (std::size_t i = begin + segment_; i-- > begin;) {
      g = layers_[i]->backward(ctx, std::move(g), input_gradient(i));
    }
  }
  segment_ = 0;
}

void Sequential::release_saved() {
  segment_inputs_.clear();
  segment_ = 0;
  for (auto& layer : layers_) layer->release_saved();
}

std::vector<Parameter> Sequential::parameters() {
  std::vector<Parameter> out;
  for (std::size_t i = 0; i < layers_.size(); ++i) layers_[i]->parameters(std::to_string(i) + ".", out);
  return out;
}

std::vector<Buffer> Sequential::buffers() {
  std::vector<Buffer> out;
  for (std::size_t i = 0; i < layers_.size(); ++i) layers_[i]->buffers(std::to_string(i) + ".", out);
  return out;
}

std::int64_t Sequential::parameter_count() {
  std::int64_t n = 0;
  for (const Parameter& p : parameters()) n += p.value->elements();
  return n;
}

Shape Sequential::output_shape(std::int64_t batch) const {
  Shape s = batch_shape(batch);
  for (const auto& layer : layers_) s = layer->output_shape(s);
  return s;
}

std::string Sequential::summary(std::int64_t batch) const {
  std::string text;
  Shape s = batch_shape(batch);
  text += "  input " + s.to_string() + "\n";
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    s = layers_[i]->output_shape(s);
    text += "  " + std::to_string(i) + ". " + layers_[i]->describe() + " -> " + s.to_string() + "\n";
  }
  return text;
}

}  // namespace sluice::train
