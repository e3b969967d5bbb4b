// Under `mpirun -np 2` (ctest label mpi): data-parallel training with gradients averaged by
// MPI_Allreduce (examples/mpi_data_parallel.hpp, the code examples/mpi_data_parallel.cpp runs).
//
// 1. A CNN of the training core's layers without BatchNorm or dropout (whose per-rank batch
//    statistics and masks make a data-parallel step differ from a big-batch one by design): the
//    union batch (13 images per rank plus one, split unevenly) is cut into contiguous per-rank
//    slices; after one and after two data-parallel SGD steps (momentum, Nesterov, weight decay)
//    every rank's weights equal bit for bit those of rank 0, and equal within 1e-5 those of a
//    single-process Trainer::step on the union batch, which every rank computes for itself. As
//    a control, a step on the rank's own slice alone is more than 1e-4 away from it, so the
//    tolerance tells an averaged gradient from a local one.
// 2. fashion-cnn (BatchNorm and dropout), the model the example trains: after two steps the
//    weights and BatchNorm's running statistics are identical on every rank, and they changed.
// 3. The example's epoch loop: the library's EpochRunner over DataParallelStep, with EvenEpochs
//    cutting each epoch to the ranks' fewest batches (rank r has 3 + r): every rank runs the same
//    steps, each reports the union batch, and the weights end identical.
// Exit status 0 only when every check passed on every rank.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "mpi_data_parallel.hpp"
#include "mpi_test_models.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/epoch_runner.hpp"
#include "sluice/train/layers.hpp"
#include "sluice/train/models.hpp"
#include "sluice/train/trainer.hpp"

namespace {

namespace st = sluice::train;
using namespace sluice_mpi_test;

int failures = 0;
int rank = 0;
int world = 1;

void check(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what.c_str());
  }
}

void plain_cnn_matches_the_union_step() {
  sluice::Allocator allocator(sluice::host(), {.name = "mpi_train_test"});
  st::Context ctx(allocator, {.threads = 1});
  const sluice::Shape sample{1, 12, 12};
  const std::int64_t n = 6 * world + 1;  // uneven: rank 0 takes one more
  std::vector<float> x;
  std::vector<std::int32_t> y;
  make_batch(n, sample.elements(), x, y);
  const std::int64_t base = n / world, extra = n % world;
  const std::int64_t begin = rank * base + std::min<std::int64_t>(rank, extra);
  const std::int64_t end = begin + base + (rank < extra ? 1 : 0);

  auto dp_model = plain_cnn(ctx);
  st::Sgd dp_sgd(kSgd);
  sluice_examples::DataParallel dp(ctx, *dp_model, dp_sgd, MPI_COMM_WORLD);
  const std::vector<float> initial = weights(ctx, *dp_model);

  auto union_model = plain_cnn(ctx);  // the same seed: the same initial weights
  st::Sgd union_sgd(kSgd);
  st::Trainer union_trainer(ctx, *union_model, union_sgd);
  check(weights(ctx, *union_model) == initial, "two models from one seed start apart");

  auto local_model = plain_cnn(ctx);
  st::Sgd local_sgd(kSgd);
  st::Trainer local_trainer(ctx, *local_model, local_sgd);

  for (int step = 1; step <= 2; ++step) {
    const sluice::TensorView mine = view(x, begin, end, sample);
    const sluice_examples::GlobalStep g =
        dp.step(st::Tensor::wrap(mine), st::Tensor::wrap(y.data() + begin, sluice::Shape{end - begin}, sluice::DType::kI32));
    const st::BatchResult u = union_trainer.step(view(x, 0, n, sample), std::span<const std::int32_t>(y.data(), y.size()));
    local_trainer.step(mine, std::span<const std::int32_t>(y.data() + begin, static_cast<std::size_t>(end - begin)));

    const std::string s = "step " + std::to_string(step) + ": ";
    const std::vector<float> w = weights(ctx, *dp_model);
    const std::vector<float> reference = weights(ctx, *union_model);
    check(g.images == n, s + "the all-reduce counted " + std::to_string(g.images) + " images, expected " + std::to_string(n));
    check(std::fabs(g.loss - u.mean_loss()) <= 1e-5 * std::max(1.0, std::fabs(u.mean_loss())),
          s + "data-parallel loss " + std::to_string(g.loss) + ", union batch's " + std::to_string(u.mean_loss()));
    check(same_as_rank_zero(w), s + "weights differ from rank 0's");
    const double off = max_difference(w, reference);
    check(off <= 1e-5, s + "weights are " + std::to_string(off) + " from the single-process union step's (limit 1e-5)");
    const double moved = max_difference(w, initial);
    check(moved > 1e-3, s + "the step barely moved the weights (" + std::to_string(moved) + ")");
    const double local_off = max_difference(weights(ctx, *local_model), reference);
    check(local_off > 1e-4, s + "a step on this rank's slice alone is only " + std::to_string(local_off) +
                                " from the union step's: the 1e-5 check could not tell them apart");
    if (rank == 0) {
      std::printf("plain CNN step %d: %lld images, loss %.6f, max |dp - union| %.3g, max |local - union| %.3g\n", step,
                  static_cast<long long>(g.images), g.loss, off, local_off);
    }
  }
}

