// The models `sluice train` knows, by name:
//  - fashion-cnn: Fashion-MNIST (1 x 28 x 28): two conv-BN-ReLU-maxpool blocks (32, 64 channels),
//    a 128-unit dense layer with dropout, 10 logits. About 420 k parameters.
//  - cifar10-separable: CIFAR-10 (3 x 32 x 32), memory-lean: a 3x3 conv stem, then
//    depthwise-separable conv-BN-ReLU blocks (64, 128 | 128, 256 | 256, 512 channels, max pooling
//    after each pair), global average pooling and a dense head. About 270 k parameters; the
//    separable op never stores its depthwise result, so the activations kept for backward are
//    the block outputs only.
// bench/peers/torch_train_peer.py builds the same two in PyTorch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/train/context.hpp"
#include "sluice/train/sequential.hpp"

namespace sluice::train {

struct ModelInfo {
  std::string name;
  int channels = 0;  // of the input image
  int height = 0;
  int width = 0;
  int classes = 0;
};

// The models above, in that order.
const std::vector<ModelInfo>& model_catalog();
// Throws sluice::Error(kInvalidArgument) listing the known names for an unknown one.
const ModelInfo& model_info(std::string_view name);

// The model with its parameters in `ctx`'s allocator, initialised from `seed`.
std::unique_ptr<Sequential> make_model(Context& ctx, std::string_view name, std::uint64_t seed);

}  // namespace sluice::train
