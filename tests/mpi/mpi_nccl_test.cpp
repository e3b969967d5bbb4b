// Under `mpirun -np 2` with one GPU per rank (ctest label mpi/gpu): data-parallel training on
// CUDA contexts with the gradients all-reduced by NCCL on the device (examples/nccl_all_reduce.cpp,
// what `example_mpi_data_parallel --device cuda` runs).
//
// 1. The plain CNN of mpi_test_models.hpp, the same weights in three data-parallel copies: on
//    the GPU with NCCL, on the GPU with MPI_Allreduce on host copies (the same GPU arithmetic,
//    only the all-reduce differs), and on the CPU with MPI (mpi_train_test's path). After one
//    and after two SGD steps on uneven per-rank slices of a 13-image batch: the NCCL weights are
//    bit-identical on every rank, within 1e-5 of the MPI ones on the same GPU, and within 1e-4
//    (the f32 tolerance of train_ops_gpu_test: cuBLAS sums in another order) of the CPU ones.
// 2. fashion-cnn (BatchNorm, dropout) from a different seed per rank: ncclBroadcast makes the
//    ranks' weights identical, and after two steps the weights and BatchNorm's running
//    statistics (averaged by NCCL too) are still identical on every rank, and they moved.
// 3. The communicator leaves each rank's current CUDA device as the caller set it.
//
// Skips (exit 77, SKIP_RETURN_CODE) when a rank has no usable CUDA device or its node runs more
// ranks than it has GPUs: NCCL puts one rank of a communicator per GPU (two ranks on one GPU
// fail in ncclCommInitRank), so this needs 2 GPUs. Exit 0 only when every check passed on
// every rank.
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "mpi_data_parallel.hpp"
#include "mpi_test_models.hpp"
#include "nccl_all_reduce.hpp"
#include "sluice/device/device.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/models.hpp"

namespace {

namespace st = sluice::train;
using namespace sluice_mpi_test;

constexpr int kSkip = 77;

int failures = 0;
int rank = 0;
int world = 1;

void check(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what.c_str());
  }
}

// The model's parameters = `w` (a flat host vector in parameter order).
void set_weights(st::Context& ctx, st::Sequential& m, const std::vector<float>& w) {
  std::size_t at = 0;
  for (const st::Parameter& p : m.parameters()) {
    st::ops::copy_from_host(ctx, w.data() + at, *p.value);
    at += static_cast<std::size_t>(p.value->elements());
  }
}

// A host array as a new tensor on ctx's device.
st::Tensor upload(st::Context& ctx, const void* data, const sluice::Shape& shape, sluice::DType dtype) {
  st::Tensor t = ctx.empty(shape, dtype, sluice::TensorCategory::kActivations);
  st::ops::copy_from_host(ctx, data, t);
  return t;
}

