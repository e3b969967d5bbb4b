// Data-parallel training over MPI for sluice's training core, as torch's DistributedDataParallel
// does it: every rank holds the whole model, takes its own slice of the data (sluice's
// shard_from_launcher()), computes gradients on its local batch, and the ranks sum them with one
// MPI_Allreduce before each runs the same optimizer step, so the weights stay identical
// everywhere. Used by examples/mpi_data_parallel.cpp and tests/mpi/mpi_train_test.cpp.
//
// The gradients are averaged weighted by each rank's batch size (a rank's sum of per-sample
// gradients over the union's sample count), so a step equals one single-process step on the
// union of the ranks' batches exactly in arithmetic, and to float rounding in practice, for any
// model whose layers treat samples independently. BatchNorm's batch statistics are per rank
// (like DDP without SyncBatchNorm), so a model with BatchNorm trains on slightly different
// statistics than one big batch; its running averages are averaged across the ranks after each
// step so the saved models agree.
//
// Host (CPU) contexts only: MPI_Allreduce here works on host copies (ops::copy_to_host), which
// is correct on a CUDA context too, but NCCL on device memory is what a GPU run wants.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/train/context.hpp"
#include "sluice/train/layer.hpp"
#include "sluice/train/ops.hpp"
#include "sluice/train/optimizer.hpp"
#include "sluice/train/sequential.hpp"

