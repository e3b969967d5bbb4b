// Data-parallel training over MPI for sluice's training core, as torch's DistributedDataParallel
// does it: every rank holds the whole model, takes its own slice of the data (sluice's
// shard_from_launcher()), computes gradients on its local batch, and the ranks sum them with one
// all-reduce of a flat buffer of every gradient before each runs the same optimizer step, so the
// weights stay identical everywhere. Used by examples/mpi_data_parallel.cpp and tests/mpi/.
//
// The gradients are averaged weighted by each rank's batch size (a rank's sum of per-sample
// gradients over the union's sample count), so a step equals one single-process step on the
// union of the ranks' batches exactly in arithmetic, and to float rounding in practice, for any
// model whose layers treat samples independently. BatchNorm's batch statistics are per rank
// (like DDP without SyncBatchNorm), so a model with BatchNorm trains on slightly different
// statistics than one big batch; its running averages are averaged across the ranks after each
// step so the saved models agree.
//
// The all-reduce is a GradientAllReduce (gradient_all_reduce.hpp): by default MPI_Allreduce on
// host copies (correct on any context), or NcclAllReduce (nccl_all_reduce.hpp) on a CUDA
// context, which keeps the gradients on the device and queues the all-reduce on the context's
// stream between backward and the optimizer step. The loss and the sample counts go through a
// small MPI_Allreduce on the host first: the gradients' scale needs the union's size.
//
// The loop over epochs is the library's EpochRunner (sluice/train/epoch_runner.hpp):
// DataParallelStep is the step it runs, EvenEpochs the source that keeps the ranks in step.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gradient_all_reduce.hpp"
#include "sluice/core/error.hpp"
#include "sluice/train/context.hpp"
#include "sluice/train/epoch_runner.hpp"
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
  // `model`, `optimizer` and `reduce` must outlive this object; `comm` is the ranks that train
  // together. `reduce` nullptr: MPI_Allreduce on host copies (MpiHostAllReduce over `comm`).
  DataParallel(st::Context& ctx, st::Sequential& model, st::Optimizer& optimizer, MPI_Comm comm,
               GradientAllReduce* reduce = nullptr)
      : ctx_(ctx), model_(model), optimizer_(optimizer), comm_(comm), host_reduce_(comm),
        reduce_(reduce != nullptr ? *reduce : host_reduce_), params_(model.parameters()),
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
    reduce_.broadcast(ctx_, tensors, root);
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

    // The local loss sum, correct count and batch size, summed on the host (the loss is already
    // there); then every gradient (a mean over the local batch) times n / union size, summed:
    // the union batch's mean gradient, in one all-reduce of all the gradients.
    double totals[3] = {local.loss * static_cast<double>(n), static_cast<double>(local.correct),
                        static_cast<double>(n)};
    MPI_Allreduce(MPI_IN_PLACE, totals, 3, MPI_DOUBLE, MPI_SUM, comm_);
    GlobalStep global;
    global.images = static_cast<std::int64_t>(totals[2]);
    if (global.images == 0) throw sluice::Error(sluice::ErrorCode::kInvalidArgument, "DataParallel: no rank had a sample");
    global.loss = totals[0] / static_cast<double>(global.images);
    global.correct = static_cast<std::int64_t>(totals[1]);
    std::vector<st::Tensor*> grads;
    for (const st::Parameter& p : params_) grads.push_back(p.grad);
    reduce_.sum_scaled(ctx_, grads, static_cast<float>(static_cast<double>(n) / static_cast<double>(global.images)));

    optimizer_.step(ctx_, params_);
    if (!buffers_.empty()) average_buffers();
    ++steps_;
    return global;
  }

  // BatchNorm's running mean and variance, averaged over the ranks.
  void average_buffers() {
    std::vector<st::Tensor*> tensors;
    for (const st::Buffer& b : buffers_) tensors.push_back(b.value);
    reduce_.sum_scaled(ctx_, tensors, 1.0f / static_cast<float>(world_));
  }

  const std::vector<st::Parameter>& parameters() const { return params_; }
  const GradientAllReduce& all_reduce() const { return reduce_; }
  std::uint64_t steps() const { return steps_; }
  int rank() const { return rank_; }
  int world() const { return world_; }

 private:
  st::Context& ctx_;
  st::Sequential& model_;
  st::Optimizer& optimizer_;
  MPI_Comm comm_;
  MpiHostAllReduce host_reduce_;  // the default
  GradientAllReduce& reduce_;
  std::vector<st::Parameter> params_;
  std::vector<st::Buffer> buffers_;
  int rank_ = 0;
  int world_ = 1;
  std::uint64_t steps_ = 0;
};

