// Sequential: the layer list, the forward and backward sweeps, the parameter listing.
#include "sluice/train/sequential.hpp"

#include <string>

#include "sluice/core/error.hpp"
#include "sluice/core/rng.hpp"

namespace sluice::train {

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
  Tensor h = x;  // the caller's x stays as it was: this copy is not the only reference
  for (auto& layer : layers_) h = layer->forward(ctx, std::move(h), mode);
  return h;
}

void Sequential::backward(Context& ctx, Tensor dlogits) {
  Tensor g = std::move(dlogits);
  for (std::size_t i = layers_.size(); i-- > 0;) {
    g = layers_[i]->backward(ctx, std::move(g), i > 0);
  }
}

void Sequential::release_saved() {
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
