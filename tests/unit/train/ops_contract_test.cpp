// The CPU backend's contract over the whole op set, run as one suite of calls on a batch of 37
// (more than the 16 reduction groups, and not a multiple of them):
//  - determinism: 1, 2 and 3 threads give bit-identical outputs, gradients and loss;
//  - 16-bit: an f16 or bf16 call gives exactly the f32 call's result on the same (16-bit
//    representable) inputs, rounded once to the 16-bit type (the backend computes in f32);
//  - memory: with the reported workspaces reserved, the ops take no allocator memory at all, and
//    no op asks for more workspace than its *_workspace figure.
// Also fill, cast, copies, dropout's mask and the optimizer updates against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>

#include "ops_test_support.hpp"

namespace sluice::train {
namespace {

using test::OpsEnv;
using test::values;

// Every op of the training core, forward and backward, on inputs of one dtype; the tensors are
// all made up front, on the heap (test::HeapTensors: AddressSanitizer builds see an op that
// strays past a tensor), so the run itself can be checked for allocator use.
class OpSuite {
 public:
  // `values_of`: the type whose values the inputs take (the 16-bit type an f32 suite mirrors).
  OpSuite(Context& ctx, DType dtype, std::int64_t batch, DType values_of)
      : ctx_(ctx),
        dt_(dtype),
        rounding_(values_of),
        conv_(Conv2dShape::make({batch, 4, 8, 8}, 6, Window2d::square(3, 1, 1))),
        point_(Conv2dShape::make({batch, 4, 8, 8}, 5, Window2d::square(1))),
        depth_(Conv2dShape::make_depthwise({batch, 4, 8, 8}, Window2d::square(3, 2, 1))),
        sep_(SeparableShape::make({batch, 4, 8, 8}, 6, Window2d::square(3, 1, 1))),
        dense_(DenseShape::make({batch, 30}, 7)),
        pool_(Pool2dShape::make({batch, 4, 8, 8}, Window2d::square(3, 2, 1))),
        bn_(BatchNormShape::make({batch, 4, 8, 8})) {
    const Shape img{batch, 4, 8, 8};
    x_ = in(img, 1);
    dx_ = out(img);
    // conv
    add_in("conv.w", conv_.weight(), 2), add_in("conv.b", {6}, 3), add_in("conv.dy", conv_.output(), 4);
    add_out("conv.y", conv_.output()), add_out("conv.dx", img), add_out("conv.dw", conv_.weight()), add_out("conv.db", {6});
    add_in("point.w", point_.weight(), 5), add_in("point.dy", point_.output(), 6);
    add_out("point.y", point_.output()), add_out("point.dx", img), add_out("point.dw", point_.weight());
    add_in("depth.w", depth_.depthwise_weight(), 7), add_in("depth.b", {4}, 8), add_in("depth.dy", depth_.output(), 9);
    add_out("depth.y", depth_.output()), add_out("depth.dx", img), add_out("depth.dw", depth_.depthwise_weight());
    add_out("depth.db", {4});
    add_in("sep.wd", sep_.depthwise_weight(), 10), add_in("sep.wp", sep_.pointwise_weight(), 11);
    add_in("sep.b", {6}, 12), add_in("sep.dy", sep_.output(), 13);
    add_out("sep.y", sep_.output()), add_out("sep.dx", img), add_out("sep.dwd", sep_.depthwise_weight());
    add_out("sep.dwp", sep_.pointwise_weight()), add_out("sep.db", {6});
    add_in("dense.x", dense_.input(), 14), add_in("dense.w", dense_.weight(), 15), add_in("dense.b", {7}, 16);
    add_in("dense.dy", dense_.output(), 17);
    add_out("dense.y", dense_.output()), add_out("dense.dx", dense_.input()), add_out("dense.dw", dense_.weight());
    add_out("dense.db", {7});
    add_in("relu.dy", img, 18), add_out("relu.y", img), add_out("relu.dx", img);
    add_in("pool.dy", pool_.output(), 19), add_out("pool.y", pool_.output()), add_out("pool.dx", img);
    add_in("gap.dy", {batch, 4}, 20), add_out("gap.y", {batch, 4}), add_out("gap.dx", img);
    add_in("bn.dy", img, 21), add_out("bn.y", img), add_out("bn.dx", img);
    for (const char* n : {"bn.gamma", "bn.beta"}) t_[n] = f32_in({4}, 22 + static_cast<int>(t_.size()));
    for (const char* n : {"bn.rm", "bn.rv", "bn.mean", "bn.invstd", "bn.dgamma", "bn.dbeta"}) {
      t_[n] = heap_.make({4}, std::vector<float>(4, 0.0f));
    }
    test::fill_value(t_["bn.rv"], 1.0f);
    add_in("drop.dy", img, 24), add_out("drop.y", img), add_out("drop.dx", img);
    add_in("ce.logits", {batch, 10}, 25), add_out("ce.dlogits", {batch, 10});
    std::vector<float> labels(static_cast<std::size_t>(batch));
    for (std::int64_t i = 0; i < batch; ++i) labels[static_cast<std::size_t>(i)] = static_cast<float>((i * 7 + 3) % 10);
    t_["ce.labels"] = heap_.make({batch}, labels, DType::kI32, TensorCategory::kInputHost);
  }

