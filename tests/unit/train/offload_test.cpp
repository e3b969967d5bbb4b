// Host offload of the optimizer state: AdamW and SGD with their state in a host allocator give
// bit-identical weights to the on-device optimizers over several training steps, the device's
// optimizer-state category then holds only the staging buffers (the largest parameter, once per
// slot), the host allocator holds the state, and the async copies round-trip.
#include <gtest/gtest.h>

#include <cstring>

#include "model_test_support.hpp"
#include "sluice/train/layers.hpp"
#include "sluice/train/optimizer.hpp"
#include "sluice/train/trainer.hpp"

namespace sluice::train {
namespace {

using test::HostRig;
using test::values_of;

std::unique_ptr<Sequential> small_cnn(Context& ctx) {
  auto m = std::make_unique<Sequential>(Shape{1, 8, 8});
  m->add<Conv2D>(ctx, Conv2DOptions{.in_channels = 1, .out_channels = 8});
  m->add<BatchNorm>(ctx, BatchNormOptions{.channels = 8});
  m->add<ReLU>();
  m->add<MaxPool2D>();
  m->add<SeparableConv2D>(ctx, SeparableConv2DOptions{.in_channels = 8, .out_channels = 16});
  m->add<ReLU>();
  m->add<Flatten>();
  m->add<Dense>(ctx, DenseOptions{.in_features = 16 * 4 * 4, .out_features = 4});
  m->initialize(ctx, 21);
  return m;
}

struct OffloadRun {
  std::vector<std::vector<float>> weights;
  std::uint64_t device_state_bytes = 0;  // peak of the optimizer-state category, device allocator
  std::uint64_t host_state_bytes = 0;    // in use in the optimizer's host allocator
};

OffloadRun train(bool adam, bool offload, int steps) {
  HostRig rig(2);
  auto model = small_cnn(rig.ctx);
  std::unique_ptr<Optimizer> opt;
  if (adam) {
    opt = std::make_unique<AdamW>(AdamWOptions{.learning_rate = 0.01f, .offload = offload});
  } else {
    opt = std::make_unique<Sgd>(SgdOptions{.learning_rate = 0.05f, .offload = offload});
  }
  EXPECT_EQ(opt->offloaded(), offload);
  Trainer trainer(rig.ctx, *model, *opt);
  test::ToySet set = test::toy_set(64, 1, 8, 4, 5);
  for (int s = 0; s < steps; ++s) {
    const std::int64_t b = (s * 16) % 64;
    TensorView view{set.images.data() + b * 64, DType::kF32, {16, 1, 8, 8}};
    trainer.step(view, std::span<const std::int32_t>(set.labels.data() + b, 16));
  }
  OffloadRun r;
  for (const Parameter& p : model->parameters()) r.weights.push_back(values_of(rig.ctx, *p.value));
  r.device_state_bytes = rig.allocator.stats().category(TensorCategory::kOptimizerState).peak_in_use_bytes;
  if (const Allocator* h = opt->host_state_allocator()) {
    r.host_state_bytes = h->stats().category(TensorCategory::kOptimizerState).in_use_bytes;
    EXPECT_EQ(h->device(), host());
  }
  return r;
}

void expect_bit_identical(const OffloadRun& a, const OffloadRun& b) {
  ASSERT_EQ(a.weights.size(), b.weights.size());
  for (std::size_t i = 0; i < a.weights.size(); ++i) {
    ASSERT_EQ(a.weights[i].size(), b.weights[i].size());
    EXPECT_EQ(std::memcmp(a.weights[i].data(), b.weights[i].data(), a.weights[i].size() * 4), 0) << "parameter " << i;
  }
}

// The sizes the allocator accounts: each request rounded up to 256 bytes.
std::uint64_t rounded(std::int64_t elements) { return Allocator::rounded_size(static_cast<std::uint64_t>(elements) * 4); }

TEST(Offload, AdamWEqualsOnDeviceBitForBitAndKeepsOnlyStagingOnTheDevice) {
  const OffloadRun on = train(true, false, 6);
  const OffloadRun off = train(true, true, 6);
  expect_bit_identical(on, off);
  HostRig rig;
  auto model = small_cnn(rig.ctx);
  std::uint64_t all = 0;
  std::int64_t largest = 0;
  for (const Parameter& p : model->parameters()) {
    all += rounded(p.value->elements());
    largest = std::max(largest, p.value->elements());
  }
  EXPECT_EQ(on.device_state_bytes, 2 * all);        // m and v of every parameter
  EXPECT_EQ(off.device_state_bytes, 2 * rounded(largest));  // two staging buffers
  EXPECT_EQ(off.host_state_bytes, 2 * all);
  EXPECT_LT(off.device_state_bytes, on.device_state_bytes);
}

TEST(Offload, SgdMomentumOffloadsTheSameWay) {
  const OffloadRun on = train(false, false, 6);
  const OffloadRun off = train(false, true, 6);
  expect_bit_identical(on, off);
  EXPECT_LT(off.device_state_bytes, on.device_state_bytes);
  EXPECT_EQ(off.host_state_bytes, on.device_state_bytes);
}

// Parameters larger than a chunk go through the staging buffers in several pieces.
std::vector<std::vector<float>> raw_steps(bool adam, bool offload, std::uint64_t* device_state) {
  HostRig rig(2);
  const std::vector<std::int64_t> sizes = {2 * kOffloadChunkElements + 1000, 333, kOffloadChunkElements, 1};
  std::vector<Tensor> w, g;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    w.push_back(test::from_values(rig.ctx, {sizes[i]}, test::random_values(sizes[i], 10 + i), TensorCategory::kWeights));
    g.push_back(test::from_values(rig.ctx, {sizes[i]}, test::random_values(sizes[i], 20 + i), TensorCategory::kGradients));
  }
  std::vector<Parameter> params;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    params.push_back({.name = "p" + std::to_string(i), .value = &w[i], .grad = &g[i],
                      .decay = i % 2 == 0 ? WeightDecay::kApply : WeightDecay::kExempt});
  }
  std::unique_ptr<Optimizer> opt;
  if (adam) {
    opt = std::make_unique<AdamW>(AdamWOptions{.learning_rate = 0.01f, .weight_decay = 0.1f, .offload = offload});
  } else {
    opt = std::make_unique<Sgd>(SgdOptions{.learning_rate = 0.05f, .offload = offload});
  }
  for (int s = 0; s < 4; ++s) opt->step(rig.ctx, params);
  *device_state = rig.allocator.stats().category(TensorCategory::kOptimizerState).peak_in_use_bytes;
  std::vector<std::vector<float>> out;
  for (const Tensor& t : w) out.push_back(values_of(rig.ctx, t));
  return out;
}

