// SGD and AdamW against PyTorch's update rules worked by hand, weight decay only where a
// parameter asks for it, state bound to its parameters, and the cosine schedule's shape.
#include <gtest/gtest.h>

#include <cmath>

#include "model_test_support.hpp"
#include "sluice/core/error.hpp"
#include "sluice/train/optimizer.hpp"

namespace sluice::train {
namespace {

using test::from_values;
using test::HostRig;
using test::values_of;

struct TwoParams {
  TwoParams(Context& ctx)
      : w(from_values(ctx, {2}, {1.0f, -2.0f}, TensorCategory::kWeights)),
        gw(from_values(ctx, {2}, {0.5f, 0.25f}, TensorCategory::kGradients)),
        b(from_values(ctx, {1}, {3.0f}, TensorCategory::kWeights)),
        gb(from_values(ctx, {1}, {-1.0f}, TensorCategory::kGradients)) {}
  std::vector<Parameter> list() {
    return {{.name = "w", .value = &w, .grad = &gw, .decay = WeightDecay::kApply},
            {.name = "b", .value = &b, .grad = &gb, .decay = WeightDecay::kExempt}};
  }
  Tensor w, gw, b, gb;
};

TEST(Optimizer, SgdNesterovWithDecayFollowsTorch) {
  HostRig rig;
  TwoParams p(rig.ctx);
  Sgd sgd({.learning_rate = 0.1f, .momentum = 0.9f, .nesterov = true, .weight_decay = 0.01f});
  sgd.step(rig.ctx, p.list());
  sgd.step(rig.ctx, p.list());  // the same gradient twice
  // torch.optim.SGD for w[0] = 1, g = 0.5, wd 0.01 (b has no decay):
  double w = 1.0, buf = 0;
  for (int s = 0; s < 2; ++s) {
    const double g = 0.5 + 0.01 * w;
    buf = s == 0 ? g : 0.9 * buf + g;
    w -= 0.1 * (g + 0.9 * buf);
  }
  double b = 3.0, bbuf = 0;
  for (int s = 0; s < 2; ++s) {
    bbuf = s == 0 ? -1.0 : 0.9 * bbuf - 1.0;
    b -= 0.1 * (-1.0 + 0.9 * bbuf);
  }
  EXPECT_NEAR(values_of(rig.ctx, p.w)[0], w, 1e-6);
  EXPECT_NEAR(values_of(rig.ctx, p.b)[0], b, 1e-6);
  EXPECT_EQ(sgd.steps(), 2);
  EXPECT_EQ(rig.allocator.stats().category(TensorCategory::kOptimizerState).in_use_bytes, 2u * 256u);
}

TEST(Optimizer, AdamWFollowsTorch) {
  HostRig rig;
  TwoParams p(rig.ctx);
  AdamW adam({.learning_rate = 0.01f, .weight_decay = 0.1f});
  adam.step(rig.ctx, p.list());
  adam.step(rig.ctx, p.list());
  double w = -2.0, m = 0, v = 0;
  for (int t = 1; t <= 2; ++t) {
    const double g = 0.25;
    w *= 1 - 0.01 * 0.1;
    m = 0.9 * m + 0.1 * g;
    v = 0.999 * v + 0.001 * g * g;
    const double mh = m / (1 - std::pow(0.9, t)), vh = v / (1 - std::pow(0.999, t));
    w -= 0.01 * mh / (std::sqrt(vh) + 1e-8);
  }
  EXPECT_NEAR(values_of(rig.ctx, p.w)[1], w, 1e-5);
  // No decay on b: two steps of exactly lr each (|m_hat| / sqrt(v_hat) = 1 for a constant g).
  EXPECT_NEAR(values_of(rig.ctx, p.b)[0], 3.0 + 2 * 0.01, 1e-5);
}

TEST(Optimizer, StateIsBoundToItsParameters) {
  HostRig rig;
  TwoParams p(rig.ctx), q(rig.ctx);
  Sgd sgd;
  sgd.step(rig.ctx, p.list());
  EXPECT_THROW(sgd.step(rig.ctx, q.list()), Error);
  std::vector<Parameter> fewer = p.list();
  fewer.pop_back();
  EXPECT_THROW(sgd.step(rig.ctx, fewer), Error);
  EXPECT_THROW(Sgd({.learning_rate = -1.0f}), Error);
  EXPECT_THROW(AdamW({.beta1 = 1.0f}), Error);
}

TEST(Optimizer, CosineScheduleWarmsUpThenDecaysToZero) {
  const CosineSchedule s{.base = 0.1f, .warmup_steps = 10, .total_steps = 110};
  EXPECT_NEAR(s.at(0), 0.01f, 1e-7);
  EXPECT_NEAR(s.at(9), 0.1f, 1e-7);
  EXPECT_NEAR(s.at(10), 0.1f, 1e-7);
  EXPECT_NEAR(s.at(60), 0.05f, 1e-6);
  EXPECT_LT(s.at(109), 0.001f);
  EXPECT_EQ(s.at(110), 0.0f);
  float last = s.at(10);
  for (int i = 11; i < 110; ++i) {
    EXPECT_LE(s.at(i), last);
    last = s.at(i);
  }
  EXPECT_EQ((CosineSchedule{.base = 0.3f}).at(12345), 0.3f);
}

}  // namespace
}  // namespace sluice::train