  // The largest workspace any op of the suite reports.
  std::size_t max_workspace() const {
    return std::max({ops::conv2d_workspace(ctx_, conv_, dt_), ops::conv2d_workspace(ctx_, point_, dt_),
                     ops::depthwise_conv2d_workspace(ctx_, depth_, dt_),
                     ops::separable_conv2d_workspace(ctx_, sep_, dt_), ops::dense_workspace(ctx_, dense_, dt_)});
  }

  // Runs every op once. With `per_op_workspace`, the workspace is released before each op and
  // must afterwards be no larger than the op's own figure (0 for ops without one).
  void run(bool per_op_workspace) {
    auto within = [&](std::size_t figure, const char* op) {
      if (per_op_workspace) {
        EXPECT_LE(ctx_.workspace_bytes(), figure) << op << " took more workspace than it reports";
        ctx_.release_workspace();
      }
    };
    if (per_op_workspace) ctx_.release_workspace();
    ops::conv2d_forward(ctx_, conv_, x_, t("conv.w"), &t("conv.b"), t("conv.y"));
    ops::conv2d_backward(ctx_, conv_, x_, t("conv.w"), t("conv.dy"), &t("conv.dx"), t("conv.dw"), &t("conv.db"));
    within(ops::conv2d_workspace(ctx_, conv_, dt_), "conv2d");
    ops::conv2d_forward(ctx_, point_, x_, t("point.w"), nullptr, t("point.y"));
    ops::conv2d_backward(ctx_, point_, x_, t("point.w"), t("point.dy"), &t("point.dx"), t("point.dw"), nullptr);
    within(ops::conv2d_workspace(ctx_, point_, dt_), "conv2d 1x1");
    ops::depthwise_conv2d_forward(ctx_, depth_, x_, t("depth.w"), &t("depth.b"), t("depth.y"));
    ops::depthwise_conv2d_backward(ctx_, depth_, x_, t("depth.w"), t("depth.dy"), &t("depth.dx"), t("depth.dw"),
                                   &t("depth.db"));
    within(ops::depthwise_conv2d_workspace(ctx_, depth_, dt_), "depthwise_conv2d");
    ops::separable_conv2d_forward(ctx_, sep_, x_, t("sep.wd"), t("sep.wp"), &t("sep.b"), t("sep.y"));
    ops::separable_conv2d_backward(ctx_, sep_, x_, t("sep.wd"), t("sep.wp"), t("sep.dy"), &t("sep.dx"), t("sep.dwd"),
                                   t("sep.dwp"), &t("sep.db"));
    within(ops::separable_conv2d_workspace(ctx_, sep_, dt_), "separable_conv2d");
    ops::dense_forward(ctx_, dense_, t("dense.x"), t("dense.w"), &t("dense.b"), t("dense.y"));
    ops::dense_backward(ctx_, dense_, t("dense.x"), t("dense.w"), t("dense.dy"), &t("dense.dx"), t("dense.dw"),
                        &t("dense.db"));
    within(ops::dense_workspace(ctx_, dense_, dt_), "dense");
    ops::relu_forward(ctx_, x_, t("relu.y"));
    ops::relu_backward(ctx_, t("relu.y"), t("relu.dy"), t("relu.dx"));
    ops::maxpool2d_forward(ctx_, pool_, x_, t("pool.y"));
    ops::maxpool2d_backward(ctx_, pool_, x_, t("pool.dy"), t("pool.dx"));
    ops::global_avg_pool_forward(ctx_, x_, t("gap.y"));
    ops::global_avg_pool_backward(ctx_, t("gap.dy"), t("gap.dx"));
    ops::batchnorm_forward_training(ctx_, bn_, {}, x_, t("bn.gamma"), t("bn.beta"), t("bn.rm"), t("bn.rv"), t("bn.y"),
                                    t("bn.mean"), t("bn.invstd"));
    ops::batchnorm_backward(ctx_, bn_, x_, t("bn.gamma"), t("bn.mean"), t("bn.invstd"), t("bn.dy"), &t("bn.dx"),
                            t("bn.dgamma"), t("bn.dbeta"));
    const DropoutMask mask{.rate = 0.25f, .key = 7, .step = 3};
    ops::dropout_forward(ctx_, mask, x_, t("drop.y"));
    ops::dropout_backward(ctx_, mask, t("drop.dy"), t("drop.dx"));
    loss_ = ops::softmax_cross_entropy(ctx_, t("ce.logits"), t("ce.labels"), &t("ce.dlogits"));
    within(0, "the ops without a workspace figure");
  }

