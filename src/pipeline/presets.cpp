// The standard transforms (sluice/pipeline/presets.hpp), written with the pipeline builder so that
// a preset's stages are exactly the ones the builder's calls would record.
#include "sluice/pipeline/presets.hpp"

#include <string>

#include "sluice/core/error.hpp"

namespace sluice::presets {

namespace {

Transform stages_of(const Pipeline& p) { return Transform{p.spec().stages}; }

Pipeline empty() { return Pipeline(PipelineSpec{}); }

// Sides up to kMaxSize (JSON specs check the same bound, json_spec.cpp): eval_crop's
// size * 256 / 224 must fit an int.
constexpr int kMaxSize = 65536;

void check_size(int size) {
  if (size < 1 || size > kMaxSize) {
    throw Error(ErrorCode::kInvalidArgument, "a preset's size must be in [1, " + std::to_string(kMaxSize) + "], got " +
                                                 std::to_string(size));
  }
}

Transform with_stats(Transform t, const ChannelStats& stats, Output output) {
  Pipeline p = empty();
  p.normalize({.mean = stats.mean, .std = stats.std, .layout = output.layout, .dtype = output.dtype});
  t.stages.push_back(p.spec().stages.back());
  return t;
}

}  // namespace

const ChannelStats& imagenet_stats() {
  static const ChannelStats s{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
  return s;
}

const ChannelStats& cifar10_stats() {
  static const ChannelStats s{{0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}};
  return s;
}

const ChannelStats& fashion_mnist_stats() {
  static const ChannelStats s{{0.2860f}, {0.3530f}};
  return s;
}

Pipeline& Transform::apply(Pipeline& pipeline) const {
  PipelineSpec spec = pipeline.spec();
  spec.stages.insert(spec.stages.end(), stages.begin(), stages.end());
  pipeline = Pipeline(std::move(spec));
  return pipeline;
}

Transform eval_crop(int size) {
  check_size(size);
  Pipeline p = empty();
  p.resize_shorter(size * 256 / 224).center_crop(size);
  return stages_of(p);
}

Transform resized_crop_flip(int size) {
  check_size(size);
  Pipeline p = empty();
  p.random_resized_crop(size).flip_horizontal(0.5);
  return stages_of(p);
}

Transform pad_crop_flip(int size, int padding) {
  check_size(size);
  Pipeline p = empty();
  p.random_crop(size, {.padding = padding}).flip_horizontal(0.5);
  return stages_of(p);
}

Transform imagenet_eval(int size, Output output) { return with_stats(eval_crop(size), imagenet_stats(), output); }
Transform imagenet_train(int size, Output output) { return with_stats(resized_crop_flip(size), imagenet_stats(), output); }
Transform cifar10_train(Output output) { return with_stats(pad_crop_flip(32, 4), cifar10_stats(), output); }
Transform cifar10_eval(Output output) { return with_stats({}, cifar10_stats(), output); }
Transform fashion_mnist_train(Output output) { return with_stats({}, fashion_mnist_stats(), output); }
Transform fashion_mnist_eval(Output output) { return with_stats({}, fashion_mnist_stats(), output); }

const std::vector<PresetEntry>& catalog() {
  static const std::vector<PresetEntry> entries{
      {"imagenet_eval", true, [](int size, Output o) { return imagenet_eval(size, o); }},
      {"imagenet_train", true, [](int size, Output o) { return imagenet_train(size, o); }},
      {"cifar10_train", false, [](int, Output o) { return cifar10_train(o); }},
      {"cifar10_eval", false, [](int, Output o) { return cifar10_eval(o); }},
      {"fashion_mnist_train", false, [](int, Output o) { return fashion_mnist_train(o); }},
      {"fashion_mnist_eval", false, [](int, Output o) { return fashion_mnist_eval(o); }},
  };
  return entries;
}

const PresetEntry& find(std::string_view name) {
  std::string known;
  for (const PresetEntry& e : catalog()) {
    if (e.name == name) return e;
    known += (known.empty() ? "" : ", ") + e.name;
  }
  throw Error(ErrorCode::kInvalidArgument, "unknown preset \"" + std::string(name) + "\"; known: " + known);
}

}  // namespace sluice::presets
