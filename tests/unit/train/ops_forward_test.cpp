// The CPU backend's forward results against naive reference loops written from the definitions
// (direct convolution sums, max over windows, batch statistics in double), the accumulate mode of
// every parameter gradient, and the argument checks' messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops_test_support.hpp"

namespace sluice::train {
namespace {

using test::expect_rejects;
using test::OpsEnv;
using test::random_tensor;
using test::values;

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double tol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int failures = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::abs(got[i] - want[i]) > tol * (1.0 + std::abs(want[i])) && ++failures <= 5) {
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i];
    }
  }
}

// y[n][k][oy][ox] = b[k] + sum over c, ky, kx of w[k][c][ky][kx] * x[n][c][iy][ix] (zero outside).
// groups == C: depthwise (w is (C, 1, kh, kw), channel k reads channel k only).
std::vector<double> naive_conv(const Conv2dShape& s, const std::vector<float>& x, const std::vector<float>& w,
                               const std::vector<float>* b, bool depthwise) {
  const Window2d& win = s.window;
  std::vector<double> y(static_cast<std::size_t>(s.output().elements()));
  const int cin = depthwise ? 1 : s.in_channels;
  for (std::int64_t n = 0; n < s.batch; ++n)
    for (int k = 0; k < s.out_channels; ++k)
      for (int oy = 0; oy < s.out_h; ++oy)
        for (int ox = 0; ox < s.out_w; ++ox) {
          double acc = b ? (*b)[k] : 0.0;
          for (int ci = 0; ci < cin; ++ci) {
            const int c = depthwise ? k : ci;
            for (int ky = 0; ky < win.kernel_h; ++ky)
              for (int kx = 0; kx < win.kernel_w; ++kx) {
                const int iy = oy * win.stride_h - win.pad_h + ky, ix = ox * win.stride_w - win.pad_w + kx;
                if (iy < 0 || iy >= s.in_h || ix < 0 || ix >= s.in_w) continue;
                acc += double{w[((std::size_t(k) * cin + ci) * win.kernel_h + ky) * win.kernel_w + kx]} *
                       x[((std::size_t(n) * s.in_channels + c) * s.in_h + iy) * s.in_w + ix];
              }
          }
          y[((std::size_t(n) * s.out_channels + k) * s.out_h + oy) * s.out_w + ox] = acc;
        }
  return y;
}

TEST(Conv2dForward, MatchesADirectConvolutionForStridesPaddingAndPointwise) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  for (const auto& [in, k, win] : {std::tuple{Shape{3, 3, 7, 6}, 5, Window2d::square(3, 1, 1)},
                                   std::tuple{Shape{2, 4, 9, 8}, 3, Window2d::square(3, 2, 1)},
                                   std::tuple{Shape{2, 6, 4, 5}, 7, Window2d::square(1)},
                                   std::tuple{Shape{1, 2, 6, 7}, 2, Window2d{2, 3, 1, 2, 1, 0}}}) {
    const Conv2dShape s = Conv2dShape::make(in, k, win);
    Tensor x = random_tensor(ctx, s.input(), 1), w = random_tensor(ctx, s.weight(), 2);
    Tensor b = random_tensor(ctx, {k}, 3);
    Tensor y = ctx.empty(s.output(), DType::kF32, TensorCategory::kActivations);
    ops::conv2d_forward(ctx, s, x, w, &b, y);
    const std::vector<float> bv = values(b);
    expect_close(values(y), naive_conv(s, values(x), values(w), &bv, false), 1e-5, "y");
    ops::conv2d_forward(ctx, s, x, w, nullptr, y);
    expect_close(values(y), naive_conv(s, values(x), values(w), nullptr, false), 1e-5, "y without bias");
  }
}

TEST(DepthwiseConv2dForward, MatchesADirectPerChannelConvolution) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  for (const auto& [in, win] : {std::pair{Shape{2, 5, 8, 7}, Window2d::square(3, 1, 1)},
                                std::pair{Shape{3, 3, 9, 10}, Window2d::square(3, 2, 1)},
                                std::pair{Shape{1, 2, 5, 5}, Window2d{3, 1, 1, 1, 0, 0}},
                                // 3x3 stride 1 (the fast path) at each padding, and too large for it.
                                std::pair{Shape{2, 3, 6, 5}, Window2d::square(3, 1, 0)},
                                std::pair{Shape{1, 2, 4, 5}, Window2d::square(3, 1, 2)},
                                std::pair{Shape{1, 1, 95, 90}, Window2d::square(3, 1, 1)}}) {
    const Conv2dShape s = Conv2dShape::make_depthwise(in, win);
    Tensor x = random_tensor(ctx, s.input(), 4), w = random_tensor(ctx, s.depthwise_weight(), 5);
    Tensor b = random_tensor(ctx, {s.in_channels}, 6);
    Tensor y = ctx.empty(s.output(), DType::kF32, TensorCategory::kActivations);
    ops::depthwise_conv2d_forward(ctx, s, x, w, &b, y);
    const std::vector<float> bv = values(b);
    expect_close(values(y), naive_conv(s, values(x), values(w), &bv, true), 1e-5, "y");
  }
}

