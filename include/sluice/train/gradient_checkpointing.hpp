// Gradient checkpointing policies for Sequential::set_checkpointing (sluice/train/sequential.hpp):
// which layers a training forward keeps the input of. The model is cut into segments of K
// consecutive layers; a checkpointed training forward keeps only each segment's input and lets
// every layer drop what it saved, and backward runs each segment's forward again (same step, so
// the same dropout masks; BatchNorm leaves its running statistics alone the second time) just
// before backpropagating through it. The last segment runs as without checkpointing: its
// activations are needed at once. Parameter gradients are bit-identical to a run without
// checkpointing; the price is about one more forward per step.
//
//   none      no checkpointing (the default)
//   sqrt      segments of ceil(sqrt(layers)) layers: about 2 sqrt(layers) activations held
//   every:K   segments of K layers (K >= 1)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::train {

struct CheckpointPolicy {
  enum class Kind : std::uint8_t { kNone, kSqrt, kEvery };
  Kind kind = Kind::kNone;
  int every = 0;  // kEvery: layers per segment, >= 1

  static CheckpointPolicy none() { return {}; }
  static CheckpointPolicy sqrt() { return {Kind::kSqrt, 0}; }
  // Throws sluice::Error(kInvalidArgument) when k < 1.
  static CheckpointPolicy every_layers(int k);
  // "none", "sqrt" or "every:K" (K a positive integer). Throws sluice::Error(kInvalidArgument)
  // quoting the text and naming the accepted forms.
  static CheckpointPolicy parse(std::string_view text);

  bool enabled() const { return kind != Kind::kNone; }
  // Layers per segment for a model of `layers` layers: 0 for none, ceil(sqrt(layers)) for sqrt.
  std::size_t segment_length(std::size_t layers) const;
  // The text parse() takes: "none", "sqrt", "every:4".
  std::string to_string() const;

  friend bool operator==(const CheckpointPolicy&, const CheckpointPolicy&) = default;
};

}  // namespace sluice::train
