// Mixed precision on the CUDA backend against the CPU (label gpu): scale_cast for every pair of
// floating dtypes and find_nonfinite bit for bit (both are one f32 multiply rounded to nearest
// even, and a test of the exponent bits), then mixed-precision training steps on cuda:0 close to
// the same steps on the CPU, with the same loss-scale counters. Skips, saying why, without a
// usable CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "gpu_test_util.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/context.hpp"
#include "sluice/train/layers.hpp"
#include "sluice/train/ops.hpp"
#include "sluice/train/precision.hpp"
#include "sluice/train/trainer.hpp"

namespace sluice::train {
namespace {

constexpr DType kFloating[] = {DType::kF32, DType::kF16, DType::kBF16};

class PrecisionGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_GPU();
    cpu_allocator_ = std::make_unique<Allocator>(host());
    gpu_allocator_ = std::make_unique<Allocator>(cuda(0));
    cpu_ = std::make_unique<Context>(*cpu_allocator_, ContextOptions{.threads = 2});
    gpu_ = std::make_unique<Context>(*gpu_allocator_);
  }

  // `values` rounded to t, on `ctx`.
  static Tensor make(Context& ctx, const std::vector<float>& values, DType t) {
    Tensor f = ctx.empty({static_cast<std::int64_t>(values.size())}, DType::kF32, TensorCategory::kActivations);
    ops::copy_from_host(ctx, values.data(), f);
    Tensor x = ctx.empty(f.shape(), t, TensorCategory::kActivations);
    ops::cast(ctx, f, x);
    return x;
  }
  static std::vector<std::uint8_t> bytes(Context& ctx, const Tensor& t) {
    std::vector<std::uint8_t> out(t.bytes());
    ops::copy_to_host(ctx, t, out.data());
    return out;
  }

  std::unique_ptr<Allocator> cpu_allocator_, gpu_allocator_;
  std::unique_ptr<Context> cpu_, gpu_;
};

TEST_F(PrecisionGpu, ScaleCastMatchesTheCpuBitForBit) {
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> values(100003);
  for (float& v : values) v = dist(rng);
  values[5] = std::numeric_limits<float>::infinity();
  values[6] = std::numeric_limits<float>::quiet_NaN();
  values[7] = 1e-6f;  // subnormal in f16 once scaled down
  for (DType from : kFloating) {
    for (DType to : kFloating) {
      for (float scale : {65536.0f, 1.0f / 65536.0f, 3.0f}) {
        Tensor xc = make(*cpu_, values, from), xg = make(*gpu_, values, from);
        Tensor yc = cpu_->empty(xc.shape(), to, TensorCategory::kActivations);
        Tensor yg = gpu_->empty(xg.shape(), to, TensorCategory::kActivations);
        ops::scale_cast(*cpu_, xc, scale, yc);
        ops::scale_cast(*gpu_, xg, scale, yg);
        EXPECT_TRUE(bytes(*cpu_, yc) == bytes(*gpu_, yg)) << to_string(from) << " -> " << to_string(to) << " x" << scale;
      }
    }
    // In place.
    Tensor xc = make(*cpu_, values, from), xg = make(*gpu_, values, from);
    ops::scale_cast(*cpu_, xc, 0.5f, xc);
    ops::scale_cast(*gpu_, xg, 0.5f, xg);
    EXPECT_TRUE(bytes(*cpu_, xc) == bytes(*gpu_, xg)) << to_string(from) << " in place";
  }
}

