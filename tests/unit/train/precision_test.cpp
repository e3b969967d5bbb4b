// Mixed precision (sluice/train/precision.hpp): the loss scaler's state machine, the precision
// names, the two ops it adds (scale_cast, find_nonfinite), and training steps in f16 and bf16
// against f32: close to the f32 step, a skipped step that changes nothing, the same weights at 1
// and 2 threads, about half the activation memory, and the 16-bit copies counted as weights;
// with gradient accumulation, K micro-batches close to the full batch and a skip that undoes all.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "model_test_support.hpp"
#include "sluice/core/error.hpp"
#include "sluice/detail/core/half.hpp"
#include "sluice/train/layers.hpp"
#include "sluice/train/models.hpp"
#include "sluice/train/precision.hpp"
#include "sluice/train/trainer.hpp"

namespace sluice::train {
namespace {

using test::HostRig;
using test::values_of;

// ---- LossScaler ------------------------------------------------------------------------------

TEST(LossScaler, StartsAt2To16AndGrowsAfterTheIntervalOfFiniteSteps) {
  LossScaler s(LossScalerOptions{.growth_interval = 3});
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_TRUE(s.update(true));
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_EQ(s.finite_streak(), 2);
  EXPECT_TRUE(s.update(true));  // the third finite step in a row
  EXPECT_EQ(s.scale(), 131072.0f);
  EXPECT_EQ(s.growth_events(), 1);
  EXPECT_EQ(s.finite_streak(), 0);
  for (int i = 0; i < 3; ++i) s.update(true);
  EXPECT_EQ(s.scale(), 262144.0f);
  EXPECT_EQ(s.growth_events(), 2);
  EXPECT_EQ(s.skipped_steps(), 0);
}

TEST(LossScaler, ANonFiniteStepIsSkippedHalvesTheScaleAndRestartsTheStreak) {
  LossScaler s(LossScalerOptions{.growth_interval = 3});
  s.update(true);
  s.update(true);
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 32768.0f);
  EXPECT_EQ(s.skipped_steps(), 1);
  EXPECT_EQ(s.finite_streak(), 0);
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.scale(), 32768.0f);  // the streak began again after the skip
  s.update(true);
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_FALSE(s.update(false));
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 16384.0f);
  EXPECT_EQ(s.skipped_steps(), 3);
  EXPECT_EQ(s.growth_events(), 1);
}

TEST(LossScaler, TheDefaultIntervalIs2000) {
  LossScaler s;
  for (int i = 0; i < 1999; ++i) s.update(true);
  EXPECT_EQ(s.scale(), 65536.0f);
  s.update(true);
  EXPECT_EQ(s.scale(), 131072.0f);
}

TEST(LossScaler, BadOptionsAreRejected) {
  EXPECT_THROW(LossScaler(LossScalerOptions{.initial_scale = 0.0f}), Error);
  EXPECT_THROW(LossScaler(LossScalerOptions{.growth_factor = 1.0f}), Error);
  EXPECT_THROW(LossScaler(LossScalerOptions{.backoff_factor = 1.0f}), Error);
  EXPECT_THROW(LossScaler(LossScalerOptions{.growth_interval = 0}), Error);
}

// ---- names -----------------------------------------------------------------------------------

TEST(Precision, NamesRoundTripAndSayTheirDtype) {
  for (Precision p : {Precision::kF32, Precision::kMixedF16, Precision::kMixedBF16}) {
    EXPECT_EQ(parse_precision(to_string(p)), p);
  }
  EXPECT_EQ(compute_dtype(Precision::kF32), DType::kF32);
  EXPECT_EQ(compute_dtype(Precision::kMixedF16), DType::kF16);
  EXPECT_EQ(compute_dtype(Precision::kMixedBF16), DType::kBF16);
}