// DataParallel as the epoch runner's TrainingStep: a host batch is copied into reused device
// tensors for a CUDA context (a batch already on the context's device is used in place), then
// one data-parallel step, whose result is the union batch's (the same on every rank).
// evaluate() scores this rank's batch alone, with no communication.
class DataParallelStep final : public st::TrainingStep {
 public:
  // The context, the model (the one `dp` trains) and `dp` must outlive the step.
  DataParallelStep(st::Context& ctx, st::Sequential& model, DataParallel& dp) : ctx_(ctx), model_(model), dp_(dp) {}

  st::BatchResult train(const st::TrainBatch& batch) override {
    const Input in = input(batch);
    const GlobalStep g = dp_.step(in.x, in.labels);
    return {.loss_sum = g.loss * static_cast<double>(g.images), .correct = g.correct, .images = g.images};
  }

  st::BatchResult evaluate(const st::TrainBatch& batch) override {
    const Input in = input(batch);
    const st::Tensor logits = model_.forward(ctx_, in.x, st::ForwardMode{.training = false});
    const st::LossResult loss = st::ops::softmax_cross_entropy(ctx_, logits, in.labels, nullptr);
    const std::int64_t n = in.x.dim(0);
    return {.loss_sum = loss.loss * static_cast<double>(n), .correct = loss.correct, .images = n};
  }

 private:
  struct Input {
    st::Tensor x;       // (n, C, H, W) f32 on the context's device
    st::Tensor labels;  // (n) i32
  };

  Input input(const st::TrainBatch& batch) {
    const std::int64_t n = static_cast<std::int64_t>(batch.labels.size());
    auto* labels = const_cast<std::int32_t*>(batch.labels.data());  // read only: the ops take labels as const
    if (batch.where == ctx_.device()) {
      return {st::Tensor::wrap(batch.data, batch.where),
              st::Tensor::wrap(labels, sluice::Shape{n}, sluice::DType::kI32, batch.where)};
    }
    if (!batch.where.is_host()) {
      throw sluice::Error(sluice::ErrorCode::kInvalidArgument, "DataParallelStep: the batch is on " +
                                                                   sluice::to_string(batch.where) + ", the model on " +
                                                                   sluice::to_string(ctx_.device()));
    }
    if (!staged_x_.defined() || staged_x_.shape() != batch.data.shape) {
      staged_x_ = ctx_.empty(batch.data.shape, sluice::DType::kF32, sluice::TensorCategory::kActivations);
      staged_labels_ = ctx_.empty(sluice::Shape{n}, sluice::DType::kI32, sluice::TensorCategory::kActivations);
    }
    st::ops::copy_from_host(ctx_, batch.data.data, staged_x_);
    st::ops::copy_from_host(ctx_, labels, staged_labels_);
    return {staged_x_, staged_labels_};
  }

  st::Context& ctx_;
  st::Sequential& model_;
  DataParallel& dp_;
  st::Tensor staged_x_, staged_labels_;  // a device context's copy of each host batch, reused
};

// A rank's source with every epoch cut to the fewest batches any rank has in it: a rank that
// stepped on while another had run out would wait in the all-reduce for ever. start_epoch() is
// a collective: every rank of `comm` calls it for the same epoch.
class EvenEpochs final : public st::BatchSource {
 public:
  // `source` must outlive this object.
  EvenEpochs(st::BatchSource& source, MPI_Comm comm) : source_(source), comm_(comm) {}

  // This rank's own count; the epoch's, agreed at start_epoch(), can be lower.
  std::int64_t batches_per_epoch() const override { return source_.batches_per_epoch(); }

  void start_epoch(std::int64_t epoch) override {
    long long fewest = source_.batches_per_epoch();
    MPI_Allreduce(MPI_IN_PLACE, &fewest, 1, MPI_LONG_LONG, MPI_MIN, comm_);
    left_ = fewest;
    source_.start_epoch(epoch);
  }

  const st::TrainBatch* next() override {
    if (left_ == 0) return nullptr;
    --left_;
    return source_.next();
  }

  void end_epoch() override { source_.end_epoch(); }
  st::InputStats input_stats() const override { return source_.input_stats(); }

 private:
  st::BatchSource& source_;
  MPI_Comm comm_;
  std::int64_t left_ = 0;
};

}  // namespace sluice_examples
