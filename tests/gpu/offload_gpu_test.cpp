// Host offload of the optimizer state on a CUDA device (label gpu): AdamW with its moments in
// pinned host memory, streamed through device staging buffers by asynchronous copies, gives the
// same weights bit for bit as AdamW with its moments on the device; the device's
// optimizer-state category holds only the staging. Skips, saying why, without a usable device.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "gpu_test_util.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/context.hpp"
#include "sluice/train/ops.hpp"
#include "sluice/train/optimizer.hpp"

namespace sluice::train {
namespace {

struct Result {
  std::vector<std::vector<float>> weights;
  std::uint64_t device_state_peak = 0;
};

Result run(bool offload) {
  Allocator allocator(cuda(0), AllocatorOptions{.name = "gpu offload test"});
  Context ctx(allocator);
  const std::vector<std::int64_t> sizes = {4096, 333, 150000, 1};
  std::vector<Tensor> w, g;
  std::vector<Parameter> params;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    std::vector<float> v(static_cast<std::size_t>(sizes[i]));
    for (std::size_t k = 0; k < v.size(); ++k) v[k] = 0.001f * static_cast<float>((k * 7919 + i * 31) % 2001) - 1.0f;
    w.push_back(ctx.empty({sizes[i]}, DType::kF32, TensorCategory::kWeights));
    g.push_back(ctx.empty({sizes[i]}, DType::kF32, TensorCategory::kGradients));
    ops::copy_from_host(ctx, v.data(), w.back());
    for (float& x : v) x = 0.5f * x * x - 0.1f;
    ops::copy_from_host(ctx, v.data(), g.back());
  }
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    params.push_back({.name = "p" + std::to_string(i), .value = &w[i], .grad = &g[i],
                      .decay = i % 2 == 0 ? WeightDecay::kApply : WeightDecay::kExempt});
  }
  AdamW adam({.learning_rate = 0.01f, .weight_decay = 0.1f, .offload = offload});
  for (int s = 0; s < 5; ++s) adam.step(ctx, params);
  Result r;
  for (const Tensor& t : w) {
    std::vector<float> v(static_cast<std::size_t>(t.elements()));
    ops::copy_to_host(ctx, t, v.data());
    r.weights.push_back(std::move(v));
  }
  r.device_state_peak = allocator.stats().category(TensorCategory::kOptimizerState).peak_in_use_bytes;
  return r;
}

TEST(OffloadGpu, AdamWWithPinnedHostMomentsEqualsOnDevice) {
  SLUICE_REQUIRE_GPU();
  const Result on = run(false), off = run(true);
  ASSERT_EQ(on.weights.size(), off.weights.size());
  for (std::size_t i = 0; i < on.weights.size(); ++i) {
    EXPECT_EQ(std::memcmp(on.weights[i].data(), off.weights[i].data(), on.weights[i].size() * 4), 0) << i;
  }
  EXPECT_EQ(off.device_state_peak, 2 * Allocator::rounded_size(kOffloadChunkElements * 4));
  EXPECT_GT(on.device_state_peak, off.device_state_peak);
}

TEST(OffloadGpu, PinnedHostBackingIsHostMemory) {
  SLUICE_REQUIRE_GPU();
  auto backing = make_pinned_host_backing(cuda(0));
  EXPECT_EQ(backing->device(), host());
  EXPECT_NE(backing->describe().find("cudaHostAlloc"), std::string::npos);
  void* p = backing->allocate(1 << 21);
  ASSERT_NE(p, nullptr);
  std::memset(p, 7, 1 << 21);
  backing->deallocate(p, 1 << 21);
}

}  // namespace
}  // namespace sluice::train