TEST_F(PrecisionGpu, FindNonfiniteMatchesTheCpu) {
  for (DType t : kFloating) {
    for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                      std::numeric_limits<float>::quiet_NaN(), 0.5f}) {
      for (std::size_t where : {std::size_t{0}, std::size_t{77777}, std::size_t{299999}}) {
        std::vector<float> values(300000, 0.25f);
        values[where] = bad;
        float found[2] = {-1.0f, -1.0f};
        int side = 0;
        for (Context* ctx : {cpu_.get(), gpu_.get()}) {
          Tensor x = make(*ctx, values, t);
          Tensor flag = ctx->empty({1}, DType::kF32, TensorCategory::kWorkspace);
          ops::fill(*ctx, flag, 0.0f);
          ops::find_nonfinite(*ctx, x, flag);
          ops::copy_to_host(*ctx, flag, &found[side++]);
        }
        EXPECT_EQ(found[0], std::isfinite(bad) ? 0.0f : 1.0f) << to_string(t);
        EXPECT_EQ(found[1], found[0]) << to_string(t) << " " << bad << " at " << where;
      }
    }
  }
}

std::unique_ptr<Sequential> tiny_cnn(Context& ctx) {
  auto m = std::make_unique<Sequential>(Shape{3, 8, 8});
  m->add<Conv2D>(ctx, Conv2DOptions{.in_channels = 3, .out_channels = 8});
  m->add<BatchNorm>(ctx, BatchNormOptions{.channels = 8});
  m->add<ReLU>();
  m->add<SeparableConv2D>(ctx, SeparableConv2DOptions{.in_channels = 8, .out_channels = 16});
  m->add<BatchNorm>(ctx, BatchNormOptions{.channels = 16});
  m->add<ReLU>();
  m->add<GlobalAvgPool>();
  m->add<Dense>(ctx, DenseOptions{.in_features = 16, .out_features = 4});
  m->initialize(ctx, 3);
  return m;
}

TEST_F(PrecisionGpu, MixedTrainingStepsMatchTheCpu) {
  constexpr std::int64_t kBatch = 16;
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> images(static_cast<std::size_t>(kBatch * 3 * 64));
  for (float& v : images) v = dist(rng);
  std::vector<std::int32_t> labels(kBatch);
  for (std::int64_t i = 0; i < kBatch; ++i) labels[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i % 4);
  for (Precision p : {Precision::kMixedF16, Precision::kMixedBF16}) {
    std::vector<std::vector<float>> weights[2];
    double loss[2] = {0, 0};
    PrecisionStats stats[2];
    int side = 0;
    for (Context* ctx : {cpu_.get(), gpu_.get()}) {
      auto model = tiny_cnn(*ctx);
      Sgd opt(SgdOptions{.learning_rate = 0.05f});
      Trainer trainer(*ctx, *model, opt, TrainerOptions{.precision = p});
      for (int s = 0; s < 3; ++s) {
        loss[side] = trainer.step({images.data(), DType::kF32, {kBatch, 3, 8, 8}}, labels).mean_loss();
      }
      stats[side] = trainer.precision_stats();
      for (const Parameter& param : model->parameters()) {
        std::vector<float> v(static_cast<std::size_t>(param.value->elements()));
        ops::copy_to_host(*ctx, *param.value, v.data());
        weights[side].push_back(std::move(v));
      }
      ++side;
    }
    SCOPED_TRACE(std::string(to_string(p)));
    EXPECT_EQ(stats[0].skipped_steps, stats[1].skipped_steps);
    EXPECT_EQ(stats[0].loss_scale, stats[1].loss_scale);
    EXPECT_NEAR(loss[1], loss[0], (p == Precision::kMixedF16 ? 1e-2 : 5e-2) * loss[0]);
    double num = 0, den = 0;
    for (std::size_t t = 0; t < weights[0].size(); ++t) {
      for (std::size_t i = 0; i < weights[0][t].size(); ++i) {
        const double d = static_cast<double>(weights[1][t][i]) - weights[0][t][i];
        num += d * d;
        den += static_cast<double>(weights[0][t][i]) * weights[0][t][i];
      }
    }
    EXPECT_LT(std::sqrt(num / den), p == Precision::kMixedF16 ? 1e-2 : 5e-2);
  }
}

}  // namespace
}  // namespace sluice::train