TEST(Precision, AnUnknownNameIsAClearError) {
  for (const char* bad : {"f16", "mixed", "F32", "", "mixed_f16 "}) {
    try {
      (void)parse_precision(bad);
      FAIL() << "accepted \"" << bad << "\"";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("f32, mixed_f16, mixed_bf16"), std::string::npos) << e.what();
    }
  }
}

// ---- ops -------------------------------------------------------------------------------------

TEST(PrecisionOps, ScaleCastScalesAndConvertsEachWay) {
  HostRig rig;
  Tensor x = test::from_values(rig.ctx, {4}, {1.0f, -0.5f, 3.0f, 1e-3f});
  Tensor h = rig.ctx.empty({4}, DType::kF16, TensorCategory::kActivations);
  ops::scale_cast(rig.ctx, x, 1024.0f, h);
  EXPECT_EQ(h.data_as<std::uint16_t>()[0], float_to_f16(1024.0f));
  EXPECT_EQ(h.data_as<std::uint16_t>()[3], float_to_f16(1e-3f * 1024.0f));
  Tensor back = rig.ctx.empty({4}, DType::kF32, TensorCategory::kGradients);
  ops::scale_cast(rig.ctx, h, 1.0f / 1024.0f, back);
  const std::vector<float> v = values_of(rig.ctx, back);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], -0.5f);
  EXPECT_EQ(v[2], 3.0f);
  EXPECT_NEAR(v[3], 1e-3f, 1e-6f);
  ops::scale_cast(rig.ctx, back, 2.0f, back);  // in place, one dtype
  EXPECT_EQ(values_of(rig.ctx, back)[2], 6.0f);
  Tensor big = test::from_values(rig.ctx, {1}, {1.0f});
  Tensor big16 = rig.ctx.empty({1}, DType::kF16, TensorCategory::kActivations);
  ops::scale_cast(rig.ctx, big, 1e6f, big16);  // past f16's 65504: infinity
  EXPECT_EQ(big16.data_as<std::uint16_t>()[0], 0x7c00u);
  Tensor wrong = rig.ctx.empty({3}, DType::kF32, TensorCategory::kGradients);
  EXPECT_THROW(ops::scale_cast(rig.ctx, x, 1.0f, wrong), Error);
}

TEST(PrecisionOps, FindNonfiniteSetsTheFlagForInfAndNanInEveryDtype) {
  HostRig rig;
  Tensor flag = rig.ctx.empty({1}, DType::kF32, TensorCategory::kWorkspace);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (float bad : {inf, -inf, nan}) {
      std::vector<float> values(40000, 0.25f);  // more than one chunk of the element-wise grain
      values[33333] = bad;
      Tensor f = test::from_values(rig.ctx, {40000}, values);
      Tensor x = rig.ctx.empty({40000}, t, TensorCategory::kGradients);
      ops::cast(rig.ctx, f, x);
      ops::fill(rig.ctx, flag, 0.0f);
      ops::find_nonfinite(rig.ctx, x, flag);
      EXPECT_EQ(values_of(rig.ctx, flag)[0], 1.0f) << to_string(t) << " " << bad;
    }
    // Finite values, the largest of each type included, leave the flag as it was.
    const float largest = t == DType::kF16 ? 65504.0f : 3.0e38f;
    Tensor f = test::from_values(rig.ctx, {3}, {largest, -largest, 0.0f});
    Tensor x = rig.ctx.empty({3}, t, TensorCategory::kGradients);
    ops::cast(rig.ctx, f, x);
    ops::fill(rig.ctx, flag, 0.0f);
    ops::find_nonfinite(rig.ctx, x, flag);
    EXPECT_EQ(values_of(rig.ctx, flag)[0], 0.0f) << to_string(t);
    ops::fill(rig.ctx, flag, 1.0f);
    ops::find_nonfinite(rig.ctx, x, flag);
    EXPECT_EQ(values_of(rig.ctx, flag)[0], 1.0f) << "the flag is only ever set";
  }
  Tensor wrong_flag = rig.ctx.empty({2}, DType::kF32, TensorCategory::kWorkspace);
  Tensor x = rig.ctx.zeros({3}, DType::kF32, TensorCategory::kGradients);
  EXPECT_THROW(ops::find_nonfinite(rig.ctx, x, wrong_flag), Error);
}

