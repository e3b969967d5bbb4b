// Finite-difference gradient checks of every op's backward on the CPU backend: for a random
// upstream gradient r, the backward's dx, dw, dbias, dgamma, dbeta must equal the central
// differences of L = sum(r * forward(...)). Small shapes, odd sizes, padding and strides that
// leave rows unread, so the index arithmetic of each kernel is exercised, not just its bulk.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>

#include "ops_test_support.hpp"

namespace sluice {
// For test names and failure messages (gtest would print the object's bytes).
inline void PrintTo(const Shape& s, std::ostream* os) { *os << s.to_string(); }
}  // namespace sluice

namespace sluice::train {
namespace {

using test::dot;
using test::expect_gradient;
using test::OpsEnv;
using test::random_tensor;
using test::random_values;
using test::values;

struct ConvCase {
  const char* name;
  Shape input;
  int out_channels;
  Window2d window;
};

void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name; }

class Conv2dGradient : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conv2dGradient, DxDwDbiasMatchFiniteDifferences) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  const ConvCase& c = GetParam();
  const Conv2dShape s = Conv2dShape::make(c.input, c.out_channels, c.window);
  Tensor x = random_tensor(ctx, s.input(), 1);
  Tensor w = random_tensor(ctx, s.weight(), 2);
  Tensor b = random_tensor(ctx, {s.out_channels}, 3);
  Tensor y = ctx.empty(s.output(), DType::kF32, TensorCategory::kActivations);
  const std::vector<float> r = random_values(y.elements(), 4);
  Tensor dy = test::make(ctx, s.output(), r);
  Tensor dx = ctx.empty(s.input(), DType::kF32, TensorCategory::kGradients);
  Tensor dw = ctx.empty(s.weight(), DType::kF32, TensorCategory::kGradients);
  Tensor db = ctx.empty({s.out_channels}, DType::kF32, TensorCategory::kGradients);
  ops::conv2d_backward(ctx, s, x, w, dy, &dx, dw, &db);
  auto loss = [&] {
    ops::conv2d_forward(ctx, s, x, w, &b, y);
    return dot(y, r);
  };
  expect_gradient("dx", x, values(dx), loss);
  expect_gradient("dw", w, values(dw), loss);
  expect_gradient("dbias", b, values(db), loss);
}

INSTANTIATE_TEST_SUITE_P(
    Cpu, Conv2dGradient,
    ::testing::Values(ConvCase{"k3_s1_p1", {2, 3, 5, 6}, 4, Window2d::square(3, 1, 1)},
                      ConvCase{"k3_s2_p1", {2, 2, 7, 6}, 3, Window2d::square(3, 2, 1)},
                      ConvCase{"k1_pointwise", {3, 4, 3, 5}, 2, Window2d::square(1)},
                      ConvCase{"k2x3_s2x1_p1x2", {1, 2, 5, 4}, 3, Window2d{2, 3, 2, 1, 1, 2}},
                      // More images than the backend's 16 reduction groups: a group sums several.
                      ConvCase{"k3_s1_p1_batch18", {18, 2, 4, 4}, 3, Window2d::square(3, 1, 1)}),
    [](const auto& info) { return std::string(info.param.name); });

class DepthwiseGradient : public ::testing::TestWithParam<ConvCase> {};

TEST_P(DepthwiseGradient, DxDwDbiasMatchFiniteDifferences) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  const ConvCase& c = GetParam();
  const Conv2dShape s = Conv2dShape::make_depthwise(c.input, c.window);
  Tensor x = random_tensor(ctx, s.input(), 11);
  Tensor w = random_tensor(ctx, s.depthwise_weight(), 12);
  Tensor b = random_tensor(ctx, {s.in_channels}, 13);
  Tensor y = ctx.empty(s.output(), DType::kF32, TensorCategory::kActivations);
  const std::vector<float> r = random_values(y.elements(), 14);
  Tensor dy = test::make(ctx, s.output(), r);
  Tensor dx = ctx.empty(s.input(), DType::kF32, TensorCategory::kGradients);
  Tensor dw = ctx.empty(s.depthwise_weight(), DType::kF32, TensorCategory::kGradients);
  Tensor db = ctx.empty({s.in_channels}, DType::kF32, TensorCategory::kGradients);
  ops::depthwise_conv2d_backward(ctx, s, x, w, dy, &dx, dw, &db);
  auto loss = [&] {
    ops::depthwise_conv2d_forward(ctx, s, x, w, &b, y);
    return dot(y, r);
  };
  expect_gradient("dx", x, values(dx), loss);
  expect_gradient("dw", w, values(dw), loss);
  expect_gradient("dbias", b, values(db), loss);
}