TEST(SeparableConv2dForward, IsTheDepthwiseThenThePointwiseConvolution) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  const SeparableShape s = SeparableShape::make({3, 4, 7, 6}, 5, Window2d::square(3, 2, 1));
  Tensor x = random_tensor(ctx, s.input(), 7);
  Tensor wd = random_tensor(ctx, s.depthwise_weight(), 8), wp = random_tensor(ctx, s.pointwise_weight(), 9);
  Tensor b = random_tensor(ctx, {5}, 10);
  Tensor y = ctx.empty(s.output(), DType::kF32, TensorCategory::kActivations);
  ops::separable_conv2d_forward(ctx, s, x, wd, wp, &b, y);
  const std::vector<double> t = naive_conv(s.depthwise, values(x), values(wd), nullptr, true);
  const Conv2dShape pointwise = Conv2dShape::make(s.depthwise.output(), 5, Window2d::square(1));
  const std::vector<float> tf(t.begin(), t.end());
  const std::vector<float> bv = values(b);
  expect_close(values(y), naive_conv(pointwise, tf, values(wp), &bv, false), 1e-5, "y");
}

TEST(DenseForward, IsXTimesWTransposedPlusBias) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  const DenseShape s = DenseShape::make({5, 9}, 4);
  Tensor x = random_tensor(ctx, s.input(), 11), w = random_tensor(ctx, s.weight(), 12), b = random_tensor(ctx, {4}, 13);
  Tensor y = ctx.empty(s.output(), DType::kF32, TensorCategory::kActivations);
  ops::dense_forward(ctx, s, x, w, &b, y);
  std::vector<double> want(20);
  const auto xv = values(x), wv = values(w), bv = values(b);
  for (int n = 0; n < 5; ++n)
    for (int o = 0; o < 4; ++o) {
      double acc = bv[o];
      for (int i = 0; i < 9; ++i) acc += double{xv[n * 9 + i]} * wv[o * 9 + i];
      want[n * 4 + o] = acc;
    }
  expect_close(values(y), want, 1e-5, "y");
}

TEST(ReluForward, ClampsNegativesInPlaceAndOutOfPlace) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  Tensor x = test::make(ctx, {2, 3}, {-1.5f, 0.0f, 2.0f, -0.0f, 3.25f, -7.0f});
  Tensor y = ctx.empty({2, 3}, DType::kF32, TensorCategory::kActivations);
  ops::relu_forward(ctx, x, y);
  EXPECT_EQ(values(y), (std::vector<float>{0, 0, 2, 0, 3.25f, 0}));
  ops::relu_forward(ctx, x, x);
  EXPECT_EQ(values(x), values(y));
  Tensor dy = test::make(ctx, {2, 3}, {1, 2, 3, 4, 5, 6});
  ops::relu_backward(ctx, y, dy, dy);  // in place: dx is dy
  EXPECT_EQ(values(dy), (std::vector<float>{0, 0, 3, 0, 5, 0}));
}

TEST(MaxPoolForward, TakesTheWindowMaximumIgnoringPadding) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  // All negative: padding taken as zero instead of -infinity would show as 0 at the borders.
  const Pool2dShape s = Pool2dShape::make({2, 3, 5, 6}, Window2d::square(3, 2, 1));
  Tensor x = random_tensor(ctx, s.input(), 14, DType::kF32, -2.0f, -0.5f);
  Tensor y = ctx.empty(s.output(), DType::kF32, TensorCategory::kActivations);
  ops::maxpool2d_forward(ctx, s, x, y);
  const auto xv = values(x);
  std::vector<double> want;
  for (int p = 0; p < 6; ++p)
    for (int oy = 0; oy < s.out_h; ++oy)
      for (int ox = 0; ox < s.out_w; ++ox) {
        double m = -std::numeric_limits<double>::infinity();
        for (int iy = oy * 2 - 1; iy <= oy * 2 + 1; ++iy)
          for (int ix = ox * 2 - 1; ix <= ox * 2 + 1; ++ix)
            if (iy >= 0 && iy < 5 && ix >= 0 && ix < 6) m = std::max<double>(m, xv[(p * 5 + iy) * 6 + ix]);
        want.push_back(m);
      }
  expect_close(values(y), want, 0.0, "y");
}

