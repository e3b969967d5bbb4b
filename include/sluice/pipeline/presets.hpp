// Standard transforms as library presets: the stages between decoding and batching that the CLI
// (`sluice bench --transform`, `sluice train`), the benchmarks and JSON specs ({"preset": ...},
// docs/json-spec.md) spell the same way, so that "ImageNet's evaluation at 224" means one thing.
//
//   auto p = sluice::Pipeline::from_folder("val").read().decode_jpeg();
//   sluice::presets::imagenet_eval(224).apply(p).batch(256);
//
// A preset ends with its data set's normalisation (mean and std measured on the data set, never
// guessed from the channel count); Output picks the batch's dtype and layout.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sluice/core/dtype.hpp"
#include "sluice/pipeline/pipeline.hpp"
#include "sluice/pipeline/spec.hpp"

namespace sluice::presets {

// A data set's per-channel statistics in [0, 1] units (one entry per channel).
struct ChannelStats {
  std::vector<float> mean;
  std::vector<float> std;
};
const ChannelStats& imagenet_stats();       // RGB: 0.485 0.456 0.406 / 0.229 0.224 0.225
const ChannelStats& cifar10_stats();        // RGB: 0.4914 0.4822 0.4465 / 0.2470 0.2435 0.2616
const ChannelStats& fashion_mnist_stats();  // grey: 0.2860 / 0.3530

// The batch a preset's normalisation writes.
struct Output {
  DType dtype = DType::kF32;
  Layout layout = Layout::kNCHW;
};

// A preset's stages, in order; apply() appends them to a pipeline.
struct Transform {
  std::vector<spec::Stage> stages;
  Pipeline& apply(Pipeline& pipeline) const;
};

// The geometry alone (no normalisation), for a program that normalises its own way:
//   eval_crop(s):        resize the shorter side to s * 256 / 224, center crop s x s
//   resized_crop_flip(s): random resized crop to s x s (scale 0.08-1, ratio 3/4-4/3), flip 0.5
//   pad_crop_flip(s, p):  random s x s crop of the image padded by p, flip 0.5
Transform eval_crop(int size);
Transform resized_crop_flip(int size);
Transform pad_crop_flip(int size, int padding);

// Geometry and normalisation, as the reference training recipes do them:
Transform imagenet_eval(int size, Output output = {});   // eval_crop(size), ImageNet's statistics
Transform imagenet_train(int size, Output output = {});  // resized_crop_flip(size), ImageNet's statistics
Transform cifar10_train(Output output = {});             // pad_crop_flip(32, 4), CIFAR-10's statistics
Transform cifar10_eval(Output output = {});              // CIFAR-10's statistics alone
Transform fashion_mnist_train(Output output = {});       // Fashion-MNIST's statistics (no augmentation)
Transform fashion_mnist_eval(Output output = {});        // the same

// The presets by name, as JSON specs name them: "imagenet_eval", "imagenet_train" (these take a
// size), "cifar10_train", "cifar10_eval", "fashion_mnist_train", "fashion_mnist_eval".
struct PresetEntry {
  std::string name;
  bool takes_size = false;  // imagenet_*: the output side; the others have their data set's size
  Transform (*make)(int size, Output output);
};
const std::vector<PresetEntry>& catalog();
// Throws sluice::Error(kInvalidArgument) listing the known names for an unknown one.
const PresetEntry& find(std::string_view name);

}  // namespace sluice::presets