void nccl_matches_mpi(int device) {
  sluice::Allocator cpu_allocator(sluice::host(), {.name = "mpi_nccl_test cpu"});
  st::Context cpu(cpu_allocator, {.threads = 1});
  sluice::Allocator gpu_allocator(sluice::cuda(device), {.name = "mpi_nccl_test gpu"});
  st::Context gpu(gpu_allocator);

  const sluice::Shape sample{1, 12, 12};
  const std::int64_t n = 6 * world + 1;  // uneven: rank 0 takes one more
  std::vector<float> x;
  std::vector<std::int32_t> y;
  make_batch(n, sample.elements(), x, y);
  const std::int64_t base = n / world, extra = n % world;
  const std::int64_t begin = rank * base + std::min<std::int64_t>(rank, extra);
  const std::int64_t end = begin + base + (rank < extra ? 1 : 0);
  const sluice::TensorView mine = view(x, begin, end, sample);
  const st::Tensor x_gpu = upload(gpu, mine.data, mine.shape, sluice::DType::kF32);
  const st::Tensor y_gpu = upload(gpu, y.data() + begin, sluice::Shape{end - begin}, sluice::DType::kI32);

  auto cpu_model = plain_cnn(cpu);
  const std::vector<float> initial = weights(cpu, *cpu_model);
  auto nccl_model = plain_cnn(gpu);
  auto mpi_model = plain_cnn(gpu);
  set_weights(gpu, *nccl_model, initial);  // the CPU's initial weights, whatever the GPU's init does
  set_weights(gpu, *mpi_model, initial);

  sluice_examples::NcclAllReduce nccl(gpu, MPI_COMM_WORLD);
  st::Sgd nccl_sgd(kSgd), mpi_sgd(kSgd), cpu_sgd(kSgd);
  sluice_examples::DataParallel on_nccl(gpu, *nccl_model, nccl_sgd, MPI_COMM_WORLD, &nccl);
  sluice_examples::DataParallel on_mpi(gpu, *mpi_model, mpi_sgd, MPI_COMM_WORLD);
  sluice_examples::DataParallel on_cpu(cpu, *cpu_model, cpu_sgd, MPI_COMM_WORLD);
  if (rank == 0) std::printf("cuda:%d, gradients: %s\n", device, on_nccl.all_reduce().describe().c_str());

  for (int step = 1; step <= 2; ++step) {
    const sluice_examples::GlobalStep g = on_nccl.step(x_gpu, y_gpu);
    on_mpi.step(x_gpu, y_gpu);
    on_cpu.step(st::Tensor::wrap(mine), st::Tensor::wrap(y.data() + begin, sluice::Shape{end - begin}, sluice::DType::kI32));

    const std::string s = "step " + std::to_string(step) + ": ";
    const std::vector<float> w = weights(gpu, *nccl_model);
    const double off_mpi = max_difference(w, weights(gpu, *mpi_model));
    const double off_cpu = max_difference(w, weights(cpu, *cpu_model));
    const double moved = max_difference(w, initial);
    check(g.images == n, s + "the all-reduce counted " + std::to_string(g.images) + " images, expected " + std::to_string(n));
    check(same_as_rank_zero(w), s + "NCCL weights differ from rank 0's");
    check(off_mpi <= 1e-5, s + "NCCL weights are " + std::to_string(off_mpi) + " from the MPI path's on the same GPU (limit 1e-5)");
    check(off_cpu <= 1e-4, s + "NCCL weights are " + std::to_string(off_cpu) + " from the CPU MPI path's (limit 1e-4)");
    check(moved > 1e-3, s + "the step barely moved the weights (" + std::to_string(moved) + ")");
    if (rank == 0) {
      std::printf("plain CNN step %d: %lld images, loss %.6f, max |nccl - mpi| %.3g (same GPU), max |nccl - cpu mpi| %.3g\n",
                  step, static_cast<long long>(g.images), g.loss, off_mpi, off_cpu);
    }
  }
}

void fashion_cnn_stays_identical(int device) {
  sluice::Allocator allocator(sluice::cuda(device), {.name = "mpi_nccl_test gpu"});
  st::Context ctx(allocator);
  auto model = st::make_model(ctx, "fashion-cnn", kSeed + static_cast<std::uint64_t>(rank));  // apart on purpose
  sluice_examples::NcclAllReduce nccl(ctx, MPI_COMM_WORLD);
  st::Sgd sgd(kSgd);
  sluice_examples::DataParallel dp(ctx, *model, sgd, MPI_COMM_WORLD, &nccl);
  dp.broadcast_weights(0);
  check(same_as_rank_zero(weights(ctx, *model)), "fashion-cnn: ncclBroadcast left the ranks apart");
  const std::vector<float> initial = weights(ctx, *model);
  const std::vector<float> initial_buffers = buffers(ctx, *model);

  const sluice::Shape sample{1, 28, 28};
  const std::int64_t n = 4 * world;
  std::vector<float> x;
  std::vector<std::int32_t> y;
  make_batch(n, sample.elements(), x, y);
  const std::int64_t begin = rank * 4;
  const st::Tensor x_gpu = upload(ctx, x.data() + begin * sample.elements(), sluice::Shape{4, 1, 28, 28}, sluice::DType::kF32);
  const st::Tensor y_gpu = upload(ctx, y.data() + begin, sluice::Shape{4}, sluice::DType::kI32);
  for (int step = 0; step < 2; ++step) dp.step(x_gpu, y_gpu);
  const std::vector<float> w = weights(ctx, *model);
  const std::vector<float> b = buffers(ctx, *model);
  check(same_as_rank_zero(w), "fashion-cnn: weights differ from rank 0's after two steps");
  check(same_as_rank_zero(b), "fashion-cnn: BatchNorm running statistics differ from rank 0's after two steps");
  check(!b.empty(), "fashion-cnn has no BatchNorm buffers");
  check(max_difference(w, initial) > 1e-4, "fashion-cnn: the steps did not move the weights");
  check(max_difference(b, initial_buffers) > 1e-4, "fashion-cnn: the running statistics did not move");
}

