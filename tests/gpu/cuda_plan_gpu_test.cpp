// The CUDA training backend's memory against its model, and the trainer's input ordering, on a
// real GPU. cuBLAS's workspace is taken from the training allocator when the context
// is made and held (it used to be taken by the first GEMM, so the batch-size search's first trial
// "left 32 MiB in use" and --batch auto failed with kInternal); each op asks for exactly the
// workspace src/train/cuda/cuda_workspace.hpp says, which is what the planner models without a
// GPU; plan_peak(cuda:0) equals the peak of real steps to the byte; the batch-size search on
// cuda:0 leaves nothing behind. Trainer::step on a device batch waits, on the device, for the
// batch's ready event, whatever stream wrote it. Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdio>
#include <memory>
#include <vector>

#include "gpu_test_util.hpp"
#include "sluice/device/device_pool.hpp"
#include "sluice/device/pinned.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/batch_search.hpp"
#include "sluice/train/context.hpp"
#include "sluice/train/models.hpp"
#include "sluice/train/ops.hpp"
#include "sluice/train/planner.hpp"
#include "sluice/train/train_config.hpp"
#include "sluice/train/trainer.hpp"
#include "train/cuda/cuda_workspace.hpp"

namespace sluice::train {
namespace {

std::uint64_t workspace_in_use(const Allocator& a) {
  return a.stats().category(TensorCategory::kWorkspace).in_use_bytes;
}

// A batch in device memory of its own (as the loader's ring slots are), filled from the host.
struct DeviceBatch {
  DeviceBatch(const ModelInfo& info, std::int64_t n, const std::vector<float>& data, const std::vector<std::int32_t>& labels)
      : pool(make_caching_pool(cuda(0))),
        x(*pool, data.size() * sizeof(float)),
        y(*pool, labels.size() * sizeof(std::int32_t)),
        view{x.data(), DType::kF32, Shape{n, info.channels, info.height, info.width}} {
    copy_to_device(cuda(0), x.data(), data.data(), data.size() * sizeof(float));
    copy_to_device(cuda(0), y.data(), labels.data(), labels.size() * sizeof(std::int32_t));
  }
  std::span<const std::int32_t> labels(std::int64_t n) const {
    return {static_cast<const std::int32_t*>(y.data()), static_cast<std::size_t>(n)};
  }
  std::unique_ptr<DevicePool> pool;
  DeviceBuffer x, y;
  TensorView view;
};

TEST(GpuCudaPlan, CublasWorkspaceIsTakenAtSetupAndHeld) {
  SLUICE_REQUIRE_GPU();
  Allocator allocator(cuda(0));
  const std::uint64_t expected = cuda_detail::cublas_workspace_bytes(describe(cuda(0)).compute_major);
  {
    Context ctx(allocator);
    EXPECT_EQ(workspace_in_use(allocator), expected) << "before any op";
    const DenseShape s = DenseShape::make({4, 8}, 3);  // a GEMM: Dense takes no other workspace
    Tensor x = ctx.zeros(s.input(), DType::kF32, TensorCategory::kActivations);
    Tensor w = ctx.zeros(s.weight(), DType::kF32, TensorCategory::kWeights);
    Tensor y = ctx.empty(s.output(), DType::kF32, TensorCategory::kActivations);
    ops::dense_forward(ctx, s, x, w, nullptr, y);
    ctx.synchronize();
    EXPECT_EQ(workspace_in_use(allocator), expected) << "after a GEMM";
  }
  EXPECT_EQ(allocator.stats().in_use_bytes, 0u);
}

TEST(GpuCudaPlan, EachOpAsksForTheModelledWorkspace) {
  SLUICE_REQUIRE_GPU();
  Allocator allocator(cuda(0));
  const DType t = DType::kF16;
  const Conv2dShape conv = Conv2dShape::make({8, 16, 24, 24}, 32, Window2d::square(3, 1, 1));
  {
    Context ctx(allocator);
    auto make = [&](const Shape& s) { return ctx.zeros(s, t, TensorCategory::kActivations); };
    Tensor x = make(conv.input()), w = make(conv.weight()), y = make(conv.output());
    ops::conv2d_forward(ctx, conv, x, w, nullptr, y);
    EXPECT_EQ(ctx.workspace_bytes(), cuda_detail::conv2d_forward_workspace(conv, t));
    Tensor dy = make(conv.output()), dx = make(conv.input()), dw = make(conv.weight());
    ops::conv2d_backward(ctx, conv, x, w, dy, &dx, dw, nullptr);
    EXPECT_EQ(ctx.workspace_bytes(), cuda_detail::conv2d_backward_workspace(conv, t));
    ctx.synchronize();
  }
  const SeparableShape sep = SeparableShape::make({8, 16, 24, 24}, 32, Window2d::square(3, 1, 1));
  {
    Context ctx(allocator);
    auto make = [&](const Shape& s) { return ctx.zeros(s, t, TensorCategory::kActivations); };
    Tensor x = make(sep.input()), wd = make(sep.depthwise_weight()), wp = make(sep.pointwise_weight()),
           y = make(sep.output());
    ops::separable_conv2d_forward(ctx, sep, x, wd, wp, nullptr, y);
    EXPECT_EQ(ctx.workspace_bytes(), cuda_detail::separable_conv2d_forward_workspace(sep, t));
    Tensor dy = make(sep.output()), dwd = make(sep.depthwise_weight()), dwp = make(sep.pointwise_weight());
    ops::separable_conv2d_backward(ctx, sep, x, wd, wp, dy, nullptr, dwd, dwp, nullptr);
    EXPECT_EQ(ctx.workspace_bytes(), cuda_detail::separable_conv2d_backward_workspace(sep, t));
    ctx.synchronize();
  }
}

// plan_peak(cuda:0) against two real steps on cuda:0 with the batch already on the device (as
// `sluice train --device cuda:0` feeds it), per category, to the byte.
TEST(GpuCudaPlan, ThePlanForCudaIsThePeakOfRealSteps) {
  SLUICE_REQUIRE_GPU();
  for (const TrainConfig& config :
       {TrainConfig{.model = "fashion-cnn", .batch = 64, .optimizer = "sgd"},
        TrainConfig{.model = "cifar10-separable", .batch = 64, .optimizer = "adam"},
        TrainConfig{.model = "cifar10-separable", .batch = 32, .optimizer = "sgd", .precision = "mixed_bf16"}}) {
    PlanConfig pc;
    pc.train = config;
    pc.device = cuda(0);
    pc.steps = 2;
    pc.eval_batch = 0;
    const TrainingMemoryPlan plan = plan_peak(pc);
    Allocator allocator(cuda(0));
    Context ctx(allocator);
    TrainSetup s = make_training(ctx, config);
    Trainer trainer(ctx, *s.model, *s.optimizer, s.trainer);
    const ModelInfo& info = model_info(config.model);
    const std::int64_t n = config.batch;
    const DeviceBatch batch(info, n, std::vector<float>(static_cast<std::size_t>(n * info.channels * info.height * info.width)),
                            std::vector<std::int32_t>(static_cast<std::size_t>(n), 1));
    allocator.reset_peak();
    for (int i = 0; i < 2; ++i) trainer.step(batch.view, batch.labels(n), cuda(0));
    ctx.synchronize();
    const AllocatorStats real = allocator.stats();
    std::printf("  %s batch %lld %s %s: plan %llu B, real %llu B\n", config.model.c_str(),
                static_cast<long long>(n), config.optimizer.c_str(), config.precision.c_str(),
                static_cast<unsigned long long>(plan.peak_in_use_bytes),
                static_cast<unsigned long long>(real.peak_in_use_bytes));
    EXPECT_EQ(plan.peak_in_use_bytes, real.peak_in_use_bytes) << config.model;
    for (std::size_t i = 0; i < kTensorCategoryCount; ++i) {
      EXPECT_EQ(plan.peak_by_category[i], real.by_category[i].peak_in_use_bytes)
          << config.model << ": " << to_string(static_cast<TensorCategory>(i));
    }
  }
}

TEST(GpuCudaPlan, BatchSearchOnCudaLeavesNothingBehind) {
  SLUICE_REQUIRE_GPU();
  Allocator allocator(cuda(0), AllocatorOptions{.mode = AllocatorMode::kGrow, .limit = std::uint64_t{256} << 20});
  Context ctx(allocator);
  const std::uint64_t before = allocator.stats().in_use_bytes;  // cuBLAS's workspace
  const TrainConfig config{.model = "cifar10-separable", .optimizer = "sgd"};
  const BatchSearchResult r = find_max_batch(ctx, config, {.min_batch = 2, .max_batch = 4096});
  std::printf("  grow:256MiB on cuda:0: batch %lld, planner guess %lld, %zu trials\n", static_cast<long long>(r.batch),
              static_cast<long long>(r.planner_guess), r.trials.size());
  EXPECT_GT(r.batch, 2);
  EXPECT_LE(r.trials.size(), 4u);
  EXPECT_EQ(allocator.stats().in_use_bytes, before);
  const AccumulationSearchResult a = find_accumulation(ctx, TrainConfig{.model = "cifar10-separable", .batch = r.batch * 4});
  EXPECT_GT(a.accumulate, 1);
  EXPECT_EQ(allocator.stats().in_use_bytes, before);
}

// The batch is written on another (non-blocking) stream 100 ms after the call: an evaluation that
// did not wait on the ready event would read the zeros there before, and its loss and count of
// correct rows would be the zeros' ones, not the CPU's on the real batch.
TEST(GpuCudaPlan, TrainerWaitsForTheDeviceBatchsReadyEvent) {
  SLUICE_REQUIRE_GPU();
  const TrainConfig config{.model = "fashion-cnn", .batch = 64, .optimizer = "sgd"};
  const ModelInfo& info = model_info(config.model);
  const std::int64_t n = config.batch;
  const std::size_t elements = static_cast<std::size_t>(n * info.channels * info.height * info.width);
  std::vector<float> data(elements);
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < elements; ++i) data[i] = static_cast<float>((i * 2654435761u) % 1000) / 250.0f - 2.0f;
  for (std::int64_t i = 0; i < n; ++i) labels[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 7) % 10);

