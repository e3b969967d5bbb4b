// Training end to end on the CPU: a small model learns a toy set (the loss falls, accuracy
// rises), the same seed gives bit-identical weights run to run at 1 and at 2 threads (and the
// same at 1 as at 2), and the named models take their inputs and give 10 logits.
#include <gtest/gtest.h>

#include "model_test_support.hpp"
#include "sluice/core/error.hpp"
#include "sluice/train/layers.hpp"
#include "sluice/train/models.hpp"
#include "sluice/train/trainer.hpp"

namespace sluice::train {
namespace {

using test::HostRig;
using test::values_of;

std::unique_ptr<Sequential> small_cnn(Context& ctx, std::uint64_t seed) {
  auto m = std::make_unique<Sequential>(Shape{1, 8, 8});
  m->add<Conv2D>(ctx, Conv2DOptions{.in_channels = 1, .out_channels = 8});
  m->add<BatchNorm>(ctx, BatchNormOptions{.channels = 8});
  m->add<ReLU>();
  m->add<MaxPool2D>();
  m->add<SeparableConv2D>(ctx, SeparableConv2DOptions{.in_channels = 8, .out_channels = 16});
  m->add<BatchNorm>(ctx, BatchNormOptions{.channels = 16});
  m->add<ReLU>();
  m->add<GlobalAvgPool>();
  m->add<Dropout>(0.1f);
  m->add<Dense>(ctx, DenseOptions{.in_features = 16, .out_features = 4});
  m->initialize(ctx, seed);
  return m;
}

struct RunResult {
  std::vector<double> epoch_loss;
  double accuracy = 0;
  std::vector<std::vector<float>> weights;
};

RunResult train_toy(int threads, std::uint64_t seed, bool adam, int epochs) {
  HostRig rig(threads);
  auto model = small_cnn(rig.ctx, seed);
  std::unique_ptr<Optimizer> opt;
  if (adam) {
    opt = std::make_unique<AdamW>(AdamWOptions{.learning_rate = 0.01f});
  } else {
    opt = std::make_unique<Sgd>(SgdOptions{.learning_rate = 0.05f});
  }
  Trainer trainer(rig.ctx, *model, *opt);
  const std::int64_t n = 256, batch = 32;
  test::ToySet set = test::toy_set(n, 1, 8, 4, 99);
  RunResult r;
  for (int e = 0; e < epochs; ++e) {
    BatchResult seen;
    for (std::int64_t b = 0; b < n; b += batch) {
      TensorView view{set.images.data() + b * 64, DType::kF32, {batch, 1, 8, 8}};
      seen += trainer.step(view, std::span<const std::int32_t>(set.labels.data() + b, batch));
    }
    r.epoch_loss.push_back(seen.mean_loss());
  }
  test::ToySet held_out = test::toy_set(128, 1, 8, 4, 1234);
  TensorView view{held_out.images.data(), DType::kF32, {128, 1, 8, 8}};
  r.accuracy = trainer.evaluate(view, held_out.labels).accuracy();
  for (const Parameter& p : model->parameters()) r.weights.push_back(values_of(rig.ctx, *p.value));
  for (const Buffer& b : model->buffers()) r.weights.push_back(values_of(rig.ctx, *b.value));
  return r;
}

TEST(Training, SgdDrivesTheLossDownOnAToySet) {
  const RunResult r = train_toy(1, 7, false, 6);
  EXPECT_LT(r.epoch_loss.back(), 0.5 * r.epoch_loss.front()) << r.epoch_loss.front() << " -> " << r.epoch_loss.back();
  EXPECT_GT(r.accuracy, 0.9);
}

TEST(Training, AdamWDrivesTheLossDownOnAToySet) {
  const RunResult r = train_toy(2, 7, true, 6);
  EXPECT_LT(r.epoch_loss.back(), 0.5 * r.epoch_loss.front()) << r.epoch_loss.front() << " -> " << r.epoch_loss.back();
  EXPECT_GT(r.accuracy, 0.9);
}

TEST(Training, SameSeedSameWeightsAt1Thread) {
  EXPECT_EQ(train_toy(1, 3, false, 2).weights, train_toy(1, 3, false, 2).weights);
}

TEST(Training, SameSeedSameWeightsAt2Threads) {
  EXPECT_EQ(train_toy(2, 3, true, 2).weights, train_toy(2, 3, true, 2).weights);
}

TEST(Training, SameWeightsAt1And2Threads) {
  EXPECT_EQ(train_toy(1, 3, false, 2).weights, train_toy(2, 3, false, 2).weights);
}

TEST(Training, OtherSeedOtherWeights) {
  EXPECT_NE(train_toy(1, 3, false, 1).weights, train_toy(1, 4, false, 1).weights);
}

TEST(Training, ABatchThatDoesNotFitTheModelIsAClearError) {
  HostRig rig;
  auto model = small_cnn(rig.ctx, 1);
  Sgd sgd;
  Trainer trainer(rig.ctx, *model, sgd);
  std::vector<float> data(2 * 3 * 8 * 8);
  std::vector<std::int32_t> labels{0, 1};
  try {
    trainer.step({data.data(), DType::kF32, {2, 3, 8, 8}}, labels);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(N, 1, 8, 8)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(trainer.step({data.data(), DType::kF32, {2, 1, 8, 8}}, std::span<const std::int32_t>(labels.data(), 1)),
               Error);
  EXPECT_EQ(trainer.steps(), 0);
}

TEST(Training, TheNamedModelsGiveTenLogits) {
  HostRig rig(2);
  for (const ModelInfo& info : model_catalog()) {
    auto model = make_model(rig.ctx, info.name, 1);
    EXPECT_EQ(model->output_shape(3), (Shape{3, 10})) << info.name;
    EXPECT_EQ(model->input_shape(), (Shape{info.channels, info.height, info.width}));
    Sgd sgd;
    Trainer trainer(rig.ctx, *model, sgd);
    std::vector<float> data(static_cast<std::size_t>(4 * info.channels * info.height * info.width), 0.5f);
    std::vector<std::int32_t> labels{0, 3, 9, 1};
    const BatchResult r = trainer.step({data.data(), DType::kF32, {4, info.channels, info.height, info.width}}, labels);
    EXPECT_TRUE(std::isfinite(r.loss_sum)) << info.name;
    const AllocatorStats s = trainer.memory();
    EXPECT_GT(s.category(TensorCategory::kWeights).in_use_bytes, 0u);
    EXPECT_GT(s.category(TensorCategory::kOptimizerState).in_use_bytes, 0u);
    EXPECT_GT(s.category(TensorCategory::kActivations).peak_in_use_bytes, 0u);
    EXPECT_EQ(s.category(TensorCategory::kActivations).in_use_bytes, 0u) << "a step left activations behind";
  }
  EXPECT_EQ(make_model(rig.ctx, "fashion-cnn", 1)->parameter_count(), 421738);
  EXPECT_THROW(make_model(rig.ctx, "resnet", 1), Error);
}

}  // namespace
}  // namespace sluice::train