TEST(Offload, ParametersLargerThanAChunkStreamInPiecesAndStayBitIdentical) {
  for (const bool adam : {true, false}) {
    std::uint64_t on_state = 0, off_state = 0;
    const auto on = raw_steps(adam, false, &on_state);
    const auto off = raw_steps(adam, true, &off_state);
    ASSERT_EQ(on.size(), off.size());
    for (std::size_t i = 0; i < on.size(); ++i) {
      EXPECT_EQ(std::memcmp(on[i].data(), off[i].data(), on[i].size() * 4), 0) << "parameter " << i << " adam " << adam;
    }
    const std::uint64_t slots = adam ? 2 : 1;
    EXPECT_EQ(off_state, slots * rounded(kOffloadChunkElements)) << adam;
    EXPECT_EQ(on_state, slots * (rounded(2 * kOffloadChunkElements + 1000) + rounded(333) + rounded(kOffloadChunkElements) +
                                 rounded(1))) << adam;
  }
}

TEST(Offload, PinnedHostBackingOnTheCpuIsOrdinaryHostMemory) {
  auto backing = make_pinned_host_backing(host());
  EXPECT_EQ(backing->device(), host());
  void* p = backing->allocate(1 << 21);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % Backing::kAlignment, 0u);
  std::memset(p, 1, 1 << 21);
  backing->deallocate(p, 1 << 21);
}

TEST(Offload, AsyncCopiesRoundTrip) {
  HostRig rig;
  std::vector<float> in = test::random_values(1000, 3), out(1000);
  Tensor t = rig.ctx.empty({1000}, DType::kF32, TensorCategory::kOptimizerState);
  ops::copy_from_host_async(rig.ctx, in.data(), t);
  ops::copy_to_host_async(rig.ctx, t, out.data());
  rig.ctx.synchronize();
  EXPECT_EQ(in, out);
}

}  // namespace
}  // namespace sluice::train
