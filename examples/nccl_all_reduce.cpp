// NcclAllReduce (nccl_all_reduce.hpp): NCCL collectives on the training context's CUDA stream.
#include "nccl_all_reduce.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "sluice/core/device_id.hpp"
#include "sluice/core/error.hpp"

namespace sluice_examples {
namespace {

void check(ncclResult_t status, const char* what) {
  if (status != ncclSuccess) {
    throw sluice::Error(sluice::ErrorCode::kInternal, std::string(what) + ": " + ncclGetErrorString(status));
  }
}

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw sluice::Error(sluice::ErrorCode::kInternal, std::string(what) + ": " + cudaGetErrorString(status));
  }
}

// Makes `device` current for a scope and gives the caller its own current device back after:
// NCCL's setup and teardown act on the current device, and the caller's thread (a training loop
// that also drives another GPU, a framework's worker) chose its current device for itself.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    check(cudaGetDevice(&previous_), "NcclAllReduce: cudaGetDevice");
    if (previous_ != device) check(cudaSetDevice(device), "NcclAllReduce: cudaSetDevice");
  }
  ~DeviceScope() { (void)cudaSetDevice(previous_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace

struct NcclAllReduce::State {
  ncclComm_t comm = nullptr;
  int device = 0;
  int rank = 0;
  int world = 1;
  // (total,) f32 on the device, the tensors end to end in the order given:
  //   flat = [ t0 (t0.elements()) | t1 | ... | tk ]   (gradient_all_reduce.hpp)
  // Category gradients: it holds one more copy of them. Kept and grown, not allocated per step.
  st::Tensor flat;

  // flat_ (grown when short) = the tensors, device to device on `stream`; returns the count.
  std::size_t pack(st::Context& ctx, const std::vector<st::Tensor*>& tensors, cudaStream_t stream) {
    const std::size_t total = flat_elements(tensors);
    if (!flat.defined() || static_cast<std::size_t>(flat.elements()) < total) {
      flat.reset();
      flat = ctx.empty(sluice::Shape{static_cast<std::int64_t>(total)}, sluice::DType::kF32,
                       sluice::TensorCategory::kGradients);
    }
    auto* base = static_cast<unsigned char*>(flat.data());
    std::size_t at = 0;
    for (const st::Tensor* t : tensors) {
      check(cudaMemcpyAsync(base + at, t->data(), t->bytes(), cudaMemcpyDeviceToDevice, stream),
            "NcclAllReduce: cudaMemcpyAsync into the flat buffer");
      at += t->bytes();
    }
    return total;
  }

  void unpack(const std::vector<st::Tensor*>& tensors, cudaStream_t stream) {
    const auto* base = static_cast<const unsigned char*>(flat.data());
    std::size_t at = 0;
    for (st::Tensor* t : tensors) {
      check(cudaMemcpyAsync(t->data(), base + at, t->bytes(), cudaMemcpyDeviceToDevice, stream),
            "NcclAllReduce: cudaMemcpyAsync out of the flat buffer");
      at += t->bytes();
    }
  }
};

namespace {

cudaStream_t stream_of(st::Context& ctx, int device) {
  if (!ctx.device().is_cuda() || ctx.device().index != device) {
    throw sluice::Error(sluice::ErrorCode::kInvalidArgument,
                        "NcclAllReduce: the context is on " + sluice::to_string(ctx.device()) +
                            ", the communicator on cuda:" + std::to_string(device));
  }
  return static_cast<cudaStream_t>(ctx.native_stream());
}

}  // namespace

NcclAllReduce::NcclAllReduce(st::Context& ctx, MPI_Comm comm) : state_(std::make_unique<State>()) {
  if (!ctx.device().is_cuda()) {
    throw sluice::Error(sluice::ErrorCode::kInvalidArgument,
                        "NcclAllReduce needs a CUDA context, not " + sluice::to_string(ctx.device()));
  }
  State& s = *state_;
  s.device = ctx.device().index;
  MPI_Comm_rank(comm, &s.rank);
  MPI_Comm_size(comm, &s.world);
  ncclUniqueId id{};
  if (s.rank == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  MPI_Bcast(&id, static_cast<int>(sizeof id), MPI_BYTE, 0, comm);
  const DeviceScope on(s.device);  // ncclCommInitRank takes the current device
  check(ncclCommInitRank(&s.comm, s.world, id, s.rank), "ncclCommInitRank");
}

NcclAllReduce::~NcclAllReduce() {
  if (state_ && state_->comm != nullptr) {
    try {
      const DeviceScope on(state_->device);
      ncclCommDestroy(state_->comm);  // finalizes first: waits for the collectives still queued
    } catch (const sluice::Error&) {  // no device to switch to: nothing left to tear down on it
    }
  }
}

void NcclAllReduce::sum_scaled(st::Context& ctx, const std::vector<st::Tensor*>& tensors, float scale) {
  State& s = *state_;
  cudaStream_t stream = stream_of(ctx, s.device);
  const DeviceScope on(s.device);  // the copies and the collective are queued on s.device's stream
  const std::size_t count = s.pack(ctx, tensors, stream);
  // Each rank's input times its own `scale`, then summed (NCCL >= 2.11); the scalar is read
  // before the call returns.
  ncclRedOp_t op;
  check(ncclRedOpCreatePreMulSum(&op, &scale, ncclFloat32, ncclScalarHostImmediate, s.comm),
        "ncclRedOpCreatePreMulSum");
  const ncclResult_t status = ncclAllReduce(s.flat.data(), s.flat.data(), count, ncclFloat32, op, s.comm, stream);
  ncclRedOpDestroy(op, s.comm);  // allowed once the collective using it has been enqueued
  check(status, "ncclAllReduce");
  s.unpack(tensors, stream);
}

void NcclAllReduce::broadcast(st::Context& ctx, const std::vector<st::Tensor*>& tensors, int root) {
  State& s = *state_;
  cudaStream_t stream = stream_of(ctx, s.device);
  const DeviceScope on(s.device);
  const std::size_t count = s.pack(ctx, tensors, stream);
  check(ncclBroadcast(s.flat.data(), s.flat.data(), count, ncclFloat32, root, s.comm, stream), "ncclBroadcast");
  s.unpack(tensors, stream);
}

std::string NcclAllReduce::describe() const {
  int version = 0;
  ncclGetVersion(&version);
  const int major = version / 10000, minor = version / 100 % 100, patch = version % 100;
  return "NCCL " + std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch) + " on cuda:" +
         std::to_string(state_->device);
}

}  // namespace sluice_examples