INSTANTIATE_TEST_SUITE_P(Cpu, DepthwiseGradient,
                         ::testing::Values(ConvCase{"k3_s1_p1", {2, 3, 6, 5}, 0, Window2d::square(3, 1, 1)},
                                           ConvCase{"k3_s2_p1", {2, 2, 7, 8}, 0, Window2d::square(3, 2, 1)},
                                           ConvCase{"k5_s1_p2", {1, 2, 6, 6}, 0, Window2d::square(5, 1, 2)},
                                           ConvCase{"k3_s1_p1_batch18", {18, 2, 4, 4}, 0, Window2d::square(3, 1, 1)},
                                           // The 3x3 stride-1 fast path's paddings, and a plane
                                           // too large for it (the general loops).
                                           ConvCase{"k3_s1_p0", {2, 2, 6, 5}, 0, Window2d::square(3, 1, 0)},
                                           ConvCase{"k3_s1_p2", {2, 2, 4, 5}, 0, Window2d::square(3, 1, 2)},
                                           ConvCase{"k3_s1_p1_large", {1, 1, 95, 90}, 0, Window2d::square(3, 1, 1)}),
                         [](const auto& info) { return std::string(info.param.name); });

class SeparableGradient : public ::testing::TestWithParam<ConvCase> {};

TEST_P(SeparableGradient, DxDwdDwpDbiasMatchFiniteDifferences) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  const ConvCase& c = GetParam();
  const SeparableShape s = SeparableShape::make(c.input, c.out_channels, c.window);
  Tensor x = random_tensor(ctx, s.input(), 21);
  Tensor wd = random_tensor(ctx, s.depthwise_weight(), 22);
  Tensor wp = random_tensor(ctx, s.pointwise_weight(), 23);
  Tensor b = random_tensor(ctx, {s.out_channels}, 24);
  Tensor y = ctx.empty(s.output(), DType::kF32, TensorCategory::kActivations);
  const std::vector<float> r = random_values(y.elements(), 25);
  Tensor dy = test::make(ctx, s.output(), r);
  Tensor dx = ctx.empty(s.input(), DType::kF32, TensorCategory::kGradients);
  Tensor dwd = ctx.empty(s.depthwise_weight(), DType::kF32, TensorCategory::kGradients);
  Tensor dwp = ctx.empty(s.pointwise_weight(), DType::kF32, TensorCategory::kGradients);
  Tensor db = ctx.empty({s.out_channels}, DType::kF32, TensorCategory::kGradients);
  ops::separable_conv2d_backward(ctx, s, x, wd, wp, dy, &dx, dwd, dwp, &db);
  auto loss = [&] {
    ops::separable_conv2d_forward(ctx, s, x, wd, wp, &b, y);
    return dot(y, r);
  };
  expect_gradient("dx", x, values(dx), loss);
  expect_gradient("dwd", wd, values(dwd), loss);
  expect_gradient("dwp", wp, values(dwp), loss);
  expect_gradient("dbias", b, values(db), loss);
}

INSTANTIATE_TEST_SUITE_P(Cpu, SeparableGradient,
                         ::testing::Values(ConvCase{"k3_s1_p1", {2, 3, 5, 5}, 4, Window2d::square(3, 1, 1)},
                                           ConvCase{"k3_s2_p1", {3, 2, 6, 7}, 3, Window2d::square(3, 2, 1)},
                                           ConvCase{"k3_s1_p1_batch18", {18, 2, 4, 4}, 3, Window2d::square(3, 1, 1)}),
                         [](const auto& info) { return std::string(info.param.name); });

class DenseGradient : public ::testing::TestWithParam<std::int64_t> {};