  // Every output, as f32 values, by name.
  std::map<std::string, std::vector<float>> results() const {
    std::map<std::string, std::vector<float>> r;
    for (const auto& [name, tensor] : t_) {
      if (outputs_.count(name) || name.rfind("bn.", 0) == 0) r[name] = values(tensor);
    }
    return r;
  }
  const LossResult& loss() const { return loss_; }

 private:
  Tensor& t(const std::string& name) { return t_.at(name); }
  // Inputs hold values the dtype represents exactly, so the f32 and 16-bit suites see the same.
  Tensor in(const Shape& shape, std::uint32_t seed) {
    std::vector<float> v = test::random_values(shape.elements(), seed);
    for (float& f : v) f = test::round_to(rounding_, f);
    return heap_.make(shape, v, dt_);
  }
  Tensor f32_in(const Shape& shape, std::uint32_t seed) {
    return heap_.make(shape, test::random_values(shape.elements(), seed, 0.5f, 1.5f));
  }
  Tensor out(const Shape& shape) {
    return heap_.make(shape, std::vector<float>(static_cast<std::size_t>(shape.elements()), 0.0f), dt_);
  }
  void add_in(const std::string& name, const Shape& shape, std::uint32_t seed) { t_[name] = in(shape, seed); }
  void add_out(const std::string& name, const Shape& shape) {
    t_[name] = out(shape);
    outputs_[name] = true;
  }