TEST(MaxPoolForward, TwoByTwoStrideTwoMatchesTheGeneralWindowOnOddSizesAndPropagatesNaN) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  // 2x2 stride 2 has loops of its own; 2x2 stride 3 (also disjoint windows) takes the general
  // ones. Both against a direct maximum, on odd sizes (a last row and column no window reads).
  for (const Window2d& win : {Window2d::square(2, 2), Window2d{2, 2, 3, 3, 0, 0}}) {
    const Pool2dShape s = Pool2dShape::make({2, 3, 7, 9}, win);
    Tensor x = random_tensor(ctx, s.input(), 17);
    x.data_as<float>()[9 + 1] = std::numeric_limits<float>::quiet_NaN();  // row 1 of plane 0
    Tensor y = ctx.empty(s.output(), DType::kF32, TensorCategory::kActivations);
    ops::maxpool2d_forward(ctx, s, x, y);
    const auto xv = values(x), yv = values(y);
    for (int p = 0; p < 6; ++p)
      for (int oy = 0; oy < s.out_h; ++oy)
        for (int ox = 0; ox < s.out_w; ++ox) {
          float m = -std::numeric_limits<float>::infinity();
          bool nan = false;
          for (int iy = oy * win.stride_h; iy < oy * win.stride_h + 2; ++iy)
            for (int ix = ox * win.stride_w; ix < ox * win.stride_w + 2; ++ix) {
              const float v = xv[(p * 7 + iy) * 9 + ix];
              nan |= std::isnan(v);
              m = std::max(m, v);
            }
          const float got = yv[(p * s.out_h + oy) * s.out_w + ox];
          if (nan) {
            EXPECT_TRUE(std::isnan(got)) << "a NaN in the window must propagate";
          } else {
            EXPECT_EQ(got, m) << "plane " << p << " (" << oy << ", " << ox << ")";
          }
        }
  }
}

TEST(MaxPoolBackward, SendsTheGradientToTheFirstMaximumOnly) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  const Pool2dShape s = Pool2dShape::make({1, 1, 2, 2}, Window2d::square(2, 2));
  Tensor x = test::make(ctx, s.input(), {1, 3, 3, 2});
  Tensor dy = test::make(ctx, s.output(), {5});
  Tensor dx = ctx.empty(s.input(), DType::kF32, TensorCategory::kGradients);
  ops::maxpool2d_backward(ctx, s, x, dy, dx);
  EXPECT_EQ(values(dx), (std::vector<float>{0, 5, 0, 0}));
  // The general loops (a 3x3 window over the same values, padded) pick the same element.
  const Pool2dShape g = Pool2dShape::make({1, 1, 2, 2}, Window2d::square(3, 2, 1));
  ops::maxpool2d_backward(ctx, g, x, dy, dx);
  EXPECT_EQ(values(dx), (std::vector<float>{0, 5, 0, 0}));
}

TEST(GlobalAvgPoolForward, AveragesEachPlane) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  Tensor x = random_tensor(ctx, {3, 4, 5, 7}, 15);
  Tensor y = ctx.empty({3, 4}, DType::kF32, TensorCategory::kActivations);
  ops::global_avg_pool_forward(ctx, x, y);
  const auto xv = values(x);
  std::vector<double> want(12, 0.0);
  for (int p = 0; p < 12; ++p) {
    for (int i = 0; i < 35; ++i) want[p] += xv[p * 35 + i];
    want[p] /= 35.0;
  }
  expect_close(values(y), want, 1e-6, "y");
}