void fashion_cnn_stays_identical() {
  sluice::Allocator allocator(sluice::host(), {.name = "mpi_train_test"});
  st::Context ctx(allocator, {.threads = 1});
  auto model = st::make_model(ctx, "fashion-cnn", kSeed + static_cast<std::uint64_t>(rank));  // apart on purpose
  st::Sgd sgd(kSgd);
  sluice_examples::DataParallel dp(ctx, *model, sgd, MPI_COMM_WORLD);
  dp.broadcast_weights(0);
  check(same_as_rank_zero(weights(ctx, *model)), "fashion-cnn: broadcast_weights left the ranks apart");
  const std::vector<float> initial = weights(ctx, *model);
  const std::vector<float> initial_buffers = buffers(ctx, *model);

  const sluice::Shape sample{1, 28, 28};
  const std::int64_t n = 4 * world;
  std::vector<float> x;
  std::vector<std::int32_t> y;
  make_batch(n, sample.elements(), x, y);
  const std::int64_t begin = rank * 4, end = begin + 4;
  for (int step = 0; step < 2; ++step) {
    dp.step(st::Tensor::wrap(view(x, begin, end, sample)),
            st::Tensor::wrap(y.data() + begin, sluice::Shape{4}, sluice::DType::kI32));
  }
  const std::vector<float> w = weights(ctx, *model);
  const std::vector<float> b = buffers(ctx, *model);
  check(same_as_rank_zero(w), "fashion-cnn: weights differ from rank 0's after two steps");
  check(same_as_rank_zero(b), "fashion-cnn: BatchNorm running statistics differ from rank 0's after two steps");
  check(!b.empty(), "fashion-cnn has no BatchNorm buffers");
  check(max_difference(w, initial) > 1e-4, "fashion-cnn: the steps did not move the weights");
  check(max_difference(b, initial_buffers) > 1e-4, "fashion-cnn: the running statistics did not move");
}

// Batches of 4 images from make_batch, the same every epoch.
class FixedBatches final : public st::BatchSource {
 public:
  FixedBatches(std::int64_t batches, const sluice::Shape& sample) : batches_(batches), sample_(sample) {
    make_batch(batches * 4, sample.elements(), x_, y_);
  }
  std::int64_t batches_per_epoch() const override { return batches_; }
  void start_epoch(std::int64_t) override { next_ = 0; }
  const st::TrainBatch* next() override {
    if (next_ == batches_) return nullptr;
    const std::int64_t begin = next_++ * 4;
    current_ = {.data = view(x_, begin, begin + 4, sample_),
                .labels = std::span<const std::int32_t>(y_.data() + begin, 4)};
    return &current_;
  }

 private:
  std::int64_t batches_, next_ = 0;
  sluice::Shape sample_;
  std::vector<float> x_;
  std::vector<std::int32_t> y_;
  st::TrainBatch current_;
};

void epoch_runner_keeps_the_ranks_in_step() {
  sluice::Allocator allocator(sluice::host(), {.name = "mpi_train_test"});
  st::Context ctx(allocator, {.threads = 1});
  auto model = plain_cnn(ctx);
  st::Sgd sgd(kSgd);
  sluice_examples::DataParallel dp(ctx, *model, sgd, MPI_COMM_WORLD);
  const sluice::Shape sample{1, 12, 12};
  FixedBatches own(3 + rank, sample), test(2, sample);
  sluice_examples::EvenEpochs batches(own, MPI_COMM_WORLD);
  sluice_examples::DataParallelStep step(ctx, *model, dp);
  st::EpochRunner runner(step, batches, {.epochs = 2, .evaluation = &test});
  const st::RunReport& r = runner.run();
  check(r.steps == 6, "runner: " + std::to_string(r.steps) + " steps, expected 2 epochs of the ranks' fewest, 3");
  check(r.images == 6 * 4 * world, "runner: " + std::to_string(r.images) + " images, expected the union batches'");
  check(same_as_rank_zero(weights(ctx, *model)), "runner: weights differ from rank 0's");
  for (const st::EpochReport& e : r.per_epoch) {
    check(e.evaluation.has_value() && e.evaluation->images == 8, "runner: the evaluation did not see its 8 images");
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  try {
    check(world >= 2, "run under mpirun -np 2 (or more); world size is " + std::to_string(world));
    plain_cnn_matches_the_union_step();
    fashion_cnn_stays_identical();
    epoch_runner_keeps_the_ranks_in_step();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: exception: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);  // the other rank may be waiting in a collective
  }
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("mpi_train_test: %d ranks, %d failed checks\n", world, total);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