  Allocator cpu_allocator(host());
  Context cpu(cpu_allocator, ContextOptions{.threads = 2});
  TrainSetup cs = make_training(cpu, config);
  Trainer cpu_trainer(cpu, *cs.model, *cs.optimizer, cs.trainer);
  const BatchResult expected = cpu_trainer.evaluate(TensorView{data.data(), DType::kF32, Shape{n, info.channels,
                                                                                              info.height, info.width}},
                                                    labels, host());

  Allocator allocator(cuda(0));
  Context ctx(allocator);
  TrainSetup gs = make_training(ctx, config);  // the same seed: the same weights
  Trainer trainer(ctx, *gs.model, *gs.optimizer, gs.trainer);
  DeviceBatch batch(info, n, std::vector<float>(elements, 0.0f), std::vector<std::int32_t>(static_cast<std::size_t>(n), 0));
  PinnedBuffer pinned_data(cuda(0), elements * sizeof(float));
  PinnedBuffer pinned_labels(cuda(0), labels.size() * sizeof(std::int32_t));
  std::memcpy(pinned_data.data(), data.data(), elements * sizeof(float));
  std::memcpy(pinned_labels.data(), labels.data(), labels.size() * sizeof(std::int32_t));
  Stream producer(cuda(0));  // non-blocking: no implicit order with the training stream
  Event ready(cuda(0));
  test::spin(producer, 100'000'000);
  copy_to_device_async(batch.x.data(), pinned_data.data(), elements * sizeof(float), producer);
  copy_to_device_async(batch.y.data(), pinned_labels.data(), labels.size() * sizeof(std::int32_t), producer, &ready);
  ASSERT_FALSE(ready.query()) << "the batch arrived before the evaluation was called: the test would prove nothing";
  const BatchResult got = trainer.evaluate(batch.view, batch.labels(n), cuda(0), ready.native_handle());
  std::printf("  evaluation on cuda:0: loss %.6f, %lld correct; on the CPU: loss %.6f, %lld correct\n",
              got.mean_loss(), static_cast<long long>(got.correct), expected.mean_loss(),
              static_cast<long long>(expected.correct));
  EXPECT_NEAR(got.mean_loss(), expected.mean_loss(), 1e-3 * std::max(1.0, expected.mean_loss()));
  EXPECT_EQ(got.correct, expected.correct);
}

}  // namespace
}  // namespace sluice::train
