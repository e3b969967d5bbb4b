// What the memory techniques cost, bounded by counts rather than by timings (which a shared
// machine cannot bound): gradient checkpointing runs every layer's forward at most twice a step
// (once, as without it, for the layers of the last segment, whose activations are kept), so its
// extra compute is at most one forward pass; and gradient accumulation's saving, the activations
// of one micro-batch instead of the batch, is measured on the allocator's activations peak.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model_test_support.hpp"
#include "sluice/train/gradient_checkpointing.hpp"
#include "sluice/train/layers.hpp"
#include "sluice/train/models.hpp"
#include "sluice/train/optimizer.hpp"
#include "sluice/train/train_config.hpp"
#include "sluice/train/trainer.hpp"

namespace sluice::train {
namespace {

using test::HostRig;

// A layer that counts the training forwards of the layer it wraps, and forwards everything else.
class CountingLayer : public Layer {
 public:
  CountingLayer(std::unique_ptr<Layer> inner, int* training_forwards)
      : inner_(std::move(inner)), training_forwards_(training_forwards) {}

  std::string describe() const override { return inner_->describe(); }
  Shape output_shape(const Shape& input) const override { return inner_->output_shape(input); }
  void initialize(Context& ctx, std::uint64_t key) override { inner_->initialize(ctx, key); }
  Tensor forward(Context& ctx, Tensor x, const ForwardMode& mode) override {
    if (mode.training) ++*training_forwards_;
    return inner_->forward(ctx, std::move(x), mode);
  }
  Tensor backward(Context& ctx, Tensor dy, InputGradient input_gradient) override {
    inner_->set_grad_mode(grad_mode());
    return inner_->backward(ctx, std::move(dy), input_gradient);
  }
  void parameters(const std::string& prefix, std::vector<Parameter>& out) override { inner_->parameters(prefix, out); }
  void buffers(const std::string& prefix, std::vector<Buffer>& out) override { inner_->buffers(prefix, out); }
  void release_saved() override { inner_->release_saved(); }
  void set_compute_dtype(Context& ctx, DType dtype) override { inner_->set_compute_dtype(ctx, dtype); }

 private:
  std::unique_ptr<Layer> inner_;
  int* training_forwards_;
};

// conv-BN-ReLU x 6, pooling, dense: 20 layers, each counted.
struct CountedModel {
  std::unique_ptr<Sequential> model;
  std::vector<int> forwards;  // (layers,) training forwards of each layer

  CountedModel(Context& ctx, const CheckpointPolicy& policy) : forwards(20, 0) {
    model = std::make_unique<Sequential>(Shape{3, 8, 8});
    std::size_t i = 0;
    auto add = [&](std::unique_ptr<Layer> l) { model->append(std::make_unique<CountingLayer>(std::move(l), &forwards[i++])); };
    int channels = 3;
    for (int block = 0; block < 6; ++block) {
      add(std::make_unique<Conv2D>(ctx, Conv2DOptions{.in_channels = channels, .out_channels = 8}));
      add(std::make_unique<BatchNorm>(ctx, BatchNormOptions{.channels = 8}));
      add(std::make_unique<ReLU>());
      channels = 8;
    }
    add(std::make_unique<GlobalAvgPool>());
    add(std::make_unique<Dense>(ctx, DenseOptions{.in_features = 8, .out_features = 4}));
    EXPECT_EQ(i, forwards.size());
    model->initialize(ctx, 5);
    model->set_checkpointing(policy);
  }
};

std::vector<int> forwards_of_one_step(const CheckpointPolicy& policy) {
  HostRig rig(1);
  CountedModel m(rig.ctx, policy);
  Sgd sgd(SgdOptions{.learning_rate = 0.01f});
  Trainer trainer(rig.ctx, *m.model, sgd);
  const std::int64_t n = 4;
  std::vector<float> data(static_cast<std::size_t>(n * 3 * 8 * 8), 0.5f);
  std::vector<std::int32_t> labels{0, 1, 2, 3};
  trainer.step(TensorView{data.data(), DType::kF32, Shape{n, 3, 8, 8}}, labels, host());
  return m.forwards;
}

TEST(TechniqueCost, WithoutCheckpointingEveryLayerRunsForwardOnce) {
  for (const int f : forwards_of_one_step(CheckpointPolicy::none())) EXPECT_EQ(f, 1);
}

TEST(TechniqueCost, CheckpointingRecomputesEachLayerAtMostOnceAndTheLastSegmentNever) {
  for (const CheckpointPolicy& policy :
       {CheckpointPolicy::sqrt(), CheckpointPolicy::every_layers(1), CheckpointPolicy::every_layers(3),
        CheckpointPolicy::every_layers(7), CheckpointPolicy::every_layers(20)}) {
    const std::vector<int> f = forwards_of_one_step(policy);
    const std::size_t segment = policy.segment_length(f.size());
    const std::size_t last_start = ((f.size() - 1) / segment) * segment;  // the last segment's first layer
    int total = 0;
    for (std::size_t i = 0; i < f.size(); ++i) {
      EXPECT_EQ(f[i], i < last_start ? 2 : 1) << policy.to_string() << ", layer " << i;
      total += f[i];
    }
    // The bound on the extra compute: at most one more forward pass than without checkpointing.
    EXPECT_LE(total, 2 * static_cast<int>(f.size())) << policy.to_string();
  }
}

// Peak of the activations category over two steps of `model` at `batch` with `accumulate`.
std::uint64_t activation_peak(const std::string& model, std::int64_t batch, int accumulate) {
  HostRig rig(2);
  TrainSetup s = make_training(rig.ctx, TrainConfig{.model = model, .batch = batch, .accumulate = accumulate});
  Trainer trainer(rig.ctx, *s.model, *s.optimizer, s.trainer);
  const ModelInfo& info = model_info(model);
  std::vector<float> data(static_cast<std::size_t>(batch * info.channels * info.height * info.width), 0.25f);
  std::vector<std::int32_t> labels(static_cast<std::size_t>(batch), 1);
  const TensorView x{data.data(), DType::kF32, Shape{batch, info.channels, info.height, info.width}};
  for (int i = 0; i < 2; ++i) trainer.step(x, labels, host());
  return rig.allocator.stats().category(TensorCategory::kActivations).peak_in_use_bytes;
}

TEST(TechniqueCost, AccumulationHoldsTheActivationsOfOneMicroBatch) {
  const std::uint64_t full = activation_peak("cifar10-separable", 32, 1);
  const std::uint64_t k2 = activation_peak("cifar10-separable", 32, 2);
  const std::uint64_t k4 = activation_peak("cifar10-separable", 32, 4);
  std::printf("  activations peak, batch 32: K=1 %llu, K=2 %llu (%.3fx), K=4 %llu (%.3fx)\n",
              static_cast<unsigned long long>(full), static_cast<unsigned long long>(k2),
              static_cast<double>(k2) / static_cast<double>(full), static_cast<unsigned long long>(k4),
              static_cast<double>(k4) / static_cast<double>(full));
  // Activations scale with the micro-batch; a few batch-independent bytes (256-byte rounding of
  // small tensors) keep the ratios a little above 1/K.
  EXPECT_LE(static_cast<double>(k2), 0.52 * static_cast<double>(full));
  EXPECT_LE(static_cast<double>(k4), 0.27 * static_cast<double>(full));
}

}  // namespace
}  // namespace sluice::train
