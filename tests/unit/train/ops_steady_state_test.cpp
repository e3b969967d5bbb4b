// The CPU backend in steady state calls operator new not once: a training step of convolution,
// separable convolution, dense, BatchNorm, ReLU, pooling, dropout, loss and an optimizer update,
// run again on the same tensors, takes its scratch from the context's workspace and hands its
// loops to the workers without copying them to the heap. This executable counts operator new.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "ops_test_support.hpp"

#include "counting_new.hpp"

namespace sluice::train {
namespace {

using test::OpsEnv;
using test::random_tensor;

TEST(OpsSteadyState, ARepeatedTrainingStepCallsNoOperatorNew) {
#if !SLUICE_COUNTING_NEW
  GTEST_SKIP() << "operator new is the sanitizer's in this build";
#else
  for (const DType dt : {DType::kF32, DType::kBF16}) {
    OpsEnv env(2);
    Context& ctx = *env.ctx;
    const Conv2dShape cs = Conv2dShape::make({8, 3, 12, 12}, 8, Window2d::square(3, 1, 1));
    const SeparableShape ss = SeparableShape::make(cs.output(), 16, Window2d::square(3, 1, 1));
    const BatchNormShape bs = BatchNormShape::make(ss.output());
    const Pool2dShape ps = Pool2dShape::make(ss.output(), Window2d::square(2, 2));
    const DenseShape ds = DenseShape::make({8, 16}, 10);
    Tensor x = random_tensor(ctx, cs.input(), 1, dt), cw = random_tensor(ctx, cs.weight(), 2, dt);
    Tensor c = ctx.empty(cs.output(), dt, TensorCategory::kActivations), dc = ctx.empty(cs.output(), dt, TensorCategory::kGradients);
    Tensor dcw = ctx.empty(cs.weight(), dt, TensorCategory::kGradients);
    Tensor wd = random_tensor(ctx, ss.depthwise_weight(), 3, dt), wp = random_tensor(ctx, ss.pointwise_weight(), 4, dt);
    Tensor dwd = ctx.empty(ss.depthwise_weight(), dt, TensorCategory::kGradients);
    Tensor dwp = ctx.empty(ss.pointwise_weight(), dt, TensorCategory::kGradients);
    Tensor s = ctx.empty(ss.output(), dt, TensorCategory::kActivations), ds_ = ctx.empty(ss.output(), dt, TensorCategory::kGradients);
    Tensor gamma = ctx.zeros({16}, DType::kF32, TensorCategory::kWeights), beta = ctx.zeros({16}, DType::kF32, TensorCategory::kWeights);
    Tensor rm = ctx.zeros({16}, DType::kF32, TensorCategory::kWeights), rv = ctx.zeros({16}, DType::kF32, TensorCategory::kWeights);
    Tensor mean = ctx.empty({16}, DType::kF32, TensorCategory::kActivations), invstd = ctx.empty({16}, DType::kF32, TensorCategory::kActivations);
    Tensor dgamma = ctx.empty({16}, DType::kF32, TensorCategory::kGradients), dbeta = ctx.empty({16}, DType::kF32, TensorCategory::kGradients);
    Tensor b = ctx.empty(ss.output(), dt, TensorCategory::kActivations), db = ctx.empty(ss.output(), dt, TensorCategory::kGradients);
    Tensor p = ctx.empty(ps.output(), dt, TensorCategory::kActivations), dp = ctx.empty(ps.output(), dt, TensorCategory::kGradients);
    Tensor g = ctx.empty({8, 16}, dt, TensorCategory::kActivations), dg = ctx.empty({8, 16}, dt, TensorCategory::kGradients);
    Tensor w = random_tensor(ctx, ds.weight(), 5, dt), dw = ctx.empty(ds.weight(), dt, TensorCategory::kGradients);
    Tensor logits = ctx.empty(ds.output(), dt, TensorCategory::kActivations), dlogits = ctx.empty(ds.output(), dt, TensorCategory::kGradients);
    Tensor labels = test::make(ctx, {8}, {0, 1, 2, 3, 4, 5, 6, 7}, DType::kI32, TensorCategory::kInputHost);
    Tensor master = random_tensor(ctx, ds.weight(), 6), grad = random_tensor(ctx, ds.weight(), 7);
    Tensor m1 = ctx.zeros(ds.weight(), DType::kF32, TensorCategory::kOptimizerState);
    Tensor m2 = ctx.zeros(ds.weight(), DType::kF32, TensorCategory::kOptimizerState);
    auto step = [&] {
      ops::conv2d_forward(ctx, cs, x, cw, nullptr, c);
      ops::separable_conv2d_forward(ctx, ss, c, wd, wp, nullptr, s);
      ops::batchnorm_forward_training(ctx, bs, {}, s, gamma, beta, rm, rv, b, mean, invstd);
      ops::relu_forward(ctx, b, b);
      ops::dropout_forward(ctx, {.rate = 0.2f, .key = 1, .step = 1}, b, b);
      ops::maxpool2d_forward(ctx, ps, b, p);
      ops::global_avg_pool_forward(ctx, p, g);
      ops::dense_forward(ctx, ds, g, w, nullptr, logits);
      ops::softmax_cross_entropy(ctx, logits, labels, &dlogits);
      ops::dense_backward(ctx, ds, g, w, dlogits, &dg, dw, nullptr);
      ops::global_avg_pool_backward(ctx, dg, dp);
      ops::maxpool2d_backward(ctx, ps, b, dp, db);
      ops::dropout_backward(ctx, {.rate = 0.2f, .key = 1, .step = 1}, db, db);
      ops::relu_backward(ctx, b, db, db);
      ops::batchnorm_backward(ctx, bs, s, gamma, mean, invstd, db, &ds_, dgamma, dbeta);
      ops::separable_conv2d_backward(ctx, ss, c, wd, wp, ds_, &dc, dwd, dwp, nullptr);
      ops::conv2d_backward(ctx, cs, x, cw, dc, nullptr, dcw, nullptr);
      ops::cast(ctx, dw, grad);  // the gradient, widened to f32 for the update
      ops::sgd_update(ctx, {.learning_rate = 0.1f, .momentum = 0.9f}, master, grad, &m1);
      ops::adamw_update(ctx, {}, master, grad, m1, m2);
    };
    step();  // the workspace grows to its size here
    // The counter counts: a tensor's shared storage record is an operator new.
    const long probe_before = ::sluice::test::new_calls();
    Tensor probe = ctx.empty({1}, DType::kF32, TensorCategory::kWorkspace);
    ASSERT_GT(::sluice::test::new_calls(), probe_before);
    const long before = ::sluice::test::new_calls();
    step();
    step();
    EXPECT_EQ(::sluice::test::new_calls() - before, 0) << to_string(dt);
  }
#endif
}

}  // namespace
}  // namespace sluice::train