// The communicator's setup, collectives and teardown make its device current for their work and
// give the calling thread its own current device back (the constructor used to leave
// the communicator's device current). Each rank makes another GPU of its node current first.
void nccl_keeps_the_callers_current_device(int device) {
  const int other = (device + 1) % sluice::cuda_device_count();
  int current = -1;
  {
    sluice::Allocator allocator(sluice::cuda(device), {.name = "mpi_nccl_test gpu"});
    st::Context ctx(allocator);
    check(cudaSetDevice(other) == cudaSuccess, "cudaSetDevice");
    sluice_examples::NcclAllReduce nccl(ctx, MPI_COMM_WORLD);
    check(cudaGetDevice(&current) == cudaSuccess && current == other,
          "NcclAllReduce's constructor left cuda:" + std::to_string(current) +
              " current, not the caller's cuda:" + std::to_string(other));
    st::Tensor g = ctx.zeros(sluice::Shape{16}, sluice::DType::kF32, sluice::TensorCategory::kGradients);
    std::vector<st::Tensor*> tensors{&g};
    nccl.sum_scaled(ctx, tensors, 0.5f);
    ctx.synchronize();
    check(cudaGetDevice(&current) == cudaSuccess && current == other, "sum_scaled changed the current device");
  }
  check(cudaGetDevice(&current) == cudaSuccess && current == other, "the destructor changed the current device");
  check(cudaSetDevice(device) == cudaSuccess, "cudaSetDevice back");
}

// Why this rank cannot run the test ("" when it can): one GPU per rank on its node.
std::string skip_reason(int node_size) {
  const int devices = sluice::cuda_device_count();
  if (devices == 0) return "no CUDA device: " + sluice::cuda_unavailable_reason();
  if (devices < node_size) {
    return std::to_string(node_size) + " ranks on this node need one GPU each (NCCL: one rank per GPU), it has " +
           std::to_string(devices);
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int node_rank = 0, node_size = 1;
  MPI_Comm_rank(node, &node_rank);
  MPI_Comm_size(node, &node_size);
  MPI_Comm_free(&node);

  const std::string why = skip_reason(node_size);
  int skip = why.empty() ? 0 : 1, any_skip = 0;
  MPI_Allreduce(&skip, &any_skip, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any_skip != 0) {
    if (skip != 0) std::printf("mpi_nccl_test: SKIPPED on rank %d: %s\n", rank, why.c_str());
    MPI_Finalize();
    return kSkip;
  }
  try {
    check(world >= 2, "run under mpirun -np 2 (or more); world size is " + std::to_string(world));
    nccl_matches_mpi(node_rank);  // cuda:<local rank>, as the example's --device cuda
    fashion_cnn_stays_identical(node_rank);
    nccl_keeps_the_callers_current_device(node_rank);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: exception: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);  // the other rank may be waiting in a collective
  }
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("mpi_nccl_test: %d ranks, %d failed checks\n", world, total);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