TEST(BatchNormForward, TrainingNormalisesWithBatchStatisticsAndUpdatesTheRunningOnes) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  const Shape in{4, 3, 5, 6};
  const BatchNormShape s = BatchNormShape::make(in);
  // A large mean over a small spread: E[x^2] - E[x]^2 in f32 would lose the variance here.
  Tensor x = random_tensor(ctx, in, 16, DType::kF32, 99.0f, 101.0f);
  Tensor gamma = test::make(ctx, {3}, {1.0f, 2.0f, 0.5f}), beta = test::make(ctx, {3}, {0.0f, -1.0f, 3.0f});
  Tensor rm = test::make(ctx, {3}, {1.0f, 1.0f, 1.0f}), rv = test::make(ctx, {3}, {2.0f, 2.0f, 2.0f});
  Tensor mean = ctx.empty({3}, DType::kF32, TensorCategory::kActivations);
  Tensor invstd = ctx.empty({3}, DType::kF32, TensorCategory::kActivations);
  Tensor y = ctx.empty(in, DType::kF32, TensorCategory::kActivations);
  const BatchNormParams p{.epsilon = 1e-5f, .momentum = 0.1f};
  ops::batchnorm_forward_training(ctx, s, p, x, gamma, beta, rm, rv, y, mean, invstd);
  const auto xv = values(x), yv = values(y);
  const double M = 4.0 * 30.0;
  for (int c = 0; c < 3; ++c) {
    double sum = 0.0, sq = 0.0;
    for (int n = 0; n < 4; ++n)
      for (int i = 0; i < 30; ++i) sum += xv[(n * 3 + c) * 30 + i];
    const double mu = sum / M;
    for (int n = 0; n < 4; ++n)
      for (int i = 0; i < 30; ++i) sq += (xv[(n * 3 + c) * 30 + i] - mu) * (xv[(n * 3 + c) * 30 + i] - mu);
    const double var = sq / M;
    EXPECT_NEAR(values(mean)[c], mu, 1e-4);
    EXPECT_NEAR(values(invstd)[c], 1.0 / std::sqrt(var + 1e-5), 1e-3 / std::sqrt(var));
    EXPECT_NEAR(values(rm)[c], 0.9 * 1.0 + 0.1 * mu, 1e-4);
    EXPECT_NEAR(values(rv)[c], 0.9 * 2.0 + 0.1 * sq / (M - 1.0), 1e-5);  // unbiased, as PyTorch
    for (int n = 0; n < 4; ++n)
      for (int i = 0; i < 30; ++i) {
        const int at = (n * 3 + c) * 30 + i;
        const double want = (xv[at] - mu) / std::sqrt(var + 1e-5) * values(gamma)[c] + values(beta)[c];
        EXPECT_NEAR(yv[at], want, 2e-3) << "c " << c << " at " << at;
      }
  }
}

TEST(BatchNormForward, InferenceUsesTheRunningStatisticsAndWorksInPlace) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  const BatchNormShape s = BatchNormShape::make({2, 2});
  Tensor x = test::make(ctx, {2, 2}, {1.0f, 2.0f, 3.0f, 4.0f});
  Tensor gamma = test::make(ctx, {2}, {2.0f, 1.0f}), beta = test::make(ctx, {2}, {0.5f, 0.0f});
  Tensor rm = test::make(ctx, {2}, {1.0f, 0.0f}), rv = test::make(ctx, {2}, {4.0f, 1.0f});
  const BatchNormParams p{.epsilon = 0.0001f};
  ops::batchnorm_forward_inference(ctx, s, p, x, gamma, beta, rm, rv, x);
  const auto y = values(x);
  EXPECT_NEAR(y[0], (1.0 - 1.0) / std::sqrt(4.0001) * 2.0 + 0.5, 1e-6);
  EXPECT_NEAR(y[1], 2.0 / std::sqrt(1.0001), 1e-6);
  EXPECT_NEAR(y[2], (3.0 - 1.0) / std::sqrt(4.0001) * 2.0 + 0.5, 1e-6);
  EXPECT_NEAR(y[3], 4.0 / std::sqrt(1.0001), 1e-6);
}

// ---- GradMode::kAccumulate ----------------------------------------------------------------

// Runs backward twice, overwriting and then accumulating onto known values, and checks that the
// second result is the known values plus the first for every parameter gradient.
void expect_accumulates(const std::function<void(GradMode)>& backward, std::vector<Tensor*> grads) {
  backward(GradMode::kOverwrite);
  std::vector<std::vector<float>> fresh;
  for (Tensor* g : grads) fresh.push_back(values(*g));
  for (std::size_t k = 0; k < grads.size(); ++k) {
    for (std::int64_t i = 0; i < grads[k]->elements(); ++i) test::set(*grads[k], i, 0.25f * static_cast<float>(i % 7) - 0.5f);
  }
  backward(GradMode::kAccumulate);
  for (std::size_t k = 0; k < grads.size(); ++k) {
    const auto got = values(*grads[k]);
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], fresh[k][i] + (0.25f * static_cast<float>(i % 7) - 0.5f), 1e-5) << "grad " << k << "[" << i << "]";
    }
  }
}

