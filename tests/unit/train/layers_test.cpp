// Layers: output shapes, what a training forward keeps and an inference one does not, in-place
// work that must not touch tensors someone else holds, and each layer agreeing with its op.
#include <gtest/gtest.h>

#include "model_test_support.hpp"
#include "sluice/core/error.hpp"
#include "sluice/train/layers.hpp"

namespace sluice::train {
namespace {

using test::from_values;
using test::HostRig;
using test::random_values;
using test::values_of;

TEST(Layers, OutputShapesMatchForward) {
  HostRig rig;
  Context& ctx = rig.ctx;
  Conv2D conv(ctx, {.in_channels = 3, .out_channels = 8, .window = Window2d::square(3, 2, 1)});
  SeparableConv2D sep(ctx, {.in_channels = 8, .out_channels = 16});
  DepthwiseConv2D dw(ctx, {.channels = 16, .window = Window2d::square(3, 1, 0)});
  MaxPool2D pool;
  GlobalAvgPool gap;
  Flatten flatten;
  Dense dense(ctx, {.in_features = 16, .out_features = 5});
  conv.initialize(ctx, 1);
  sep.initialize(ctx, 2);
  dw.initialize(ctx, 3);
  dense.initialize(ctx, 4);
  std::vector<Layer*> layers{&conv, &sep, &dw, &pool, &gap, &flatten, &dense};
  Tensor h = from_values(ctx, {2, 3, 16, 16}, random_values(2 * 3 * 16 * 16, 7));
  for (Layer* l : layers) {
    const Shape expected = l->output_shape(h.shape());
    h = l->forward(ctx, h, {.training = false});
    EXPECT_EQ(h.shape(), expected) << l->describe();
  }
  EXPECT_EQ(h.shape(), (Shape{2, 5}));
}

TEST(Layers, WrongInputNamesTheLayer) {
  HostRig rig;
  Conv2D conv(rig.ctx, {.in_channels = 3, .out_channels = 8});
  try {
    (void)conv.output_shape({1, 4, 8, 8});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("Conv2D"), std::string::npos) << e.what();
  }
  Dense dense(rig.ctx, {.in_features = 10, .out_features = 2});
  EXPECT_THROW((void)dense.output_shape({4, 11}), Error);
}

TEST(Layers, BackwardWithoutTrainingForwardThrows) {
  HostRig rig;
  Context& ctx = rig.ctx;
  Conv2D conv(ctx, {.in_channels = 1, .out_channels = 2});
  Tensor x = from_values(ctx, {1, 1, 4, 4}, random_values(16, 1));
  Tensor y = conv.forward(ctx, x, {.training = false});
  EXPECT_THROW((void)conv.backward(ctx, y, InputGradient::kCompute), Error);
  ReLU relu;
  EXPECT_THROW((void)relu.backward(ctx, y, InputGradient::kCompute), Error);
}

// InputGradient::kSkip (a model's first layer) leaves dx out and nothing else: every weighted
// layer and every parameterless one writes the same parameter gradients either way.
TEST(Layers, SkippingTheInputGradientChangesOnlyDx) {
  HostRig rig;
  Context& ctx = rig.ctx;
  auto check = [&](Layer& layer, const Shape& in, const char* what) {
    layer.initialize(ctx, 5);
    const std::vector<float> x_values = random_values(in.elements(), 11);
    std::vector<std::vector<float>> grads[2];
    for (const InputGradient wanted : {InputGradient::kCompute, InputGradient::kSkip}) {
      Tensor y = layer.forward(ctx, from_values(ctx, in, x_values), {.training = true});
      const Tensor dx = layer.backward(ctx, from_values(ctx, y.shape(), random_values(y.elements(), 12)), wanted);
      EXPECT_EQ(dx.defined(), wanted == InputGradient::kCompute) << what;
      if (dx.defined()) {
        EXPECT_EQ(dx.shape(), in) << what;
      }
      std::vector<Parameter> params;
      layer.parameters("", params);
      for (const Parameter& p : params) grads[wanted == InputGradient::kSkip].push_back(values_of(ctx, *p.grad));
    }
    EXPECT_EQ(grads[0], grads[1]) << what;
  };
  Conv2D conv(ctx, {.in_channels = 2, .out_channels = 3, .bias = true});
  check(conv, {2, 2, 5, 5}, "Conv2D");
  DepthwiseConv2D dw(ctx, {.channels = 2, .bias = true});
  check(dw, {2, 2, 5, 5}, "DepthwiseConv2D");
  SeparableConv2D sep(ctx, {.in_channels = 2, .out_channels = 3, .bias = true});
  check(sep, {2, 2, 5, 5}, "SeparableConv2D");
  Dense dense(ctx, {.in_features = 6, .out_features = 4});
  check(dense, {3, 6}, "Dense");
  BatchNorm bn(ctx, {.channels = 2});
  check(bn, {4, 2, 3, 3}, "BatchNorm");
  ReLU relu;
  check(relu, {2, 8}, "ReLU");
  MaxPool2D pool;
  check(pool, {1, 2, 4, 4}, "MaxPool2D");
  GlobalAvgPool gap;
  check(gap, {2, 2, 3, 3}, "GlobalAvgPool");
  Dropout drop(0.5f, 3);
  check(drop, {2, 10}, "Dropout");
  Flatten flatten;
  check(flatten, {2, 2, 3}, "Flatten");
}

TEST(Layers, InferenceKeepsNothingTrainingKeepsTheInput) {
  HostRig rig;
  Context& ctx = rig.ctx;
  Conv2D conv(ctx, {.in_channels = 2, .out_channels = 4});
  conv.initialize(ctx, 3);
  const auto activations = [&] { return rig.allocator.stats().category(TensorCategory::kActivations).in_use_bytes; };
  Tensor x = from_values(ctx, {2, 2, 8, 8}, random_values(256, 2));
  const std::uint64_t with_x = activations();
  {
    Tensor y = conv.forward(ctx, x, {.training = false});
  }
  x.reset();
  EXPECT_EQ(activations(), with_x - 1024) << "an inference forward kept its input";
  x = from_values(ctx, {2, 2, 8, 8}, random_values(256, 2));
  {
    Tensor y = conv.forward(ctx, x, {.training = true});
  }
  x.reset();
  EXPECT_EQ(activations(), with_x) << "a training forward must keep its input for backward";
  conv.release_saved();
  EXPECT_EQ(activations(), with_x - 1024);
}

TEST(Layers, ReluInPlaceOnlyWhenHandedTheOnlyReference) {
  HostRig rig;
  Context& ctx = rig.ctx;
  ReLU relu;
  const std::vector<float> v{-1, 2, -3, 4};
  // The caller keeps its copy: its values stay.
  Tensor held = from_values(ctx, {1, 4}, v);
  Tensor y = relu.forward(ctx, held, {.training = false});
  EXPECT_NE(y.data(), held.data());
  EXPECT_EQ(values_of(ctx, held), v);
  EXPECT_EQ(values_of(ctx, y), (std::vector<float>{0, 2, 0, 4}));

  // Handed over: written in place, no new activation.
  Tensor given = from_values(ctx, {1, 4}, v);
  const void* where = given.data();
  const std::uint64_t before = rig.allocator.stats().in_use_bytes;
  Tensor y1 = relu.forward(ctx, std::move(given), {.training = false});
  EXPECT_EQ(y1.data(), where);
  EXPECT_EQ(rig.allocator.stats().in_use_bytes, before);
  EXPECT_EQ(values_of(ctx, y1), (std::vector<float>{0, 2, 0, 4}));

  // A user batch (a view) is never written, even when handed over.
  std::vector<float> batch{-1, 2, -3, 4};
  Tensor y2 = relu.forward(ctx, Tensor::wrap(batch.data(), {1, 4}, DType::kF32), {.training = false});
  EXPECT_NE(y2.data(), static_cast<void*>(batch.data()));
  EXPECT_EQ(batch, v);
}

TEST(Layers, ReluBackwardMasksBySign) {
  HostRig rig;
  Context& ctx = rig.ctx;
  ReLU relu;
  Tensor x = from_values(ctx, {1, 4}, {-1, 2, -3, 4});
  Tensor y = relu.forward(ctx, x, {.training = true});
  Tensor dx = relu.backward(ctx, from_values(ctx, {1, 4}, {10, 20, 30, 40}), InputGradient::kCompute);
  EXPECT_EQ(values_of(ctx, dx), (std::vector<float>{0, 20, 0, 40}));
}

TEST(Layers, DropoutIsIdentityInInferenceAndScalesInTraining) {
  HostRig rig;
  Context& ctx = rig.ctx;
  Dropout drop(0.5f, 42);
  const std::vector<float> ones(1000, 1.0f);
  Tensor x = from_values(ctx, {10, 100}, ones);
  Tensor y = drop.forward(ctx, x, {.training = false});
  EXPECT_EQ(values_of(ctx, y), ones);
  Tensor yt = drop.forward(ctx, from_values(ctx, {10, 100}, ones), {.training = true, .step = 3});
  int zeros = 0;
  for (float v : values_of(ctx, yt)) {
    ASSERT_TRUE(v == 0.0f || v == 2.0f) << v;
    zeros += v == 0.0f;
  }
  EXPECT_GT(zeros, 400);
  EXPECT_LT(zeros, 600);
  // Backward applies the same mask (recomputed from key and step).
  const std::vector<float> kept = values_of(ctx, yt);
  Tensor dx = drop.backward(ctx, from_values(ctx, {10, 100}, ones), InputGradient::kCompute);
  EXPECT_EQ(values_of(ctx, dx), kept);
}

TEST(Layers, FlattenSharesStorageAndRestoresTheShape) {
  HostRig rig;
  Context& ctx = rig.ctx;
  Flatten flatten;
  Tensor x = from_values(ctx, {2, 3, 2, 2}, random_values(24, 5));
  Tensor y = flatten.forward(ctx, x, {.training = true});
  EXPECT_EQ(y.shape(), (Shape{2, 12}));
  EXPECT_EQ(y.data(), x.data());
  Tensor dx = flatten.backward(ctx, y, InputGradient::kCompute);
  EXPECT_EQ(dx.shape(), x.shape());
}

TEST(Layers, BatchNormTrainingNormalisesInferenceUsesRunningStats) {
  HostRig rig;
  Context& ctx = rig.ctx;
  BatchNorm bn(ctx, {.channels = 2, .params = {.momentum = 1.0f}});  // running stats = last batch's
  bn.initialize(ctx, 0);
  // Channel 0: 1, 3 (mean 2, var 1); channel 1: 10, 10 (mean 10, var 0).
  Tensor x = from_values(ctx, {2, 2}, {1, 10, 3, 10});
  const std::vector<float> y = values_of(ctx, bn.forward(ctx, x, {.training = true}));
  EXPECT_NEAR(y[0], -1.0f, 1e-3);
  EXPECT_NEAR(y[2], 1.0f, 1e-3);
  EXPECT_NEAR(y[1], 0.0f, 1e-3);
  bn.release_saved();
  // Inference with running mean (2, 10) and unbiased variance (2, 0).
  const std::vector<float> yi = values_of(ctx, bn.forward(ctx, from_values(ctx, {1, 2}, {4, 10}), {.training = false}));
  EXPECT_NEAR(yi[0], 2.0f / std::sqrt(2.0f + 1e-5f), 1e-3);
  EXPECT_NEAR(yi[1], 0.0f, 1e-3);
  std::vector<Buffer> buffers;
  bn.buffers("0.", buffers);
  ASSERT_EQ(buffers.size(), 2u);
  EXPECT_EQ(buffers[0].name, "0.running_mean");
}

TEST(Layers, ParametersAndGradientsAreCategorised) {
  HostRig rig;
  Context& ctx = rig.ctx;
  SeparableConv2D sep(ctx, {.in_channels = 4, .out_channels = 8, .bias = true});
  std::vector<Parameter> params;
  sep.parameters("2.", params);
  ASSERT_EQ(params.size(), 3u);
  EXPECT_EQ(params[0].name, "2.depthwise");
  EXPECT_EQ(params[1].name, "2.pointwise");
  EXPECT_EQ(params[2].name, "2.bias");
  EXPECT_EQ(params[0].decay, WeightDecay::kApply);
  EXPECT_EQ(params[2].decay, WeightDecay::kExempt);
  for (const Parameter& p : params) {
    EXPECT_EQ(p.value->category(), TensorCategory::kWeights);
    EXPECT_EQ(p.grad->category(), TensorCategory::kGradients);
    EXPECT_EQ(p.value->shape(), p.grad->shape());
  }
  EXPECT_EQ(params[0].value->shape(), (Shape{4, 1, 3, 3}));
  EXPECT_EQ(params[1].value->shape(), (Shape{8, 4, 1, 1}));
}

TEST(Layers, HeInitialisationHasTheRightSpreadAndIsSeeded) {
  HostRig rig;
  Context& ctx = rig.ctx;
  Conv2D a(ctx, {.in_channels = 64, .out_channels = 64});
  Conv2D b(ctx, {.in_channels = 64, .out_channels = 64});
  a.initialize(ctx, 11);
  b.initialize(ctx, 11);
  std::vector<Parameter> pa, pb;
  a.parameters("", pa);
  b.parameters("", pb);
  const std::vector<float> wa = values_of(ctx, *pa[0].value);
  EXPECT_EQ(wa, values_of(ctx, *pb[0].value));
  double sum = 0, sq = 0;
  for (float v : wa) sum += v, sq += double{v} * v;
  const double n = static_cast<double>(wa.size());
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(sq / n), std::sqrt(2.0 / (64 * 9)), 0.003);
  b.initialize(ctx, 12);
  EXPECT_NE(wa, values_of(ctx, *pb[0].value));
}

}  // namespace
}  // namespace sluice::train
