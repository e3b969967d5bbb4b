// A batch of 0 on the CPU reference backend, every batched op in f32, f16 and bf16, at 1 and 2
// threads: the rule the CUDA backend is held to on a device (tests/gpu/empty_work_gpu_test.cpp).
#include <gtest/gtest.h>

#include "empty_batch_checks.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/context.hpp"

namespace sluice::train {
namespace {

TEST(EmptyBatch, EveryBatchedOpOnTheCpuSumsNothingAndFailsNothing) {
  for (const int threads : {1, 2}) {
    Allocator allocator(host());
    Context ctx(allocator, ContextOptions{.threads = threads});
    for (const DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
      SCOPED_TRACE(std::string("threads ") + std::to_string(threads) + ", " + std::string(to_string(t)));
      test::expect_empty_batch_ops_are_no_ops(ctx, t);
    }
  }
}

}  // namespace
}  // namespace sluice::train
