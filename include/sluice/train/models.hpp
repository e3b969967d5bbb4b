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

// A catalog entry: what a model takes and gives, how `sluice train` runs it by default, and its
// factory. Everything a program needs to know about a model is here, so a new model is one entry
// (and its builder function) in models.cpp.
struct ModelInfo {
  std::string name;
  int channels = 0;  // of the input image (1: the pipelines decode grey)
  int height = 0;
  int width = 0;
  int classes = 0;
  int default_epochs = 0;    // `sluice train`'s and `sluice plan`'s when --epochs is not given
  std::string dataset;       // the data set it is made for: "fashion-mnist", "cifar10"
  // The input transforms for training and for evaluation, by their names in the presets catalog
  // (sluice/pipeline/presets.hpp: augmentation, then the data set's own mean and std).
  std::string train_preset;
  std::string eval_preset;
  // The model's layers (parameters in `ctx`'s allocator, not yet initialised).
  std::unique_ptr<Sequential> (*build)(Context& ctx) = nullptr;
};

// The models above, in that order.
const std::vector<ModelInfo>& model_catalog();
// Throws sluice::Error(kInvalidArgument) listing the known names for an unknown one.
const ModelInfo& model_info(std::string_view name);
// The model for a data set: the catalog's entry made for `dataset` ("fashion-mnist": fashion-cnn),
// or cifar10-separable for any other (an image folder of RGB images). The CLI's one default.
const ModelInfo& default_model(std::string_view dataset);
// The catalog's names, "fashion-cnn, cifar10-separable", for messages and help texts.
std::string model_names();

// The model with its parameters in `ctx`'s allocator, initialised from `seed`.
std::unique_ptr<Sequential> make_model(Context& ctx, std::string_view name, std::uint64_t seed);

}  // namespace sluice::train