// ---- training steps --------------------------------------------------------------------------

// A small CNN with every weighted layer kind and BatchNorm, no dropout (a skipped step then
// leaves nothing behind that depends on the step count).
std::unique_ptr<Sequential> small_cnn(Context& ctx) {
  auto m = std::make_unique<Sequential>(Shape{1, 8, 8});
  m->add<Conv2D>(ctx, Conv2DOptions{.in_channels = 1, .out_channels = 8, .bias = true});
  m->add<BatchNorm>(ctx, BatchNormOptions{.channels = 8});
  m->add<ReLU>();
  m->add<DepthwiseConv2D>(ctx, DepthwiseConv2DOptions{.channels = 8, .bias = true});
  m->add<MaxPool2D>();
  m->add<SeparableConv2D>(ctx, SeparableConv2DOptions{.in_channels = 8, .out_channels = 16, .bias = true});
  m->add<BatchNorm>(ctx, BatchNormOptions{.channels = 16});
  m->add<ReLU>();
  m->add<GlobalAvgPool>();
  m->add<Dense>(ctx, DenseOptions{.in_features = 16, .out_features = 4});
  m->initialize(ctx, 7);
  return m;
}

// Sgd with its momentum buffers in view.
class PeekSgd : public Sgd {
 public:
  using Sgd::Sgd;
  const std::vector<std::vector<Tensor>>& state() const { return state_; }
};

constexpr std::int64_t kBatch = 32;

struct Snapshot {
  std::vector<std::vector<float>> weights, grads, buffers, momentum;
};

Snapshot snapshot(Context& ctx, Sequential& m, const PeekSgd& opt) {
  Snapshot s;
  for (const Parameter& p : m.parameters()) {
    s.weights.push_back(values_of(ctx, *p.value));
    s.grads.push_back(values_of(ctx, *p.grad));
  }
  for (const Buffer& b : m.buffers()) s.buffers.push_back(values_of(ctx, *b.value));
  for (const auto& slots : opt.state()) {
    for (const Tensor& t : slots) s.momentum.push_back(values_of(ctx, t));
  }
  return s;
}

struct StepRun {
  Snapshot after;
  std::vector<double> losses;
  PrecisionStats stats;
  AllocatorStats memory;
};

StepRun run_steps(Precision precision, int steps, int threads = 1, LossScalerOptions scaling = {}) {
  HostRig rig(threads);
  auto model = small_cnn(rig.ctx);
  PeekSgd opt(SgdOptions{.learning_rate = 0.05f});
  Trainer trainer(rig.ctx, *model, opt, TrainerOptions{.precision = precision, .loss_scaling = scaling});
  const test::ToySet set = test::toy_set(kBatch * steps, 1, 8, 4, 5);
  StepRun r;
  for (int s = 0; s < steps; ++s) {
    TensorView view{const_cast<float*>(set.images.data()) + s * kBatch * 64, DType::kF32, {kBatch, 1, 8, 8}};
    r.losses.push_back(trainer.step(view, std::span<const std::int32_t>(set.labels.data() + s * kBatch, kBatch)).mean_loss());
  }
  r.after = snapshot(rig.ctx, *model, opt);
  r.stats = trainer.precision_stats();
  r.memory = trainer.memory();
  return r;
}

// The relative L2 distance of b from a over all tensors.
double relative_distance(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  double num = 0, den = 0;
  for (std::size_t t = 0; t < a.size(); ++t) {
    for (std::size_t i = 0; i < a[t].size(); ++i) {
      const double d = static_cast<double>(a[t][i]) - b[t][i];
      num += d * d;
      den += static_cast<double>(a[t][i]) * a[t][i];
    }
  }
  return std::sqrt(num / den);
}

