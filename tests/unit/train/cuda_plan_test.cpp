// Planning for the CUDA backend on a machine without a GPU: a meta context configured
// as a CUDA device would be takes cuBLAS's workspace from its allocator at construction and holds
// it, as CudaBackend does (the batch-size search used to find it allocated lazily by the first
// trial and failed with "the trial at batch N left ... bytes in use"); its ops request the CUDA
// backend's workspaces op by op (src/train/cuda/cuda_workspace.hpp, the arithmetic CudaBackend
// carves with); plan_peak for cuda(0) counts both; and the batch-size and accumulation searches on
// such a context leave nothing behind, their trials agreeing with the planner's dry runs. The real
// backend's side of the same contract is tests/gpu/cuda_plan_gpu_test.cpp.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/device/device.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/backing.hpp"
#include "sluice/train/batch_search.hpp"
#include "sluice/train/context.hpp"
#include "sluice/train/ops.hpp"
#include "sluice/train/planner.hpp"
#include "train/tensor/backend.hpp"
#include "train/cuda/cuda_workspace.hpp"

namespace sluice::train {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

std::uint64_t workspace_in_use(const Allocator& a) {
  return a.stats().category(TensorCategory::kWorkspace).in_use_bytes;
}

ContextOptions cuda_meta(int compute_major = 0) {
  return ContextOptions{.threads = 1, .meta = true, .meta_device = cuda(0), .meta_compute_major = compute_major};
}

TEST(CudaPlan, AMetaCudaContextHoldsCublasWorkspaceFromConstruction) {
  Allocator allocator(make_address_space_backing(), {.name = "plan"});
  for (const auto& [major, bytes] : std::vector<std::pair<int, std::uint64_t>>{{9, 32 * kMiB}, {8, 4 * kMiB}}) {
    {
      Context ctx(allocator, cuda_meta(major));
      EXPECT_EQ(workspace_in_use(allocator), bytes) << "compute capability " << major;
      EXPECT_EQ(allocator.stats().in_use_bytes, bytes);
      const std::string text = ctx.backend().describe();
      EXPECT_NE(text.find("cuda:0"), std::string::npos) << text;
      EXPECT_NE(text.find("cuBLAS workspace"), std::string::npos) << text;
      ctx.wait_event(nullptr);  // nothing to order on a meta context
    }
    EXPECT_EQ(allocator.stats().in_use_bytes, 0u);  // given back with the context
  }
  // 0: the device's own capability when one is usable here, else the H200's (9).
  Context ctx(allocator, cuda_meta());
  const int expected = cuda_device_count() > 0 ? describe(cuda(0)).compute_major : cuda_detail::kPlanComputeMajor;
  EXPECT_EQ(workspace_in_use(allocator), cuda_detail::cublas_workspace_bytes(expected));
}

TEST(CudaPlan, ANegativeComputeCapabilityIsRefused) {
  Allocator allocator(make_address_space_backing());
  EXPECT_THROW(Context(allocator, cuda_meta(-1)), Error);
}

// Each op of a meta CUDA context asks Context::workspace for exactly what CudaBackend's op asks
// for, forward and backward apart (they differ on CUDA, unlike the CPU backend).
TEST(CudaPlan, MetaCudaOpsRequestTheCudaBackendsWorkspaces) {
  Allocator allocator(make_address_space_backing());
  const DType t = DType::kF16;
  auto fresh = [&] { return std::make_unique<Context>(allocator, cuda_meta(9)); };
  auto tensor = [&](Context& ctx, const Shape& s, DType dt) { return ctx.empty(s, dt, TensorCategory::kActivations); };

  const Conv2dShape conv = Conv2dShape::make({8, 16, 24, 24}, 32, Window2d::square(3, 1, 1));
  {
    auto ctx = fresh();
    Tensor x = tensor(*ctx, conv.input(), t), w = tensor(*ctx, conv.weight(), t), y = tensor(*ctx, conv.output(), t);
    ops::conv2d_forward(*ctx, conv, x, w, nullptr, y);
    EXPECT_EQ(ctx->workspace_bytes(), cuda_detail::conv2d_forward_workspace(conv, t));
    Tensor dy = tensor(*ctx, conv.output(), t), dx = tensor(*ctx, conv.input(), t), dw = tensor(*ctx, conv.weight(), t);
    ops::conv2d_backward(*ctx, conv, x, w, dy, &dx, dw, nullptr);
    EXPECT_EQ(ctx->workspace_bytes(), cuda_detail::conv2d_backward_workspace(conv, t));
    EXPECT_GT(cuda_detail::conv2d_backward_workspace(conv, t), cuda_detail::conv2d_forward_workspace(conv, t));
    EXPECT_EQ(ops::conv2d_workspace(*ctx, conv, t), cuda_detail::conv2d_backward_workspace(conv, t));
  }
  const Conv2dShape depth = Conv2dShape::make_depthwise({8, 16, 24, 24}, Window2d::square(3, 1, 1));
  {
    auto ctx = fresh();
    Tensor x = tensor(*ctx, depth.input(), t), w = tensor(*ctx, depth.depthwise_weight(), t),
           y = tensor(*ctx, depth.output(), t);
    ops::depthwise_conv2d_forward(*ctx, depth, x, w, nullptr, y);
    EXPECT_EQ(ctx->workspace_bytes(), 0u);  // the CUDA depthwise forward takes none (the CPU's does)
    Tensor dy = tensor(*ctx, depth.output(), t), dw = tensor(*ctx, depth.depthwise_weight(), t);
    ops::depthwise_conv2d_backward(*ctx, depth, x, w, dy, nullptr, dw, nullptr);
    EXPECT_EQ(ctx->workspace_bytes(), cuda_detail::depthwise_conv2d_backward_workspace(depth));
  }
  const SeparableShape sep = SeparableShape::make({8, 16, 24, 24}, 32, Window2d::square(3, 1, 1));
  {
    auto ctx = fresh();
    Tensor x = tensor(*ctx, sep.input(), t), wd = tensor(*ctx, sep.depthwise_weight(), t),
           wp = tensor(*ctx, sep.pointwise_weight(), t), y = tensor(*ctx, sep.output(), t);
    ops::separable_conv2d_forward(*ctx, sep, x, wd, wp, nullptr, y);
    EXPECT_EQ(ctx->workspace_bytes(), cuda_detail::separable_conv2d_forward_workspace(sep, t));
    Tensor dy = tensor(*ctx, sep.output(), t), dwd = tensor(*ctx, sep.depthwise_weight(), t),
           dwp = tensor(*ctx, sep.pointwise_weight(), t);
    ops::separable_conv2d_backward(*ctx, sep, x, wd, wp, dy, nullptr, dwd, dwp, nullptr);
    EXPECT_EQ(ctx->workspace_bytes(), cuda_detail::separable_conv2d_backward_workspace(sep, t));
  }
  {
    auto ctx = fresh();
    Tensor logits = tensor(*ctx, {100, 10}, DType::kF32), labels = tensor(*ctx, {100}, DType::kI32);
    ops::softmax_cross_entropy(*ctx, logits, labels, nullptr);
    EXPECT_EQ(ctx->workspace_bytes(), cuda_detail::softmax_cross_entropy_workspace(100));
    EXPECT_GT(ctx->workspace_bytes(), 0u);
  }
  EXPECT_EQ(cuda_detail::softmax_cross_entropy_workspace(0), 0u);
}

TEST(CudaPlan, PlanPeakForCudaCountsCublasWorkspaceWithoutAGpu) {
  PlanConfig pc;
  pc.train = TrainConfig{.model = "cifar10-separable", .batch = 64, .optimizer = "sgd"};
  pc.steps = 2;
  pc.eval_batch = 0;
  pc.threads = 2;
  const TrainingMemoryPlan cpu = plan_peak(pc);
  pc.device = cuda(0);
  pc.compute_major = 9;
  const TrainingMemoryPlan gpu = plan_peak(pc);
  std::printf("  cifar10-separable batch 64: cpu plan %llu B (workspace %llu), cuda:0 plan %llu B (workspace %llu)\n",
              static_cast<unsigned long long>(cpu.peak_in_use_bytes),
              static_cast<unsigned long long>(cpu.peak_by_category[index_of(TensorCategory::kWorkspace)]),
              static_cast<unsigned long long>(gpu.peak_in_use_bytes),
              static_cast<unsigned long long>(gpu.peak_by_category[index_of(TensorCategory::kWorkspace)]));
  ASSERT_TRUE(gpu.fits);
  EXPECT_NE(gpu.backend.find("cuda:0"), std::string::npos) << gpu.backend;
  EXPECT_EQ(cpu.backend.find("cuda"), std::string::npos) << cpu.backend;
  EXPECT_GE(gpu.peak_by_category[index_of(TensorCategory::kWorkspace)], 32 * kMiB);
  // The same tensors either way: only the workspace differs between the two plans.
  for (TensorCategory c : {TensorCategory::kWeights, TensorCategory::kGradients, TensorCategory::kOptimizerState}) {
    EXPECT_EQ(gpu.peak_by_category[index_of(c)], cpu.peak_by_category[index_of(c)]) << to_string(c);
  }
  EXPECT_EQ(gpu.parameters, cpu.parameters);
  // Under a limit below cuBLAS's workspace nothing fits, and the plan says so.
  pc.allocator = AllocatorOptions{.mode = AllocatorMode::kGrow, .limit = 16 * kMiB};
  const TrainingMemoryPlan tight = plan_peak(pc);
  EXPECT_FALSE(tight.fits);
  EXPECT_FALSE(tight.failure.empty());
}

// The searches on a meta CUDA context: cuBLAS's workspace is in use before the first trial and
// after the last, so no trial "leaves bytes in use"; and each trial, run on the same model of the
// backend, agrees with the planner's dry run, so the guess is the answer (2 trials: it, and the
// next one failing).
TEST(CudaPlan, BatchAndAccumulationSearchesOnAMetaCudaContextLeaveNothingBehind) {
  for (const AllocatorOptions& limit :
       {AllocatorOptions{.mode = AllocatorMode::kGrow, .limit = 96 * kMiB, .name = "grow"},
        AllocatorOptions{.mode = AllocatorMode::kPreallocate, .limit = 96 * kMiB, .name = "prealloc"}}) {
    Allocator allocator(make_address_space_backing(), limit);
    Context ctx(allocator, cuda_meta(9));
    const std::uint64_t held = allocator.stats().in_use_bytes;
    EXPECT_EQ(held, 32 * kMiB);
    const TrainConfig config{.model = "cifar10-separable", .optimizer = "sgd"};
    const BatchSearchResult r = find_max_batch(ctx, config, {.min_batch = 2, .max_batch = 4096});
    std::printf("  %s 96 MiB: batch %lld, planner guess %lld, %zu trials\n", limit.name.c_str(),
                static_cast<long long>(r.batch), static_cast<long long>(r.planner_guess), r.trials.size());
    ASSERT_GT(r.batch, 2);
    EXPECT_EQ(r.batch, r.planner_guess) << limit.name;
    EXPECT_LE(r.trials.size(), 2u) << limit.name;
    EXPECT_EQ(allocator.stats().in_use_bytes, held) << limit.name;

    TrainConfig big = config;
    big.batch = r.batch * 4;
    const AccumulationSearchResult a = find_accumulation(ctx, big);
    EXPECT_GT(a.accumulate, 1) << limit.name;
    EXPECT_EQ(a.accumulate, a.planner_guess) << limit.name;
    EXPECT_EQ(allocator.stats().in_use_bytes, held) << limit.name;
  }
}

}  // namespace
}  // namespace sluice::train
