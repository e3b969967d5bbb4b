// Sequential's backward against finite differences of its loss: a tiny model with every
// trainable layer kind (Conv2D, BatchNorm, ReLU, MaxPool2D, SeparableConv2D, DepthwiseConv2D,
// GlobalAvgPool, Dropout, Dense) composed in one forward and one backward.
#include <gtest/gtest.h>

#include <cmath>

#include "model_test_support.hpp"
#include "sluice/core/error.hpp"
#include "sluice/train/layers.hpp"
#include "sluice/train/sequential.hpp"

namespace sluice::train {
namespace {

using test::from_values;
using test::HostRig;
using test::random_values;
using test::values_of;

std::unique_ptr<Sequential> tiny_model(Context& ctx) {
  auto m = std::make_unique<Sequential>(Shape{2, 6, 6});
  m->add<Conv2D>(ctx, Conv2DOptions{.in_channels = 2, .out_channels = 3, .bias = true});
  m->add<BatchNorm>(ctx, BatchNormOptions{.channels = 3});
  m->add<ReLU>();
  m->add<MaxPool2D>();  // 3 x 3
  m->add<SeparableConv2D>(ctx, SeparableConv2DOptions{.in_channels = 3, .out_channels = 4, .bias = true});
  m->add<DepthwiseConv2D>(ctx, DepthwiseConv2DOptions{.channels = 4, .bias = true});
  m->add<GlobalAvgPool>();
  m->add<Dropout>(0.25f);
  m->add<Dense>(ctx, DenseOptions{.in_features = 4, .out_features = 3});
  m->initialize(ctx, 5);
  return m;
}

// The training-mode loss of the model on (x, labels) at dropout step 0.
double loss_of(Context& ctx, Sequential& m, const Tensor& x, const Tensor& labels) {
  Tensor logits = m.forward(ctx, x, {.training = true, .step = 0});
  const double loss = ops::softmax_cross_entropy(ctx, logits, labels, nullptr).loss;
  m.release_saved();
  return loss;
}

TEST(SequentialGradient, EveryParameterMatchesFiniteDifferences) {
  HostRig rig;
  Context& ctx = rig.ctx;
  auto model = tiny_model(ctx);
  const std::int64_t n = 4;
  Tensor x = from_values(ctx, {n, 2, 6, 6}, random_values(n * 72, 3));
  std::vector<std::int32_t> label_values{0, 2, 1, 2};
  Tensor labels = Tensor::wrap(label_values.data(), {n}, DType::kI32);

  Tensor logits = model->forward(ctx, x, {.training = true, .step = 0});
  Tensor dlogits = ctx.empty(logits.shape(), DType::kF32, TensorCategory::kActivations);
  (void)ops::softmax_cross_entropy(ctx, logits, labels, &dlogits);
  logits.reset();
  model->backward(ctx, std::move(dlogits));

  const double eps = 1e-3;
  int checked = 0;
  for (const Parameter& p : model->parameters()) {
    std::vector<float> w = values_of(ctx, *p.value);
    const std::vector<float> g = values_of(ctx, *p.grad);
    // Up to 6 elements of each parameter, spread over it.
    const std::size_t stride = std::max<std::size_t>(1, w.size() / 6);
    for (std::size_t i = 0; i < w.size(); i += stride) {
      const float saved = w[i];
      w[i] = saved + static_cast<float>(eps);
      ops::copy_from_host(ctx, w.data(), *p.value);
      const double up = loss_of(ctx, *model, x, labels);
      w[i] = saved - static_cast<float>(eps);
      ops::copy_from_host(ctx, w.data(), *p.value);
      const double down = loss_of(ctx, *model, x, labels);
      w[i] = saved;
      ops::copy_from_host(ctx, w.data(), *p.value);
      const double numeric = (up - down) / (2 * eps);
      EXPECT_NEAR(g[i], numeric, 2e-3 + 0.05 * std::fabs(numeric)) << p.name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 40);
}

TEST(SequentialGradient, ParameterNamesAreStableAndCountsAdd) {
  HostRig rig;
  auto model = tiny_model(rig.ctx);
  const std::vector<Parameter> params = model->parameters();
  ASSERT_FALSE(params.empty());
  EXPECT_EQ(params.front().name, "0.weight");
  EXPECT_EQ(params.back().name, "8.bias");
  std::int64_t total = 0;
  for (const Parameter& p : params) total += p.value->elements();
  // conv 2*3*9+3, bn 3+3, separable 3*9+4*3+4, depthwise 4*9+4, dense 4*3+3
  EXPECT_EQ(total, 57 + 6 + 43 + 40 + 15);
  EXPECT_EQ(model->parameter_count(), total);
  EXPECT_EQ(model->buffers().size(), 2u);
  EXPECT_EQ(model->output_shape(7), (Shape{7, 3}));
}

TEST(SequentialGradient, AddingAMismatchedLayerNamesIt) {
  HostRig rig;
  Sequential m(Shape{3, 8, 8});
  m.add<Conv2D>(rig.ctx, Conv2DOptions{.in_channels = 3, .out_channels = 4});
  try {
    m.add<Conv2D>(rig.ctx, Conv2DOptions{.in_channels = 5, .out_channels = 4});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 1"), std::string::npos) << e.what();
  }
  EXPECT_EQ(m.size(), 1u);
}

}  // namespace
}  // namespace sluice::train