TEST(GradAccumulate, EveryParameterGradientAddsInsteadOfOverwriting) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  {
    const Conv2dShape s = Conv2dShape::make({3, 2, 5, 5}, 3, Window2d::square(3, 1, 1));
    Tensor x = random_tensor(ctx, s.input(), 1), w = random_tensor(ctx, s.weight(), 2), dy = random_tensor(ctx, s.output(), 3);
    Tensor dw = ctx.empty(s.weight(), DType::kF32, TensorCategory::kGradients);
    Tensor db = ctx.empty({3}, DType::kF32, TensorCategory::kGradients);
    expect_accumulates([&](GradMode m) { ops::conv2d_backward(ctx, s, x, w, dy, nullptr, dw, &db, m); }, {&dw, &db});
  }
  {
    const Conv2dShape s = Conv2dShape::make_depthwise({3, 2, 5, 5}, Window2d::square(3, 1, 1));
    Tensor x = random_tensor(ctx, s.input(), 1), w = random_tensor(ctx, s.depthwise_weight(), 2);
    Tensor dy = random_tensor(ctx, s.output(), 3);
    Tensor dw = ctx.empty(s.depthwise_weight(), DType::kF32, TensorCategory::kGradients);
    Tensor db = ctx.empty({2}, DType::kF32, TensorCategory::kGradients);
    expect_accumulates([&](GradMode m) { ops::depthwise_conv2d_backward(ctx, s, x, w, dy, nullptr, dw, &db, m); },
                       {&dw, &db});
  }
  {
    const SeparableShape s = SeparableShape::make({3, 2, 5, 5}, 4, Window2d::square(3, 1, 1));
    Tensor x = random_tensor(ctx, s.input(), 1), wd = random_tensor(ctx, s.depthwise_weight(), 2);
    Tensor wp = random_tensor(ctx, s.pointwise_weight(), 4), dy = random_tensor(ctx, s.output(), 3);
    Tensor dwd = ctx.empty(s.depthwise_weight(), DType::kF32, TensorCategory::kGradients);
    Tensor dwp = ctx.empty(s.pointwise_weight(), DType::kF32, TensorCategory::kGradients);
    Tensor db = ctx.empty({4}, DType::kF32, TensorCategory::kGradients);
    expect_accumulates(
        [&](GradMode m) { ops::separable_conv2d_backward(ctx, s, x, wd, wp, dy, nullptr, dwd, dwp, &db, m); },
        {&dwd, &dwp, &db});
  }
  {
    const DenseShape s = DenseShape::make({4, 6}, 3);
    Tensor x = random_tensor(ctx, s.input(), 1), w = random_tensor(ctx, s.weight(), 2), dy = random_tensor(ctx, s.output(), 3);
    Tensor dw = ctx.empty(s.weight(), DType::kF32, TensorCategory::kGradients);
    Tensor db = ctx.empty({3}, DType::kF32, TensorCategory::kGradients);
    expect_accumulates([&](GradMode m) { ops::dense_backward(ctx, s, x, w, dy, nullptr, dw, &db, m); }, {&dw, &db});
  }
  {
    const BatchNormShape s = BatchNormShape::make({4, 3});
    Tensor x = random_tensor(ctx, {4, 3}, 1), gamma = random_tensor(ctx, {3}, 2), dy = random_tensor(ctx, {4, 3}, 3);
    Tensor mean = random_tensor(ctx, {3}, 4), invstd = random_tensor(ctx, {3}, 5, DType::kF32, 0.5f, 2.0f);
    Tensor dg = ctx.empty({3}, DType::kF32, TensorCategory::kGradients);
    Tensor db = ctx.empty({3}, DType::kF32, TensorCategory::kGradients);
    expect_accumulates([&](GradMode m) { ops::batchnorm_backward(ctx, s, x, gamma, mean, invstd, dy, nullptr, dg, db, m); },
                       {&dg, &db});
  }
}

// ---- argument checks ------------------------------------------------------------------------