  Context& ctx_;
  DType dt_;
  DType rounding_;
  test::HeapTensors heap_;  // before the tensors: outlives them
  Conv2dShape conv_, point_, depth_;
  SeparableShape sep_;
  DenseShape dense_;
  Pool2dShape pool_;
  BatchNormShape bn_;
  Tensor x_, dx_;
  std::map<std::string, Tensor> t_;
  std::map<std::string, bool> outputs_;
  LossResult loss_;
};

constexpr std::int64_t kBatch = 37;

std::map<std::string, std::vector<float>> run_suite(int threads, DType dtype, DType values_of, LossResult* loss) {
  OpsEnv env(threads);
  OpSuite suite(*env.ctx, dtype, kBatch, values_of);
  suite.run(false);
  *loss = suite.loss();
  return suite.results();
}

TEST(OpsDeterminism, OneTwoAndThreeThreadsGiveBitIdenticalResults) {
  LossResult l1, l2, l3;
  const auto r1 = run_suite(1, DType::kF32, DType::kF32, &l1);
  const auto r2 = run_suite(2, DType::kF32, DType::kF32, &l2);
  const auto r3 = run_suite(3, DType::kF32, DType::kF32, &l3);
  ASSERT_EQ(r1.size(), r2.size());
  for (const auto& [name, v] : r1) {
    EXPECT_EQ(std::memcmp(v.data(), r2.at(name).data(), v.size() * sizeof(float)), 0) << name << ": 1 vs 2 threads";
    EXPECT_EQ(std::memcmp(v.data(), r3.at(name).data(), v.size() * sizeof(float)), 0) << name << ": 1 vs 3 threads";
  }
  EXPECT_EQ(l1.loss, l2.loss);
  EXPECT_EQ(l1.loss, l3.loss);
  EXPECT_EQ(l1.correct, l2.correct);
}

class Ops16Bit : public ::testing::TestWithParam<DType> {};

TEST_P(Ops16Bit, EqualTheF32ResultRoundedOnce) {
  const DType dt = GetParam();
  LossResult l32, l16;
  const auto want = run_suite(2, DType::kF32, dt, &l32);
  const auto got = run_suite(2, dt, dt, &l16);
  for (const auto& [name, w] : want) {
    const auto& g = got.at(name);
    int failures = 0;
    for (std::size_t i = 0; i < w.size(); ++i) {
      // BatchNorm's statistics and parameter gradients are f32 in both suites.
      const float expect = name.rfind("bn.", 0) == 0 && name != "bn.y" && name != "bn.dx" ? w[i] : test::round_to(dt, w[i]);
      if (g[i] != expect && ++failures <= 3) ADD_FAILURE() << name << "[" << i << "]: " << g[i] << " != " << expect;
    }
  }
  EXPECT_EQ(l16.loss, l32.loss);
  EXPECT_EQ(l16.correct, l32.correct);
}

INSTANTIATE_TEST_SUITE_P(Cpu, Ops16Bit, ::testing::Values(DType::kF16, DType::kBF16),
                         [](const auto& info) { return std::string(to_string(info.param)); });

class OpsMemory : public ::testing::TestWithParam<DType> {};

TEST_P(OpsMemory, TakeNoAllocatorMemoryBeyondTheReportedWorkspace) {
  OpsEnv env(2);
  Context& ctx = *env.ctx;
  OpSuite suite(ctx, GetParam(), kBatch, GetParam());
  // Each op alone stays within its own figure...
  suite.run(true);
  // ...and with the largest figure reserved, a whole run allocates nothing.
  const std::size_t ws = suite.max_workspace();
  EXPECT_GT(ws, 0u);
  ctx.reserve_workspace(ws);
  env.allocator->reset_peak();
  const AllocatorStats before = env.allocator->stats();
  suite.run(false);
  const AllocatorStats after = env.allocator->stats();
  EXPECT_EQ(after.peak_in_use_bytes, before.in_use_bytes);
  EXPECT_EQ(after.total_allocations, before.total_allocations);
  EXPECT_EQ(ctx.workspace_bytes(), ws);
}

INSTANTIATE_TEST_SUITE_P(Cpu, OpsMemory, ::testing::Values(DType::kF32, DType::kF16),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// ---- fill, cast, copies ------------------------------------------------------------------------

TEST(MemoryOps, FillCastAndCopiesConvertAsDocumented) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  Tensor i = ctx.empty({3}, DType::kI32, TensorCategory::kWorkspace);
  ops::fill(ctx, i, -2.7f);
  EXPECT_EQ(values(i), (std::vector<float>{-2, -2, -2}));  // truncated towards zero
  Tensor u = ctx.empty({2}, DType::kU8, TensorCategory::kWorkspace);
  ops::fill(ctx, u, 300.0f);
  EXPECT_EQ(values(u), (std::vector<float>{255, 255}));  // saturated
  Tensor h = ctx.empty({2}, DType::kF16, TensorCategory::kWorkspace);
  ops::fill(ctx, h, 0.1f);
  EXPECT_EQ(h.data_as<std::uint16_t>()[1], float_to_f16(0.1f));

  // f32 -> f16 -> f32 and -> bf16 round to nearest even; 16 -> 32 bits is exact; a large
  // tensor (several parallel chunks) converts every element.
  const std::int64_t n = 100'003;
  std::vector<float> v = test::random_values(n, 5, -70000.0f, 70000.0f);
  v[0] = 1.0f + 1.0f / 2048.0f;  // a tie in f16: rounds to even (1.0)
  Tensor src = test::make(ctx, {n}, v);
  Tensor f16 = ctx.empty({n}, DType::kF16, TensorCategory::kWorkspace);
  Tensor bf16 = ctx.empty({n}, DType::kBF16, TensorCategory::kWorkspace);
  Tensor back = ctx.empty({n}, DType::kF32, TensorCategory::kWorkspace);
  ops::cast(ctx, src, f16);
  ops::cast(ctx, src, bf16);
  ops::cast(ctx, f16, back);
  for (std::int64_t k = 0; k < n; k += 997) {
    EXPECT_EQ(f16.data_as<std::uint16_t>()[k], float_to_f16(v[k])) << k;
    EXPECT_EQ(bf16.data_as<std::uint16_t>()[k], float_to_bf16(v[k])) << k;
    EXPECT_EQ(back.data_as<float>()[k], f16_to_float(float_to_f16(v[k]))) << k;
  }
  EXPECT_EQ(back.data_as<float>()[0], 1.0f);
  EXPECT_TRUE(std::isinf(back.data_as<float>()[n - 1]) || std::abs(v[n - 1]) < 65520.0f);
  Tensor bf_to_f16 = ctx.empty({n}, DType::kF16, TensorCategory::kWorkspace);
  ops::cast(ctx, bf16, bf_to_f16);
  EXPECT_EQ(bf_to_f16.data_as<std::uint16_t>()[3], float_to_f16(bf16_to_float(bf16.data_as<std::uint16_t>()[3])));

  std::vector<float> host(3, 0.0f);
  Tensor t = test::make(ctx, {3}, {1.5f, -2.0f, 4.0f});
  ops::copy_to_host(ctx, t, host.data());
  EXPECT_EQ(host, (std::vector<float>{1.5f, -2.0f, 4.0f}));
  const float in[3] = {7.0f, 8.0f, 9.0f};
  ops::copy_from_host(ctx, in, t);
  EXPECT_EQ(values(t), (std::vector<float>{7, 8, 9}));
}

// ---- dropout ---------------------------------------------------------------------------------

TEST(Dropout, DropsAboutTheRateScalesTheRestAndDependsOnKeyAndStepOnly) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  const std::int64_t n = 200'001;
  Tensor ones = ctx.empty({n}, DType::kF32, TensorCategory::kActivations);
  ops::fill(ctx, ones, 1.0f);
  Tensor a = ctx.empty({n}, DType::kF32, TensorCategory::kActivations);
  Tensor b = ctx.empty({n}, DType::kF32, TensorCategory::kActivations);
  const DropoutMask m{.rate = 0.3f, .key = 11, .step = 2};
  ops::dropout_forward(ctx, m, ones, a);
  std::int64_t dropped = 0;
  for (float v : values(a)) {
    if (v == 0.0f) {
      ++dropped;
    } else {
      ASSERT_FLOAT_EQ(v, 1.0f / 0.7f);
    }
  }
  // Binomial(200001, 0.3): the standard deviation is 205; 5 of them is a bound no correct mask
  // misses.
  EXPECT_NEAR(static_cast<double>(dropped), 0.3 * n, 5 * 205.0);
  OpsEnv one(1);
  Tensor c = one.ctx->empty({n}, DType::kF32, TensorCategory::kActivations);
  Tensor ones1 = one.ctx->empty({n}, DType::kF32, TensorCategory::kActivations);
  ops::fill(*one.ctx, ones1, 1.0f);
  ops::dropout_forward(*one.ctx, m, ones1, c);
  EXPECT_TRUE(test::same_bits(a, c)) << "the mask must not depend on the thread count";
  ops::dropout_forward(ctx, {.rate = 0.3f, .key = 11, .step = 3}, ones, b);
  EXPECT_FALSE(test::same_bits(a, b)) << "another step, another mask";
  // In place, and rate 0 is the identity.
  ops::dropout_forward(ctx, m, ones, ones);
  EXPECT_TRUE(test::same_bits(a, ones));
  Tensor x = test::random_tensor(ctx, {50}, 3), y = ctx.empty({50}, DType::kF32, TensorCategory::kActivations);
  ops::dropout_forward(ctx, {.rate = 0.0f}, x, y);
  EXPECT_TRUE(test::same_bits(x, y));
}

// ---- optimizers --------------------------------------------------------------------------------

TEST(Optimizers, SgdWithMomentumWeightDecayAndNesterovMatchesTorchByHand) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  Tensor w = test::make(ctx, {2}, {1.0f, -2.0f}), g = test::make(ctx, {2}, {0.5f, 0.25f});
  Tensor buf = ctx.empty({2}, DType::kF32, TensorCategory::kOptimizerState);
  SgdUpdate u{.learning_rate = 0.1f, .momentum = 0.9f, .nesterov = false, .weight_decay = 0.01f, .first_step = true};
  ops::sgd_update(ctx, u, w, g, &buf);
  // d = g + wd w = (0.51, 0.23); buf = d; w -= lr buf.
  EXPECT_FLOAT_EQ(values(w)[0], 1.0f - 0.1f * 0.51f);
  EXPECT_FLOAT_EQ(values(w)[1], -2.0f - 0.1f * 0.23f);
  u.first_step = false;
  const float w0 = values(w)[0];
  ops::sgd_update(ctx, u, w, g, &buf);
  // d = 0.5 + 0.01 w0; buf = 0.9 * 0.51 + d; w -= lr buf.
  const float d = 0.5f + 0.01f * w0, b = 0.9f * 0.51f + d;
  EXPECT_FLOAT_EQ(values(buf)[0], b);
  EXPECT_FLOAT_EQ(values(w)[0], w0 - 0.1f * b);
  // Nesterov: the step is d + momentum * buf.
  u.nesterov = true;
  const float w1 = values(w)[0];
  ops::sgd_update(ctx, u, w, g, &buf);
  const float d2 = 0.5f + 0.01f * w1, b2 = 0.9f * b + d2;
  EXPECT_FLOAT_EQ(values(w)[0], w1 - 0.1f * (d2 + 0.9f * b2));
  // Plain SGD needs no buffer.
  Tensor v = test::make(ctx, {1}, {3.0f}), gv = test::make(ctx, {1}, {2.0f});
  ops::sgd_update(ctx, {.learning_rate = 0.5f}, v, gv, nullptr);
  EXPECT_FLOAT_EQ(values(v)[0], 2.0f);
}

