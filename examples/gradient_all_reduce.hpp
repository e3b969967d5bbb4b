// GradientAllReduce: how DataParallel (mpi_data_parallel.hpp) combines tensors across the ranks.
// Two implementations: MpiHostAllReduce below, MPI_Allreduce on host copies (any device; what a
// CPU run uses), and NcclAllReduce (nccl_all_reduce.hpp), ncclAllReduce on device memory on the
// training context's CUDA stream (what a GPU run uses when the example is built with NCCL).
//
// Both gather the tensors into one flat f32 buffer, so a step costs one collective whatever the
// number of parameters:
//   flat (total,) f32 = [ t0 (t0.elements()) | t1 | ... | tk ], total = sum of the elements,
// in the order of `tensors` (the model's parameter order, the same on every rank).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/train/context.hpp"
#include "sluice/train/ops.hpp"
#include "sluice/train/tensor.hpp"

namespace sluice_examples {

namespace st = sluice::train;

class GradientAllReduce {
 public:
  virtual ~GradientAllReduce() = default;

  // Each tensor (f32, on ctx's device) becomes the sum over the ranks of `scale` times that
  // rank's tensor. `scale` may differ between ranks: a rank's share of the union batch for the
  // gradients, 1 / world for an average. Every rank calls it with the same tensor shapes.
  virtual void sum_scaled(st::Context& ctx, const std::vector<st::Tensor*>& tensors, float scale) = 0;
  // Each tensor becomes rank `root`'s.
  virtual void broadcast(st::Context& ctx, const std::vector<st::Tensor*>& tensors, int root) = 0;
  // "MPI_Allreduce on host copies", "NCCL 2.28.9 on cuda:0".
  virtual std::string describe() const = 0;
};

// The f32 elements of `tensors`, and a check that they are f32.
inline std::size_t flat_elements(const std::vector<st::Tensor*>& tensors) {
  std::size_t total = 0;
  for (const st::Tensor* t : tensors) {
    if (t->dtype() != sluice::DType::kF32) {
      throw sluice::Error(sluice::ErrorCode::kInvalidArgument, "GradientAllReduce: " + t->describe() + " is not f32");
    }
    total += static_cast<std::size_t>(t->elements());
  }
  return total;
}

// MPI_Allreduce / MPI_Bcast on a host copy of the tensors (ops::copy_to_host, so it works for a
// CUDA context too, with a device-host round trip per step).
class MpiHostAllReduce final : public GradientAllReduce {
 public:
  explicit MpiHostAllReduce(MPI_Comm comm) : comm_(comm) {}

  void sum_scaled(st::Context& ctx, const std::vector<st::Tensor*>& tensors, float scale) override {
    pack(ctx, tensors);
    if (scale != 1.0f) {
      for (float& v : flat_) v *= scale;
    }
    MPI_Allreduce(MPI_IN_PLACE, flat_.data(), count(), MPI_FLOAT, MPI_SUM, comm_);
    unpack(ctx, tensors);
  }

  void broadcast(st::Context& ctx, const std::vector<st::Tensor*>& tensors, int root) override {
    pack(ctx, tensors);
    MPI_Bcast(flat_.data(), count(), MPI_FLOAT, root, comm_);
    unpack(ctx, tensors);
  }

  std::string describe() const override { return "MPI_Allreduce on host copies"; }

 private:
  int count() const {
    if (flat_.size() > static_cast<std::size_t>(INT32_MAX)) {
      throw sluice::Error(sluice::ErrorCode::kInvalidArgument, "MpiHostAllReduce: more than 2^31 - 1 floats");
    }
    return static_cast<int>(flat_.size());
  }
  void pack(st::Context& ctx, const std::vector<st::Tensor*>& tensors) {
    flat_.resize(flat_elements(tensors));
    std::size_t at = 0;
    for (const st::Tensor* t : tensors) {
      st::ops::copy_to_host(ctx, *t, flat_.data() + at);
      at += static_cast<std::size_t>(t->elements());
    }
  }
  void unpack(st::Context& ctx, const std::vector<st::Tensor*>& tensors) {
    std::size_t at = 0;
    for (st::Tensor* t : tensors) {
      st::ops::copy_from_host(ctx, flat_.data() + at, *t);
      at += static_cast<std::size_t>(t->elements());
    }
  }

  MPI_Comm comm_;
  std::vector<float> flat_;  // (total,) f32, see the top of this file
};

}  // namespace sluice_examples