TEST(OpChecks, RejectBadShapesDtypesAliasingAndLabelsWithClearMessages) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  const Conv2dShape s = Conv2dShape::make({2, 3, 5, 5}, 4, Window2d::square(3, 1, 1));
  Tensor x = random_tensor(ctx, s.input(), 1), y = ctx.empty(s.output(), DType::kF32, TensorCategory::kActivations);
  Tensor bad_w = ctx.empty({4, 2, 3, 3}, DType::kF32, TensorCategory::kWeights);
  expect_rejects([&] { ops::conv2d_forward(ctx, s, x, bad_w, nullptr, y); },
                 "conv2d_forward: w is f32 (4, 2, 3, 3) on host, weights; expected f32 (4, 3, 3, 3) on host");
  Tensor w16 = ctx.empty(s.weight(), DType::kF16, TensorCategory::kWeights);
  expect_rejects([&] { ops::conv2d_forward(ctx, s, x, w16, nullptr, y); }, "conv2d_forward: w is f16");
  Tensor xi = ctx.empty(s.input(), DType::kI32, TensorCategory::kActivations);
  expect_rejects([&] { ops::relu_forward(ctx, xi, xi); }, "expected f32, f16 or bf16");
  expect_rejects([] { Conv2dShape::make({2, 3, 5}, 4, Window2d::square(3)); }, "conv2d: input must be (N, C, H, W)");
  expect_rejects([] { Conv2dShape::make({2, 3, 2, 2}, 4, Window2d::square(5)); }, "larger than the padded input");
  expect_rejects([] { Pool2dShape::make({1, 1, 4, 4}, Window2d::square(2, 2, 2)); }, "padding must be smaller");
  expect_rejects([] { DenseShape::make({2, 3}, 0); }, "out_features must be positive");

  // Outputs that overlap inputs.
  Tensor both = ctx.empty({2, 3, 5, 5}, DType::kF32, TensorCategory::kActivations);
  const Conv2dShape d = Conv2dShape::make_depthwise({2, 3, 5, 5}, Window2d::square(3, 1, 1));
  Tensor wd = random_tensor(ctx, d.depthwise_weight(), 2);
  expect_rejects([&] { ops::depthwise_conv2d_forward(ctx, d, both, wd, nullptr, both); },
                 "y overlaps x; this op does not work in place");

  // Labels out of range name the row.
  Tensor logits = random_tensor(ctx, {3, 4}, 3);
  Tensor labels = test::make(ctx, {3}, {0, 4, 1}, DType::kI32, TensorCategory::kInputHost);
  expect_rejects([&] { ops::softmax_cross_entropy(ctx, logits, labels, nullptr); },
                 "label 4 of row 1 is out of range [0, 4)");
  Tensor neg = test::make(ctx, {3}, {0, 1, -1}, DType::kI32, TensorCategory::kInputHost);
  expect_rejects([&] { ops::softmax_cross_entropy(ctx, logits, neg, nullptr); }, "label -1 of row 2");

  // BatchNorm needs two values per channel to train; cast converts floating types only and
  // not in place across widths.
  const BatchNormShape one = BatchNormShape::make({1, 2});
  Tensor x1 = random_tensor(ctx, {1, 2}, 4), c2 = ctx.zeros({2}, DType::kF32, TensorCategory::kWeights);
  Tensor y1 = ctx.empty({1, 2}, DType::kF32, TensorCategory::kActivations);
  Tensor m2 = ctx.empty({2}, DType::kF32, TensorCategory::kActivations), v2 = ctx.empty({2}, DType::kF32, TensorCategory::kActivations);
  expect_rejects([&] { ops::batchnorm_forward_training(ctx, one, {}, x1, c2, c2, m2, v2, y1, m2, v2); },
                 "needs more than one value per channel");
  expect_rejects([&] { ops::cast(ctx, xi, x); }, "converts between f32, f16 and bf16 only");
  Tensor f32 = random_tensor(ctx, {8}, 5);
  Tensor as16 = Tensor::wrap(f32.data(), {8}, DType::kF16);
  expect_rejects([&] { ops::cast(ctx, f32, as16); }, "dst overlaps src");
  expect_rejects([&] { ops::dropout_forward(ctx, {.rate = 1.0f}, f32, f32); }, "rate must be in [0, 1)");
  Tensor w = random_tensor(ctx, {8}, 6), g = random_tensor(ctx, {8}, 7);
  expect_rejects([&] { ops::sgd_update(ctx, {.momentum = 0.9f}, w, g, nullptr); }, "momentum needs a momentum buffer");
  expect_rejects([&] { ops::adamw_update(ctx, {.step = 0}, w, g, w, w); }, "step counts from 1");
}

}  // namespace
}  // namespace sluice::train
