// Gradient accumulation (TrainerOptions::accumulate): K micro-batches of N / K then one update
// give the weights of the full-batch step within 1e-5 in f32 on a model without BatchNorm (with
// SGD momentum and with AdamW, dropout included: the micro-batches draw the full batch's masks);
// with BatchNorm each micro-batch uses its own statistics and updates the running averages once
// (the documented difference); the result is the same at 1 and 2 threads; a K that does not
// divide the batch, or K <= 0, is a clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "model_test_support.hpp"
#include "sluice/core/error.hpp"
#include "sluice/train/layers.hpp"
#include "sluice/train/trainer.hpp"

namespace sluice::train {
namespace {

using test::HostRig;
using test::values_of;

constexpr std::int64_t kBatch = 16;
constexpr int kSide = 8;

// Conv + dense, no BatchNorm, with a dropout in the dense part (its mask must match too).
std::unique_ptr<Sequential> conv_dense(Context& ctx, std::uint64_t seed) {
  auto m = std::make_unique<Sequential>(Shape{1, kSide, kSide});
  m->add<Conv2D>(ctx, Conv2DOptions{.in_channels = 1, .out_channels = 6, .bias = true});
  m->add<ReLU>();
  m->add<MaxPool2D>();  // 4 x 4
  m->add<Conv2D>(ctx, Conv2DOptions{.in_channels = 6, .out_channels = 8, .bias = true});
  m->add<ReLU>();
  m->add<Flatten>();
  m->add<Dense>(ctx, DenseOptions{.in_features = 8 * 4 * 4, .out_features = 24});
  m->add<ReLU>();
  m->add<Dropout>(0.25f);
  m->add<Dense>(ctx, DenseOptions{.in_features = 24, .out_features = 4});
  m->initialize(ctx, seed);
  return m;
}

// BatchNorm straight on the input, so the test can compute each micro-batch's statistics.
std::unique_ptr<Sequential> bn_first(Context& ctx, std::uint64_t seed) {
  auto m = std::make_unique<Sequential>(Shape{1, kSide, kSide});
  m->add<BatchNorm>(ctx, BatchNormOptions{.channels = 1});
  m->add<Conv2D>(ctx, Conv2DOptions{.in_channels = 1, .out_channels = 6, .bias = true});
  m->add<ReLU>();
  m->add<GlobalAvgPool>();
  m->add<Dense>(ctx, DenseOptions{.in_features = 6, .out_features = 4});
  m->initialize(ctx, seed);
  return m;
}

enum class Opt { kSgd, kAdamW };

struct Outcome {
  std::vector<std::vector<float>> weights;  // parameters then buffers
  std::vector<std::vector<float>> grads;
  std::vector<double> losses;
  std::vector<double> accuracies;
};

// `steps` steps on batches of kBatch from a toy set, accumulating over k.
Outcome run(int k, Opt opt, int steps, bool with_bn, int threads = 1) {
  HostRig rig(threads);
  auto model = with_bn ? bn_first(rig.ctx, 5) : conv_dense(rig.ctx, 5);
  std::unique_ptr<Optimizer> o;
  if (opt == Opt::kSgd) {
    o = std::make_unique<Sgd>(SgdOptions{.learning_rate = 0.05f, .momentum = 0.9f, .nesterov = true});
  } else {
    o = std::make_unique<AdamW>(AdamWOptions{.learning_rate = 1e-3f});
  }
  Trainer trainer(rig.ctx, *model, *o,
                  {.schedule = CosineSchedule{.base = 0.05f, .warmup_steps = 1, .total_steps = 4}, .accumulate = k});
  test::ToySet set = test::toy_set(kBatch * steps, 1, kSide, 4, 17);
  Outcome r;
  for (int s = 0; s < steps; ++s) {
    TensorView view{set.images.data() + s * kBatch * kSide * kSide, DType::kF32, {kBatch, 1, kSide, kSide}};
    const BatchResult b =
        trainer.step(view, std::span<const std::int32_t>(set.labels.data() + s * kBatch, kBatch));
    EXPECT_EQ(b.images, kBatch);
    r.losses.push_back(b.mean_loss());
    r.accuracies.push_back(b.accuracy());
  }
  EXPECT_EQ(trainer.steps(), steps);
  for (const Parameter& p : model->parameters()) {
    r.weights.push_back(values_of(rig.ctx, *p.value));
    r.grads.push_back(values_of(rig.ctx, *p.grad));
  }
  for (const Buffer& b : model->buffers()) r.weights.push_back(values_of(rig.ctx, *b.value));
  return r;
}

float max_abs_diff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    EXPECT_EQ(a[i].size(), b[i].size());
    for (std::size_t j = 0; j < a[i].size() && j < b[i].size(); ++j) d = std::max(d, std::abs(a[i][j] - b[i][j]));
  }
  return d;
}

