// Tensor and Context contracts: storage shared by reference and returned to the allocator with
// the last reference, views, reshape and slice, and the context's thread count, zero-filled
// tensors and its grow-only workspace (accounted to TensorCategory::kWorkspace).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>

#include "ops_test_support.hpp"
#include "train/tensor/backend.hpp"

namespace sluice::train {
namespace {

using test::expect_rejects;
using test::OpsEnv;

TEST(Tensor, SharesItsBlockAndReturnsItWithTheLastReference) {
  OpsEnv env;
  Allocator& a = *env.allocator;
  const std::uint64_t live = a.stats().live_allocations;
  Tensor t = env.ctx->empty({4, 8}, DType::kF32, TensorCategory::kWeights);
  EXPECT_EQ(a.stats().live_allocations, live + 1);
  EXPECT_EQ(a.stats().category(TensorCategory::kWeights).in_use_bytes, 256u);  // 128 B rounded to 256
  EXPECT_TRUE(t.owns_storage());
  {
    Tensor copy = t;  // no new block
    Tensor flat = t.reshaped({32});
    EXPECT_EQ(copy.data(), t.data());
    EXPECT_EQ(flat.data(), t.data());
    EXPECT_EQ(t.use_count(), 3);
    EXPECT_EQ(a.stats().live_allocations, live + 1);
  }
  EXPECT_EQ(t.use_count(), 1);
  t.reset();
  EXPECT_FALSE(t.defined());
  EXPECT_EQ(a.stats().live_allocations, live);
  a.check_invariants();
}

TEST(Tensor, ReshapeSliceAndViewsCheckTheirArguments) {
  OpsEnv env;
  Tensor t = test::make(*env.ctx, {3, 2}, {0, 1, 2, 3, 4, 5});
  expect_rejects([&] { (void)t.reshaped({4, 2}); }, "Tensor::reshaped: (3, 2) has 6 elements, (4, 2) has 8");
  Tensor rows = t.slice(1, 3);
  EXPECT_EQ(rows.shape(), (Shape{2, 2}));
  EXPECT_EQ(rows.data_as<float>()[0], 2.0f);  // item 1 starts at element 2
  EXPECT_EQ(rows.use_count(), 2);             // shares the block
  expect_rejects([&] { (void)t.slice(2, 4); }, "Tensor::slice: [2, 4) of (3, 2)");
  expect_rejects([&] { (void)t.slice(2, 1); }, "Tensor::slice");

  float data[6] = {};
  Tensor view = Tensor::wrap(data, {2, 3}, DType::kF32);
  EXPECT_FALSE(view.owns_storage());
  EXPECT_EQ(view.use_count(), 0);
  EXPECT_EQ(view.host_view().data, data);
  expect_rejects([] { (void)Tensor::wrap(nullptr, {2}, DType::kF32); }, "Tensor::wrap: null data");
  expect_rejects([&] { (void)Tensor::wrap(data, {2, -1}, DType::kF32); }, "negative dimension");
  Tensor on_gpu = Tensor::wrap(data, {6}, DType::kF32, cuda(0), TensorCategory::kInputPinned);
  expect_rejects([&] { (void)on_gpu.host_view(); }, "is not in host memory");
  EXPECT_EQ(on_gpu.describe(), "f32 (6) on cuda:0, input (pinned)");
}

TEST(Context, ThreadsDefaultToTheHardwareAndNegativeOnesAreRejected) {
  OpsEnv env;
  Context all(*env.allocator, {.threads = 0});
  EXPECT_EQ(all.threads(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  Context three(*env.allocator, {.threads = 3});
  EXPECT_EQ(three.threads(), 3);
  EXPECT_NE(three.backend().describe().find("cpu (3 threads, OpenBLAS)"), std::string::npos)
      << three.backend().describe();
  expect_rejects([&] { Context bad(*env.allocator, {.threads = -1}); }, "threads must be >= 0");
}

TEST(Context, HasNoNativeStreamOnTheCpu) {
  // The CPU backend runs every op before returning: nothing to order against (a CUDA context
  // returns its cudaStream_t, which tests/mpi/mpi_nccl_test.cpp queues NCCL on).
  OpsEnv env;
  EXPECT_EQ(env.ctx->native_stream(), nullptr);
}

TEST(Context, ZerosAreZeroInEveryDtype) {
  OpsEnv env;
  for (const DType dt : {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kU8}) {
    Tensor t = env.ctx->empty({1000}, dt, TensorCategory::kActivations);
    std::memset(t.data(), 0xA5, t.bytes());
    Tensor z = env.ctx->zeros({1000}, dt, TensorCategory::kActivations);
    for (std::int64_t i = 0; i < z.elements(); ++i) ASSERT_EQ(test::get(z, i), 0.0f) << to_string(dt) << " " << i;
  }
}

TEST(Context, WorkspaceGrowsToTheLargestRequestIsReusedAndReleased) {
  OpsEnv env;
  Context& ctx = *env.ctx;
  Allocator& a = *env.allocator;
  EXPECT_EQ(ctx.workspace(0), nullptr);
  EXPECT_EQ(ctx.workspace_bytes(), 0u);
  void* p = ctx.workspace(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 256, 0u);
  EXPECT_EQ(ctx.workspace_bytes(), 1000u);
  EXPECT_EQ(a.stats().category(TensorCategory::kWorkspace).in_use_bytes, 1024u);
  EXPECT_EQ(ctx.workspace(500), p);  // smaller: the same block
  EXPECT_EQ(ctx.workspace_bytes(), 1000u);
  ctx.workspace(5000);  // larger: replaced
  EXPECT_EQ(ctx.workspace_bytes(), 5000u);
  EXPECT_EQ(a.stats().category(TensorCategory::kWorkspace).in_use_bytes, 5120u);
  ctx.reserve_workspace(100);  // never shrinks
  EXPECT_EQ(ctx.workspace_bytes(), 5000u);
  ctx.release_workspace();
  EXPECT_EQ(ctx.workspace_bytes(), 0u);
  EXPECT_EQ(a.stats().category(TensorCategory::kWorkspace).in_use_bytes, 0u);
}

}  // namespace
}  // namespace sluice::train