TEST(MixedPrecisionTraining, A16BitStepIsCloseToTheF32Step) {
  const StepRun f32 = run_steps(Precision::kF32, 1);
  for (auto [precision, grad_tol, loss_tol] :
       {std::tuple{Precision::kMixedF16, 1e-2, 1e-3}, std::tuple{Precision::kMixedBF16, 6e-2, 1e-2}}) {
    const StepRun mixed = run_steps(precision, 1);
    SCOPED_TRACE(std::string(to_string(precision)));
    EXPECT_EQ(mixed.stats.skipped_steps, 0);
    EXPECT_NEAR(mixed.losses[0], f32.losses[0], loss_tol * f32.losses[0]);
    // The master gradients (unscaled, f32) and the updated master weights.
    const double grad_distance = relative_distance(f32.after.grads, mixed.after.grads);
    EXPECT_LT(grad_distance, grad_tol);
    EXPECT_LT(relative_distance(f32.after.weights, mixed.after.weights), grad_tol / 10);
    std::printf("  %s: loss %.6f vs f32 %.6f, gradients at relative L2 distance %.2e from f32\n",
                std::string(to_string(precision)).c_str(), mixed.losses[0], f32.losses[0], grad_distance);
  }
}

TEST(MixedPrecisionTraining, ASkippedStepLeavesWeightsBuffersAndOptimizerStateUnchanged) {
  HostRig rig;
  auto model = small_cnn(rig.ctx);
  PeekSgd opt(SgdOptions{.learning_rate = 0.05f});
  Trainer trainer(rig.ctx, *model, opt, TrainerOptions{.precision = Precision::kMixedF16});
  test::ToySet set = test::toy_set(2 * kBatch, 1, 8, 4, 5);
  const auto labels = std::span<const std::int32_t>(set.labels.data(), kBatch);
  trainer.step({set.images.data(), DType::kF32, {kBatch, 1, 8, 8}}, labels);
  ASSERT_EQ(trainer.precision_stats().skipped_steps, 0);
  ASSERT_EQ(opt.steps(), 1);
  const Snapshot before = snapshot(rig.ctx, *model, opt);
  ASSERT_FALSE(before.momentum.empty());

  // A NaN in the batch: every gradient (and BatchNorm's batch statistics) NaN.
  std::vector<float> poisoned(set.images.begin() + kBatch * 64, set.images.end());
  poisoned[100] = std::numeric_limits<float>::quiet_NaN();
  trainer.step({poisoned.data(), DType::kF32, {kBatch, 1, 8, 8}}, labels);
  const PrecisionStats s = trainer.precision_stats();
  EXPECT_EQ(s.skipped_steps, 1);
  EXPECT_EQ(s.loss_scale, 32768.0f);
  EXPECT_EQ(opt.steps(), 1);  // the optimizer did not run
  EXPECT_EQ(trainer.steps(), 2);
  const Snapshot after = snapshot(rig.ctx, *model, opt);
  EXPECT_EQ(after.weights, before.weights);
  EXPECT_EQ(after.buffers, before.buffers);  // the running statistics were put back
  EXPECT_EQ(after.momentum, before.momentum);

  // And training goes on from there.
  trainer.step({set.images.data() + kBatch * 64, DType::kF32, {kBatch, 1, 8, 8}}, labels);
  EXPECT_EQ(opt.steps(), 2);
  EXPECT_EQ(trainer.precision_stats().skipped_steps, 1);
  for (const auto& w : snapshot(rig.ctx, *model, opt).weights) {
    for (float v : w) ASSERT_TRUE(std::isfinite(v));
  }
}