void expect_equal_to_full_batch(Opt opt) {
  // Two steps: the second starts from the first's weights (and momentum / moments).
  const Outcome full = run(1, opt, 2, false);
  for (int k : {2, 4}) {
    const Outcome acc = run(k, opt, 2, false);
    EXPECT_LE(max_abs_diff(full.weights, acc.weights), 1e-5f) << "K = " << k;
    EXPECT_LE(max_abs_diff(full.grads, acc.grads), 1e-5f) << "K = " << k;
    ASSERT_EQ(acc.losses.size(), full.losses.size());
    for (std::size_t s = 0; s < full.losses.size(); ++s) {
      EXPECT_NEAR(acc.losses[s], full.losses[s], 1e-6) << "K = " << k << ", step " << s;
      EXPECT_EQ(acc.accuracies[s], full.accuracies[s]) << "K = " << k << ", step " << s;
    }
    std::printf("accumulate %d (%s): max |w - w_full| = %.3g, max |g - g_full| = %.3g\n", k,
                opt == Opt::kSgd ? "SGD momentum" : "AdamW", max_abs_diff(full.weights, acc.weights),
                max_abs_diff(full.grads, acc.grads));
  }
}

TEST(Accumulation, EqualsTheFullBatchStepWithSgdMomentum) { expect_equal_to_full_batch(Opt::kSgd); }

TEST(Accumulation, EqualsTheFullBatchStepWithAdamW) { expect_equal_to_full_batch(Opt::kAdamW); }

TEST(Accumulation, OneMicroBatchIsThePlainStep) {
  // accumulate = 1 is the step as before, bit for bit (no scaling, no slicing).
  EXPECT_EQ(run(1, Opt::kSgd, 2, false).weights, run(1, Opt::kSgd, 2, false).weights);
}

TEST(Accumulation, SameWeightsAt1And2Threads) {
  EXPECT_EQ(run(4, Opt::kSgd, 2, false, 1).weights, run(4, Opt::kSgd, 2, false, 2).weights);
  EXPECT_EQ(run(2, Opt::kAdamW, 2, true, 1).weights, run(2, Opt::kAdamW, 2, true, 2).weights);
}

// The documented BatchNorm behaviour: each micro-batch is normalised with its own statistics and
// folds them into the running averages, K updates per step (PyTorch's behaviour under
// accumulation), so the step differs from the full-batch one.
TEST(Accumulation, BatchNormUsesEachMicroBatchsStatistics) {
  const int k = 2;
  const Outcome full = run(1, Opt::kSgd, 1, true);
  const Outcome acc = run(k, Opt::kSgd, 1, true);
  EXPECT_GT(max_abs_diff(full.weights, acc.weights), 1e-4f) << "BatchNorm in training mode: not the full batch's step";

  // Running mean after one step, momentum 0.1, from 0: full batch 0.1 m; two micro-batches
  // 0.9 (0.1 m1) + 0.1 m2.
  test::ToySet set = test::toy_set(kBatch, 1, kSide, 4, 17);
  const std::int64_t per = kBatch / k * kSide * kSide;
  double m1 = 0, m2 = 0, m = 0;
  for (std::int64_t i = 0; i < per; ++i) m1 += set.images[static_cast<std::size_t>(i)];
  for (std::int64_t i = per; i < 2 * per; ++i) m2 += set.images[static_cast<std::size_t>(i)];
  m = (m1 + m2) / static_cast<double>(2 * per);
  m1 /= static_cast<double>(per);
  m2 /= static_cast<double>(per);
  // Buffers follow the parameters in Outcome::weights: running_mean, running_var of layer 0.
  const std::size_t params = full.grads.size();
  ASSERT_EQ(full.weights.size(), params + 2);
  EXPECT_NEAR(full.weights[params][0], 0.1 * m, 1e-6);
  EXPECT_NEAR(acc.weights[params][0], 0.9 * (0.1 * m1) + 0.1 * m2, 1e-6);
  EXPECT_GT(std::abs(acc.weights[params][0] - full.weights[params][0]), 1e-4);
}