namespace sluice_examples {

namespace st = sluice::train;

// Totals over every rank of one data-parallel step.
struct GlobalStep {
  double loss = 0.0;          // mean over the union batch
  std::int64_t correct = 0;   // over the union batch
  std::int64_t images = 0;    // the union batch's size
};

class DataParallel {
 public:
  // `model` and `optimizer` must outlive this object; `comm` is the ranks that train together.
  DataParallel(st::Context& ctx, st::Sequential& model, st::Optimizer& optimizer, MPI_Comm comm)
      : ctx_(ctx), model_(model), optimizer_(optimizer), comm_(comm), params_(model.parameters()),
        buffers_(model.buffers()) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &world_);
  }

  // Copies rank `root`'s parameters and buffers to every rank (what DDP does at construction):
  // the ranks start from the same weights even if they were initialised differently.
  void broadcast_weights(int root = 0) {
    std::vector<st::Tensor*> tensors;
    for (const st::Parameter& p : params_) tensors.push_back(p.value);
    for (const st::Buffer& b : buffers_) tensors.push_back(b.value);
    pack(tensors, 1.0f);
    MPI_Bcast(flat_.data(), static_cast<int>(flat_.size()), MPI_FLOAT, root, comm_);
    unpack(tensors, 1.0f);
  }

  // One step on this rank's batch: x (n, C, H, W) f32 and labels (n) i32 on the context's
  // device, n may differ between ranks (and may be 0 on some, not on all).
  GlobalStep step(const st::Tensor& x, const st::Tensor& labels) {
    const std::int64_t n = x.defined() ? x.dim(0) : 0;
    // Dropout masks are keyed on the step: a different key per rank, or every rank would drop
    // the same positions of its (different) samples.
    const st::ForwardMode mode{.training = true, .step = steps_ * static_cast<std::uint64_t>(world_) +
                                                             static_cast<std::uint64_t>(rank_)};
    st::LossResult local;
    if (n > 0) {
      try {
        st::Tensor logits = model_.forward(ctx_, x, mode);
        st::Tensor dlogits = ctx_.empty(logits.shape(), logits.dtype(), sluice::TensorCategory::kActivations);
        local = st::ops::softmax_cross_entropy(ctx_, logits, labels, &dlogits);
        logits.reset();
        model_.backward(ctx_, std::move(dlogits));
      } catch (...) {
        model_.release_saved();
        throw;
      }
    } else {
      for (const st::Parameter& p : params_) st::ops::fill(ctx_, *p.grad, 0.0f);
    }

    // One all-reduce: every gradient times the local batch size (the loss is a mean over it),
    // then the local loss sum, correct count and batch size; the sums divide by the union's size.
    std::vector<st::Tensor*> grads;
    for (const st::Parameter& p : params_) grads.push_back(p.grad);
    pack(grads, static_cast<float>(n), 3);
    const std::size_t tail = flat_.size() - 3;
    flat_[tail] = static_cast<float>(local.loss * static_cast<double>(n));
    flat_[tail + 1] = static_cast<float>(local.correct);
    flat_[tail + 2] = static_cast<float>(n);
    MPI_Allreduce(MPI_IN_PLACE, flat_.data(), static_cast<int>(flat_.size()), MPI_FLOAT, MPI_SUM, comm_);
    GlobalStep global;
    global.images = static_cast<std::int64_t>(flat_[tail + 2]);
    if (global.images == 0) throw sluice::Error(sluice::ErrorCode::kInvalidArgument, "DataParallel: no rank had a sample");
    global.loss = flat_[tail] / static_cast<double>(global.images);
    global.correct = static_cast<std::int64_t>(flat_[tail + 1]);
    unpack(grads, 1.0f / static_cast<float>(global.images));

    optimizer_.step(ctx_, params_);
    if (!buffers_.empty()) average_buffers();
    ++steps_;
    return global;
  }

  // BatchNorm's running mean and variance, averaged over the ranks.
  void average_buffers() {
    std::vector<st::Tensor*> tensors;
    for (const st::Buffer& b : buffers_) tensors.push_back(b.value);
    pack(tensors, 1.0f);
    MPI_Allreduce(MPI_IN_PLACE, flat_.data(), static_cast<int>(flat_.size()), MPI_FLOAT, MPI_SUM, comm_);
    unpack(tensors, 1.0f / static_cast<float>(world_));
  }

  const std::vector<st::Parameter>& parameters() const { return params_; }
  std::uint64_t steps() const { return steps_; }
  int rank() const { return rank_; }
  int world() const { return world_; }

 private:
  // flat_ = the tensors' elements (f32) times `scale`, then `extra` free floats.
  void pack(const std::vector<st::Tensor*>& tensors, float scale, std::size_t extra = 0) {
    std::size_t total = extra;
    for (const st::Tensor* t : tensors) total += static_cast<std::size_t>(t->elements());
    flat_.resize(total);
    std::size_t at = 0;
    for (const st::Tensor* t : tensors) {
      if (t->dtype() != sluice::DType::kF32) {
        throw sluice::Error(sluice::ErrorCode::kInvalidArgument, "DataParallel: " + t->describe() + " is not f32");
      }
      st::ops::copy_to_host(ctx_, *t, flat_.data() + at);
      at += static_cast<std::size_t>(t->elements());
    }
    if (scale != 1.0f) {
      for (std::size_t i = 0; i < at; ++i) flat_[i] *= scale;
    }
  }

  // The tensors = flat_'s leading elements times `scale`.
  void unpack(const std::vector<st::Tensor*>& tensors, float scale) {
    std::size_t at = 0;
    for (st::Tensor* t : tensors) {
      const auto count = static_cast<std::size_t>(t->elements());
      if (scale != 1.0f) {
        for (std::size_t i = at; i < at + count; ++i) flat_[i] *= scale;
      }
      st::ops::copy_from_host(ctx_, flat_.data() + at, *t);
      at += count;
    }
  }

  st::Context& ctx_;
  st::Sequential& model_;
  st::Optimizer& optimizer_;
  MPI_Comm comm_;
  std::vector<st::Parameter> params_;
  std::vector<st::Buffer> buffers_;
  std::vector<float> flat_;  // host staging of what is reduced or broadcast
  int rank_ = 0;
  int world_ = 1;
  std::uint64_t steps_ = 0;
};

}  // namespace sluice_examples