TEST(MixedPrecisionTraining, AnOverflowingScaleBacksOffUntilStepsAreFiniteThenGrows) {
  // 2^24 overflows f16 (in the gradients, if not already in the loss gradient); halving finds a
  // scale that fits, and with an interval of 2 the scale then doubles after two finite steps.
  const StepRun r = run_steps(Precision::kMixedF16, 20, 1, LossScalerOptions{.initial_scale = 16777216.0f,
                                                                             .growth_interval = 2});
  EXPECT_GE(r.stats.skipped_steps, 1);
  EXPECT_GE(r.stats.growth_events, 1);
  EXPECT_LT(r.stats.loss_scale, 16777216.0f);
  for (const auto& w : r.after.weights) {
    for (float v : w) ASSERT_TRUE(std::isfinite(v));
  }
  // bf16 does not scale: nothing skipped, the scale reported as 1.
  const StepRun bf16 = run_steps(Precision::kMixedBF16, 2);
  EXPECT_EQ(bf16.stats.skipped_steps, 0);
  EXPECT_EQ(bf16.stats.loss_scale, 1.0f);
}

TEST(MixedPrecisionTraining, SameWeightsAt1And2Threads) {
  for (Precision p : {Precision::kMixedF16, Precision::kMixedBF16}) {
    const StepRun one = run_steps(p, 3, 1);
    const StepRun two = run_steps(p, 3, 2);
    EXPECT_EQ(one.after.weights, two.after.weights) << to_string(p);
    EXPECT_EQ(one.after.buffers, two.after.buffers) << to_string(p);
    EXPECT_EQ(one.losses, two.losses) << to_string(p);
  }
}

TEST(MixedPrecisionTraining, ActivationPeakIsAboutHalfAndCopiesCountAsWeights) {
  // fashion-cnn, one step at batch 32: the activations' peak in 16-bit against f32.
  auto peak = [](Precision p) {
    HostRig rig;
    auto model = make_model(rig.ctx, "fashion-cnn", 1);
    Sgd opt;
    Trainer trainer(rig.ctx, *model, opt, TrainerOptions{.precision = p});
    const std::vector<float> images = test::random_values(kBatch * 28 * 28, 3);
    std::vector<std::int32_t> labels(kBatch);
    for (std::int64_t i = 0; i < kBatch; ++i) labels[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i % 10);
    trainer.step({const_cast<float*>(images.data()), DType::kF32, {kBatch, 1, 28, 28}}, labels);
    return trainer.memory();
  };
  const auto category = [](const AllocatorStats& s, TensorCategory c) {
    return static_cast<double>(s.by_category[static_cast<std::size_t>(c)].peak_in_use_bytes);
  };
  const AllocatorStats f32 = peak(Precision::kF32);
  for (Precision p : {Precision::kMixedF16, Precision::kMixedBF16}) {
    const AllocatorStats mixed = peak(p);
    const double ratio = category(mixed, TensorCategory::kActivations) / category(f32, TensorCategory::kActivations);
    std::printf("  %s: activation peak %.0f bytes, %.3f of f32's %.0f\n", std::string(to_string(p)).c_str(),
                category(mixed, TensorCategory::kActivations), ratio, category(f32, TensorCategory::kActivations));
    EXPECT_GT(ratio, 0.45) << to_string(p);
    EXPECT_LT(ratio, 0.55) << to_string(p);
    // The 16-bit copies of the weights (BatchNorm's stay f32) are weights, their gradients
    // gradients: between 1.4 and 1.5 times f32's (and a little more for the weights in f16: the
    // copy of BatchNorm's running statistics a skipped step restores).
    for (TensorCategory c : {TensorCategory::kWeights, TensorCategory::kGradients}) {
      const double r = category(mixed, c) / category(f32, c);
      EXPECT_GT(r, 1.4) << to_string(p) << " " << to_string(c);
      EXPECT_LE(r, 1.51) << to_string(p) << " " << to_string(c);
    }
    EXPECT_EQ(category(mixed, TensorCategory::kOptimizerState), category(f32, TensorCategory::kOptimizerState));
  }
}