TEST_P(DenseGradient, DxDwDbiasMatchFiniteDifferences) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  const DenseShape s = DenseShape::make({GetParam(), 7}, 5);
  Tensor x = random_tensor(ctx, s.input(), 31);
  Tensor w = random_tensor(ctx, s.weight(), 32);
  Tensor b = random_tensor(ctx, {s.out_features}, 33);
  Tensor y = ctx.empty(s.output(), DType::kF32, TensorCategory::kActivations);
  const std::vector<float> r = random_values(y.elements(), 34);
  Tensor dy = test::make(ctx, s.output(), r);
  Tensor dx = ctx.empty(s.input(), DType::kF32, TensorCategory::kGradients);
  Tensor dw = ctx.empty(s.weight(), DType::kF32, TensorCategory::kGradients);
  Tensor db = ctx.empty({s.out_features}, DType::kF32, TensorCategory::kGradients);
  ops::dense_backward(ctx, s, x, w, dy, &dx, dw, &db);
  auto loss = [&] {
    ops::dense_forward(ctx, s, x, w, &b, y);
    return dot(y, r);
  };
  expect_gradient("dx", x, values(dx), loss);
  expect_gradient("dw", w, values(dw), loss);
  expect_gradient("dbias", b, values(db), loss);
}

INSTANTIATE_TEST_SUITE_P(Cpu, DenseGradient, ::testing::Values(3, 20),
                         [](const auto& info) { return "batch" + std::to_string(info.param); });

TEST(ReluGradient, DxMatchesFiniteDifferencesAwayFromTheKink) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  // |x| >= 0.1 > eps: no probe crosses zero, where ReLU has no derivative.
  std::vector<float> xv = random_values(30, 41, 0.1f, 1.0f);
  for (std::size_t i = 0; i < xv.size(); i += 2) xv[i] = -xv[i];
  Tensor x = test::make(ctx, {5, 6}, xv);
  Tensor y = ctx.empty({5, 6}, DType::kF32, TensorCategory::kActivations);
  const std::vector<float> r = random_values(30, 42);
  Tensor dy = test::make(ctx, {5, 6}, r);
  Tensor dx = ctx.empty({5, 6}, DType::kF32, TensorCategory::kGradients);
  ops::relu_forward(ctx, x, y);
  ops::relu_backward(ctx, y, dy, dx);
  expect_gradient("dx", x, values(dx), [&] {
    ops::relu_forward(ctx, x, y);
    return dot(y, r);
  });
}

// Values of a permutation spaced 0.1 apart: every window has one clear maximum, and a probe of
// +-eps cannot change which.
std::vector<float> distinct_values(std::int64_t n, std::uint32_t seed) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = 0.1f * static_cast<float>(i) - 2.0f;
  std::mt19937 rng(seed);
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

TEST(MaxPoolGradient, DxMatchesFiniteDifferencesWithAndWithoutOverlap) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  for (const Window2d& win : {Window2d::square(2, 2), Window2d::square(3, 2, 1)}) {
    const Pool2dShape s = Pool2dShape::make({2, 2, 5, 6}, win);
    Tensor x = test::make(ctx, s.input(), distinct_values(s.input().elements(), 51));
    Tensor y = ctx.empty(s.output(), DType::kF32, TensorCategory::kActivations);
    const std::vector<float> r = random_values(y.elements(), 52);
    Tensor dy = test::make(ctx, s.output(), r);
    Tensor dx = ctx.empty(s.input(), DType::kF32, TensorCategory::kGradients);
    ops::maxpool2d_backward(ctx, s, x, dy, dx);
    expect_gradient("dx", x, values(dx), [&] {
      ops::maxpool2d_forward(ctx, s, x, y);
      return dot(y, r);
    });
  }
}

TEST(GlobalAvgPoolGradient, DxMatchesFiniteDifferences) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  Tensor x = random_tensor(ctx, {2, 3, 4, 5}, 61);
  Tensor y = ctx.empty({2, 3}, DType::kF32, TensorCategory::kActivations);
  const std::vector<float> r = random_values(6, 62);
  Tensor dy = test::make(ctx, {2, 3}, r);
  Tensor dx = ctx.empty({2, 3, 4, 5}, DType::kF32, TensorCategory::kGradients);
  ops::global_avg_pool_backward(ctx, dy, dx);
  expect_gradient("dx", x, values(dx), [&] {
    ops::global_avg_pool_forward(ctx, x, y);
    return dot(y, r);
  });
}

class BatchNormGradient : public ::testing::TestWithParam<Shape> {};

