// Empty work on a real GPU: a zero-sized grid is a CUDA launch error, not a no-op, so
// every launch of src/device and src/train/cuda goes through device_detail::launch, which
// launches nothing for it (tests/unit/device/launch_shape_test.cpp checks that on the host). Here:
// every batched op of the CUDA backend on a batch of 0 follows the CPU reference's rule (nothing
// fails; a weight gradient over no image is 0, or unchanged when accumulated into: the conv and
// separable backward used to leave their f32 sums unwritten and round garbage into dw); the loss
// over 0 rows, which used to fail its launch, returns nothing; the normalize kernel over 0 images
// launches nothing. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "empty_batch_checks.hpp"
#include "gpu_test_util.hpp"
#include "sluice/device/gpu_normalize.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/context.hpp"
#include "train/tensor/backend.hpp"

namespace sluice::train {
namespace {

TEST(GpuEmptyWork, EveryBatchedOpOnABatchOfZeroFollowsTheCpuRule) {
  SLUICE_REQUIRE_GPU();
  Allocator allocator(cuda(0));
  Context ctx(allocator);
  for (const DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(to_string(t));
    test::expect_empty_batch_ops_are_no_ops(ctx, t);
  }
}

// ops::softmax_cross_entropy refuses 0 rows; the backend below it must not fail a launch either.
TEST(GpuEmptyWork, TheLossOverZeroRowsLaunchesNothing) {
  SLUICE_REQUIRE_GPU();
  Allocator allocator(cuda(0));
  Context ctx(allocator);
  Tensor logits = ctx.empty({0, 10}, DType::kF32, TensorCategory::kActivations);
  Tensor labels = ctx.empty({0}, DType::kI32, TensorCategory::kActivations);
  Tensor dlogits = ctx.empty({0, 10}, DType::kF32, TensorCategory::kActivations);
  const LossResult r = ctx.backend().softmax_cross_entropy(ctx, logits, labels, &dlogits);
  EXPECT_EQ(r.loss, 0.0);
  EXPECT_EQ(r.correct, 0);
  ctx.synchronize();  // no launch error pending
}

TEST(GpuEmptyWork, NormalizingZeroImagesLaunchesNothing) {
  SLUICE_REQUIRE_GPU();
  GpuNormalizer n;
  n.setup({.mean = {0.5f}, .std = {0.25f}, .layout = Layout::kNCHW, .dtype = DType::kF16}, 3);
  Stream stream(cuda(0));
  n.run(nullptr, nullptr, 0, 32, 32, stream);  // no images
  n.run(nullptr, nullptr, 4, 0, 32, stream);   // empty images
  stream.synchronize();
}

}  // namespace
}  // namespace sluice::train