TEST(Accumulation, AMicroBatchCountThatDoesNotDivideTheBatchIsAClearError) {
  HostRig rig;
  auto model = conv_dense(rig.ctx, 1);
  Sgd sgd;
  Trainer trainer(rig.ctx, *model, sgd, {.accumulate = 3});
  test::ToySet set = test::toy_set(kBatch, 1, kSide, 4, 1);
  try {
    trainer.step({set.images.data(), DType::kF32, {kBatch, 1, kSide, kSide}}, set.labels);
    FAIL() << "16 images in 3 micro-batches";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("a batch of 16 does not split into 3"), std::string::npos) << e.what();
  }
  EXPECT_EQ(trainer.steps(), 0);
  EXPECT_EQ(trainer.memory().category(TensorCategory::kActivations).in_use_bytes, 0u);
  // 15 images do split into 3.
  const BatchResult r = trainer.step({set.images.data(), DType::kF32, {15, 1, kSide, kSide}},
                                     std::span<const std::int32_t>(set.labels.data(), 15));
  EXPECT_EQ(r.images, 15);
  EXPECT_EQ(trainer.steps(), 1);
}

TEST(Accumulation, ZeroOrNegativeMicroBatchesAreRejected) {
  HostRig rig;
  auto model = conv_dense(rig.ctx, 1);
  Sgd sgd;
  for (int k : {0, -1}) {
    try {
      Trainer trainer(rig.ctx, *model, sgd, {.accumulate = k});
      FAIL() << "accumulate " << k;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("accumulate must be >= 1"), std::string::npos) << e.what();
    }
  }
}

// The dropout mask of a micro-batch is the matching part of the full batch's: element i of a
// tensor with DropoutMask::offset o draws as element o + i (offsets not a multiple of 4 too).
TEST(Accumulation, DropoutOffsetsDrawThePartOfTheFullMask) {
  HostRig rig(2);
  const std::int64_t n = 4 * 6;  // 4 samples of 6 values
  Tensor x = test::from_values(rig.ctx, {4, 6}, std::vector<float>(n, 1.0f));
  Tensor full = rig.ctx.empty({4, 6}, DType::kF32, TensorCategory::kActivations);
  const DropoutMask m{.rate = 0.5f, .key = 77, .step = 3};
  ops::dropout_forward(rig.ctx, m, x, full);
  const std::vector<float> want = values_of(rig.ctx, full);
  for (std::int64_t first : {1, 2, 3}) {  // samples [first, 4): offsets 6, 12, 18
    Tensor part = x.slice(first, 4);
    Tensor y = rig.ctx.empty(part.shape(), DType::kF32, TensorCategory::kActivations);
    DropoutMask pm = m;
    pm.offset = static_cast<std::uint64_t>(first * 6);
    ops::dropout_forward(rig.ctx, pm, part, y);
    const std::vector<float> got = values_of(rig.ctx, y);
    EXPECT_EQ(got, std::vector<float>(want.begin() + first * 6, want.end())) << "from sample " << first;
  }
}

TEST(Accumulation, ScaleMultipliesInPlace) {
  HostRig rig;
  Tensor t = test::from_values(rig.ctx, {5}, {1.0f, -2.0f, 0.5f, 0.0f, 3.0f});
  ops::scale(rig.ctx, t, 0.25f);
  EXPECT_EQ(values_of(rig.ctx, t), (std::vector<float>{0.25f, -0.5f, 0.125f, 0.0f, 0.75f}));
}

}  // namespace
}  // namespace sluice::train
