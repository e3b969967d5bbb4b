// NcclAllReduce: the GradientAllReduce (gradient_all_reduce.hpp) of a GPU data-parallel run. The
// tensors stay in device memory: they are copied (device to device) into one flat buffer, reduced
// by one ncclAllReduce, and copied back, all queued on the training context's CUDA stream
// (Context::native_stream()) between backward and the optimizer step, with no host wait.
//
// Setup, once per process: rank 0 of `comm` creates an ncclUniqueId, MPI_Bcast hands it to the
// others, and every rank calls ncclCommInitRank on its context's device. One device per rank:
// NCCL refuses two ranks of a communicator on the same GPU.
//
// Built only with SLUICE_WITH_NCCL (examples/CMakeLists.txt, cmake/SluiceNccl.cmake): this header
// names no CUDA or NCCL type, nccl_all_reduce.cpp holds them.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "gradient_all_reduce.hpp"

namespace sluice_examples {

class NcclAllReduce final : public GradientAllReduce {
 public:
  // A communicator over `comm`'s ranks on `ctx`'s device, which must be a CUDA device; every
  // rank of `comm` calls this together. Throws sluice::Error naming the failing call. `ctx` must
  // outlive this object. Every call (this one, the collectives, the destructor) leaves the
  // calling thread's current CUDA device as it found it.
  NcclAllReduce(st::Context& ctx, MPI_Comm comm);
  ~NcclAllReduce() override;
  NcclAllReduce(const NcclAllReduce&) = delete;
  NcclAllReduce& operator=(const NcclAllReduce&) = delete;

  // ncclAllReduce with a pre-multiplying sum (ncclRedOpCreatePreMulSum: each rank's `scale`).
  void sum_scaled(st::Context& ctx, const std::vector<st::Tensor*>& tensors, float scale) override;
  // ncclBroadcast.
  void broadcast(st::Context& ctx, const std::vector<st::Tensor*>& tensors, int root) override;
  std::string describe() const override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace sluice_examples