TEST(Optimizers, AdamWTwoStepsMatchTheFormulaOfTorchDocs) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  Tensor w = test::make(ctx, {2}, {0.5f, -1.0f}), m = ctx.zeros({2}, DType::kF32, TensorCategory::kOptimizerState);
  Tensor v = ctx.zeros({2}, DType::kF32, TensorCategory::kOptimizerState);
  const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
  const double gs[2][2] = {{0.2, -0.4}, {-0.1, 0.3}};
  double ew[2] = {0.5, -1.0}, em[2] = {0, 0}, ev[2] = {0, 0};
  for (int t = 1; t <= 2; ++t) {
    Tensor g = test::make(ctx, {2}, {static_cast<float>(gs[t - 1][0]), static_cast<float>(gs[t - 1][1])});
    ops::adamw_update(ctx, {.learning_rate = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f, .epsilon = 1e-8f,
                            .weight_decay = 0.1f, .step = t},
                      w, g, m, v);
    for (int i = 0; i < 2; ++i) {  // torch.optim.AdamW's documented algorithm, in double
      const double gi = gs[t - 1][i];
      ew[i] -= lr * wd * ew[i];
      em[i] = b1 * em[i] + (1 - b1) * gi;
      ev[i] = b2 * ev[i] + (1 - b2) * gi * gi;
      const double mhat = em[i] / (1 - std::pow(b1, t)), vhat = ev[i] / (1 - std::pow(b2, t));
      ew[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
    for (int i = 0; i < 2; ++i) {
      EXPECT_NEAR(values(w)[i], ew[i], 1e-6) << "step " << t << " w[" << i << "]";
      // f32 state against the double formula: 1 - 0.999f is 1.3e-5 off 0.001, so relative bounds.
      EXPECT_NEAR(values(m)[i], em[i], 1e-4 * std::abs(em[i]));
      EXPECT_NEAR(values(v)[i], ev[i], 1e-4 * std::abs(ev[i]));
    }
  }
}

TEST(SoftmaxCrossEntropy, LossAndAccuracyMatchAHandComputation) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  // Row 0: logits (1, 2, 3), label 2 (the arg-max); row 1: (1000, 0, 0), label 1 (stable only
  // with the maximum subtracted).
  Tensor z = test::make(ctx, {2, 3}, {1, 2, 3, 1000, 0, 0});
  Tensor labels = test::make(ctx, {2}, {2, 1}, DType::kI32, TensorCategory::kInputHost);
  Tensor dz = ctx.empty({2, 3}, DType::kF32, TensorCategory::kGradients);
  const LossResult r = ops::softmax_cross_entropy(ctx, z, labels, &dz);
  const double l0 = std::log(std::exp(-2.0) + std::exp(-1.0) + 1.0);
  const double l1 = 1000.0 + std::log(1.0 + 2.0 * std::exp(-1000.0));
  EXPECT_NEAR(r.loss, (l0 + l1) / 2.0, 1e-9);
  EXPECT_EQ(r.correct, 1);
  const double s2 = 1.0 / (std::exp(-2.0) + std::exp(-1.0) + 1.0);
  EXPECT_NEAR(values(dz)[2], (s2 - 1.0) / 2.0, 1e-7);
  EXPECT_NEAR(values(dz)[4], -0.5, 1e-7);
  EXPECT_TRUE(std::isfinite(values(dz)[3]));
}

}  // namespace
}  // namespace sluice::train