TEST(MixedPrecisionTraining, AccumulatedMicroBatchesMatchTheFullBatchStep) {
  // No BatchNorm (its statistics are per micro-batch): K = 2 micro-batches of 16-bit gradients,
  // accumulated in 16-bit, unscaled and checked once, against one batch of 32.
  auto model_for = [](Context& ctx) {
    auto m = std::make_unique<Sequential>(Shape{1, 8, 8});
    m->add<Conv2D>(ctx, Conv2DOptions{.in_channels = 1, .out_channels = 8, .bias = true});
    m->add<ReLU>();
    m->add<MaxPool2D>();
    m->add<Flatten>();
    m->add<Dense>(ctx, DenseOptions{.in_features = 8 * 4 * 4, .out_features = 4});
    m->initialize(ctx, 11);
    return m;
  };
  const test::ToySet set = test::toy_set(kBatch, 1, 8, 4, 5);
  for (Precision p : {Precision::kMixedF16, Precision::kMixedBF16}) {
    std::vector<std::vector<float>> grads[2];
    int side = 0;
    for (int k : {1, 2}) {
      HostRig rig;
      auto model = model_for(rig.ctx);
      Sgd opt(SgdOptions{.learning_rate = 0.05f});
      Trainer trainer(rig.ctx, *model, opt, TrainerOptions{.accumulate = k, .precision = p});
      trainer.step({const_cast<float*>(set.images.data()), DType::kF32, {kBatch, 1, 8, 8}}, set.labels);
      EXPECT_EQ(trainer.precision_stats().skipped_steps, 0);
      for (const Parameter& param : model->parameters()) grads[side].push_back(values_of(rig.ctx, *param.grad));
      ++side;
    }
    EXPECT_LT(relative_distance(grads[0], grads[1]), p == Precision::kMixedF16 ? 5e-3 : 3e-2) << to_string(p);
  }
}

TEST(MixedPrecisionTraining, ASkippedAccumulatedStepPutsBackTheRunningStatisticsOfAllMicroBatches) {
  HostRig rig;
  auto model = small_cnn(rig.ctx);
  PeekSgd opt(SgdOptions{.learning_rate = 0.05f});
  Trainer trainer(rig.ctx, *model, opt, TrainerOptions{.accumulate = 2, .precision = Precision::kMixedF16});
  test::ToySet set = test::toy_set(kBatch, 1, 8, 4, 5);
  const Snapshot before = snapshot(rig.ctx, *model, opt);
  // The NaN in the second micro-batch: the first one's statistics are finite, and go back too.
  set.images[static_cast<std::size_t>(kBatch / 2 * 64 + 5)] = std::numeric_limits<float>::quiet_NaN();
  trainer.step({set.images.data(), DType::kF32, {kBatch, 1, 8, 8}}, set.labels);
  EXPECT_EQ(trainer.precision_stats().skipped_steps, 1);
  const Snapshot after = snapshot(rig.ctx, *model, opt);
  EXPECT_EQ(after.weights, before.weights);
  EXPECT_EQ(after.buffers, before.buffers);
}

TEST(MixedPrecisionTraining, TheModelIsBackToF32WhenTheTrainerGoes) {
  HostRig rig;
  auto model = small_cnn(rig.ctx);
  const std::uint64_t before = rig.allocator.stats().in_use_bytes;
  {
    Sgd opt;
    Trainer trainer(rig.ctx, *model, opt, TrainerOptions{.precision = Precision::kMixedBF16});
    EXPECT_GT(rig.allocator.stats().in_use_bytes, before);
    for (const Parameter& p : model->parameters()) {
      if (p.compute != nullptr) EXPECT_EQ(p.compute->dtype(), DType::kBF16) << p.name;
    }
  }
  EXPECT_EQ(rig.allocator.stats().in_use_bytes, before);
  for (const Parameter& p : model->parameters()) EXPECT_EQ(p.compute, nullptr) << p.name;
}

}  // namespace
}  // namespace sluice::train