TEST_P(BatchNormGradient, DxDgammaDbetaMatchFiniteDifferencesThroughTheBatchStatistics) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  const Shape in = GetParam();
  const BatchNormShape s = BatchNormShape::make(in);
  const int C = s.channels;
  // Inputs off centre and spread unevenly, so mean and variance both matter.
  Tensor x = random_tensor(ctx, in, 71, DType::kF32, -0.5f, 2.0f);
  Tensor gamma = random_tensor(ctx, {C}, 72, DType::kF32, 0.5f, 1.5f);
  Tensor beta = random_tensor(ctx, {C}, 73);
  Tensor rm = ctx.zeros({C}, DType::kF32, TensorCategory::kWeights);
  Tensor rv = ctx.zeros({C}, DType::kF32, TensorCategory::kWeights);
  Tensor mean = ctx.empty({C}, DType::kF32, TensorCategory::kActivations);
  Tensor invstd = ctx.empty({C}, DType::kF32, TensorCategory::kActivations);
  Tensor y = ctx.empty(in, DType::kF32, TensorCategory::kActivations);
  const std::vector<float> r = random_values(y.elements(), 74);
  Tensor dy = test::make(ctx, in, r);
  Tensor dx = ctx.empty(in, DType::kF32, TensorCategory::kGradients);
  Tensor dgamma = ctx.empty({C}, DType::kF32, TensorCategory::kGradients);
  Tensor dbeta = ctx.empty({C}, DType::kF32, TensorCategory::kGradients);
  const BatchNormParams p{.update_running_stats = false};
  ops::batchnorm_forward_training(ctx, s, p, x, gamma, beta, rm, rv, y, mean, invstd);
  ops::batchnorm_backward(ctx, s, x, gamma, mean, invstd, dy, &dx, dgamma, dbeta);
  auto loss = [&] {
    ops::batchnorm_forward_training(ctx, s, p, x, gamma, beta, rm, rv, y, mean, invstd);
    return dot(y, r);
  };
  // The normalisation divides by a standard deviation of about 0.7: a smaller eps keeps the
  // curvature's share of the central difference below the tolerance.
  expect_gradient("dx", x, values(dx), loss, 3e-3f, 3e-3, 2e-2);
  expect_gradient("dgamma", gamma, values(dgamma), loss);
  expect_gradient("dbeta", beta, values(dbeta), loss);
}

INSTANTIATE_TEST_SUITE_P(Cpu, BatchNormGradient, ::testing::Values(Shape{3, 2, 3, 4}, Shape{6, 5}),
                         [](const auto& info) { return info.param.rank() == 4 ? std::string("NCHW") : std::string("NC"); });

TEST(DropoutGradient, DxMatchesFiniteDifferencesWithTheSameMask) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  const DropoutMask m{.rate = 0.3f, .key = 99, .step = 5};
  Tensor x = random_tensor(ctx, {4, 9}, 81);
  Tensor y = ctx.empty({4, 9}, DType::kF32, TensorCategory::kActivations);
  const std::vector<float> r = random_values(36, 82);
  Tensor dy = test::make(ctx, {4, 9}, r);
  Tensor dx = ctx.empty({4, 9}, DType::kF32, TensorCategory::kGradients);
  ops::dropout_backward(ctx, m, dy, dx);
  expect_gradient("dx", x, values(dx), [&] {
    ops::dropout_forward(ctx, m, x, y);
    return dot(y, r);
  });
}

TEST(SoftmaxCrossEntropyGradient, DlogitsMatchesFiniteDifferencesOfTheMeanLoss) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  Tensor logits = random_tensor(ctx, {4, 5}, 91, DType::kF32, -2.0f, 2.0f);
  Tensor labels = test::make(ctx, {4}, {0, 3, 4, 1}, DType::kI32, TensorCategory::kInputHost);
  Tensor dlogits = ctx.empty({4, 5}, DType::kF32, TensorCategory::kGradients);
  ops::softmax_cross_entropy(ctx, logits, labels, &dlogits);
  expect_gradient("dlogits", logits, values(dlogits),
                  [&] { return ops::softmax_cross_entropy(ctx, logits, labels, nullptr).loss; }, 1e-2f, 1e-3, 1e-2);
}

}  // namespace
}  // namespace sluice::train
