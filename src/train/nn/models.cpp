// The named models: fashion-cnn and cifar10-separable (layouts in sluice/train/models.hpp).
#include "sluice/train/models.hpp"

#include "sluice/core/error.hpp"
#include "sluice/train/layers.hpp"

namespace sluice::train {
namespace {

void conv_bn_relu(Context& ctx, Sequential& m, int in, int out) {
  m.add<Conv2D>(ctx, Conv2DOptions{.in_channels = in, .out_channels = out});
  m.add<BatchNorm>(ctx, BatchNormOptions{.channels = out});
  m.add<ReLU>();
}

void separable_bn_relu(Context& ctx, Sequential& m, int in, int out) {
  m.add<SeparableConv2D>(ctx, SeparableConv2DOptions{.in_channels = in, .out_channels = out});
  m.add<BatchNorm>(ctx, BatchNormOptions{.channels = out});
  m.add<ReLU>();
}

std::unique_ptr<Sequential> fashion_cnn(Context& ctx) {
  auto m = std::make_unique<Sequential>(Shape{1, 28, 28});
  conv_bn_relu(ctx, *m, 1, 32);
  m->add<MaxPool2D>();  // 14 x 14
  conv_bn_relu(ctx, *m, 32, 64);
  m->add<MaxPool2D>();  // 7 x 7
  m->add<Flatten>();
  m->add<Dense>(ctx, DenseOptions{.in_features = 64 * 7 * 7, .out_features = 128});
  m->add<ReLU>();
  m->add<Dropout>(0.3f);
  m->add<Dense>(ctx, DenseOptions{.in_features = 128, .out_features = 10});
  return m;
}

std::unique_ptr<Sequential> cifar10_separable(Context& ctx) {
  auto m = std::make_unique<Sequential>(Shape{3, 32, 32});
  conv_bn_relu(ctx, *m, 3, 32);
  separable_bn_relu(ctx, *m, 32, 64);
  separable_bn_relu(ctx, *m, 64, 128);
  m->add<MaxPool2D>();  // 16 x 16
  separable_bn_relu(ctx, *m, 128, 128);
  separable_bn_relu(ctx, *m, 128, 256);
  m->add<MaxPool2D>();  // 8 x 8
  separable_bn_relu(ctx, *m, 256, 256);
  separable_bn_relu(ctx, *m, 256, 512);
  m->add<MaxPool2D>();  // 4 x 4
  m->add<GlobalAvgPool>();
  m->add<Dense>(ctx, DenseOptions{.in_features = 512, .out_features = 10});
  return m;
}

}  // namespace

const std::vector<ModelInfo>& model_catalog() {
  static const std::vector<ModelInfo> catalog{
      {"fashion-cnn", 1, 28, 28, 10},
      {"cifar10-separable", 3, 32, 32, 10},
  };
  return catalog;
}

const ModelInfo& model_info(std::string_view name) {
  std::string known;
  for (const ModelInfo& m : model_catalog()) {
    if (m.name == name) return m;
    known += (known.empty() ? "" : ", ") + m.name;
  }
  throw Error(ErrorCode::kInvalidArgument, "unknown model \"" + std::string(name) + "\"; known: " + known);
}

std::unique_ptr<Sequential> make_model(Context& ctx, std::string_view name, std::uint64_t seed) {
  const ModelInfo& info = model_info(name);
  std::unique_ptr<Sequential> m = info.name == "fashion-cnn" ? fashion_cnn(ctx) : cifar10_separable(ctx);
  m->initialize(ctx, seed);
  return m;
}

}  // namespace sluice::train
