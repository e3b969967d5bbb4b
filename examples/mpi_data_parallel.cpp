// Data-parallel training of the training core's CNN over MPI: each rank reads its own shard of
// every epoch (shard_from_launcher(): the rank mpirun or srun gave it), computes gradients on its
// batch, and the ranks average them with MPI_Allreduce before the same SGD step
// (mpi_data_parallel.hpp), so every rank holds the same weights throughout. docs/distributed.md
// shows how to launch it on one machine, across machines with a hostfile, and under Slurm.
//
//   mpirun -np 2 build/examples/example_mpi_data_parallel --data data/fashion-mnist/train
//   (as root add --allow-run-as-root; with more ranks than cores, --oversubscribe)
//
// --batch is per rank: the step's batch is the union, world x batch images. --device cpu (the
// default) trains on the CPU with MPI_Allreduce on the host; --device cuda trains rank r on
// cuda:<its local rank> (cuda:N: every rank on GPU N) and, when built with NCCL
// (SLUICE_WITH_NCCL), all-reduces the gradients with NCCL on the device (--all-reduce mpi keeps
// MPI_Allreduce on host copies).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <sluice/loader_batches.hpp>
#include <sluice/pipeline/launcher.hpp>
#include <sluice/sluice.hpp>
#include <sluice/train/allocator.hpp>
#include <sluice/train/context.hpp>
#include <sluice/train/epoch_runner.hpp>
#include <sluice/train/models.hpp>
#include <sluice/train/optimizer.hpp>

#include "local_rank.hpp"
#include "mpi_data_parallel.hpp"
#if SLUICE_EXAMPLE_NCCL
#include "nccl_all_reduce.hpp"
#endif

namespace {

struct Options {
  std::string data = "data/fashion-mnist/train";
  std::string model = "fashion-cnn";
  int batch = 64;           // per rank
  int epochs = 1;
  std::int64_t steps = 0;   // stop after this many steps (0: run the epochs)
  float lr = 0.05f;
  int loader_threads = 1;   // sluice worker threads per rank
  int train_threads = 1;    // the training core's threads per rank
  std::uint64_t seed = 1;
  int log_every = 50;
  std::string device = "cpu";      // cpu, cuda (cuda:<local rank>) or cuda:N
  std::string all_reduce = "auto";  // auto (NCCL on a CUDA device when built with it), mpi, nccl
};

[[noreturn]] void usage(const char* argv0, int rank) {
  if (rank == 0) {
    std::fprintf(stderr,
                 "usage: mpirun -np N %s [--data DIR] [--model fashion-cnn|cifar10-separable] [--batch PER_RANK]\n"
                 "       [--epochs E] [--steps S] [--lr LR] [--loader-threads T] [--train-threads T] [--seed S]\n"
                 "       [--log-every K] [--device cpu|cuda|cuda:N] [--all-reduce auto|mpi|nccl]\n",
                 argv0);
  }
  MPI_Finalize();
  std::exit(2);
}

Options parse(int argc, char** argv, int rank) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) usage(argv[0], rank);
    const char* value = argv[++i];
    if (arg == "--data") o.data = value;
    else if (arg == "--model") o.model = value;
    else if (arg == "--batch") o.batch = std::atoi(value);
    else if (arg == "--epochs") o.epochs = std::atoi(value);
    else if (arg == "--steps") o.steps = std::atoll(value);
    else if (arg == "--lr") o.lr = std::strtof(value, nullptr);
    else if (arg == "--loader-threads") o.loader_threads = std::atoi(value);
    else if (arg == "--train-threads") o.train_threads = std::atoi(value);
    else if (arg == "--seed") o.seed = std::strtoull(value, nullptr, 10);
    else if (arg == "--log-every") o.log_every = std::max(1, std::atoi(value));
    else if (arg == "--device") o.device = value;
    else if (arg == "--all-reduce") o.all_reduce = value;
    else usage(argv[0], rank);
  }
  if (o.batch < 1 || o.epochs < 1 || o.loader_threads < 1 || o.train_threads < 1) usage(argv[0], rank);
  if (o.all_reduce != "auto" && o.all_reduce != "mpi" && o.all_reduce != "nccl") usage(argv[0], rank);
  return o;
}

// --device: cpu, cuda (this rank's local rank picks the GPU) or cuda:N.
sluice::DeviceId parse_device(const std::string& text) {
  if (text == "cpu" || text == "host") return sluice::host();
  if (text == "cuda") return sluice::cuda(sluice_examples::local_rank(MPI_COMM_WORLD).rank);
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5) {
    char* end = nullptr;
    const long index = std::strtol(text.c_str() + 5, &end, 10);
    if (*end == '\0' && index >= 0) return sluice::cuda(static_cast<int>(index));
  }
  throw sluice::Error(sluice::ErrorCode::kInvalidArgument,
                      "--device must be cpu, cuda or cuda:N, got \"" + text + "\"");
}

// The all-reduce for this run; nullptr: DataParallel's default, MPI_Allreduce on host copies.
std::unique_ptr<sluice_examples::GradientAllReduce> make_all_reduce(const Options& o, sluice::train::Context& ctx) {
  const bool cuda = ctx.device().is_cuda();
  if (o.all_reduce == "mpi" || (o.all_reduce == "auto" && !cuda)) return nullptr;
  if (!cuda) throw sluice::Error(sluice::ErrorCode::kInvalidArgument, "--all-reduce nccl needs --device cuda");
#if SLUICE_EXAMPLE_NCCL
  return std::make_unique<sluice_examples::NcclAllReduce>(ctx, MPI_COMM_WORLD);
#else
  if (o.all_reduce == "nccl") {
    throw sluice::Error(sluice::ErrorCode::kInvalidArgument,
                        "--all-reduce nccl: this example was built without NCCL (SLUICE_WITH_NCCL, docs/distributed.md)");
  }
  return nullptr;  // auto on a GPU without NCCL: MPI on host copies
#endif
}

// This rank's shard of the data set, with the model's input and CIFAR's augmentation for RGB.
sluice::Loader make_loader(const Options& o, const sluice::train::ModelInfo& model) {
  const bool grey = model.channels == 1;
  sluice::Pipeline p = sluice::Pipeline::from_folder(o.data);
  p.shard_from_launcher().shuffle_files(o.seed);  // the same seed on every rank
  p.read().decode_jpeg({.color = grey ? sluice::Color::kGrey : sluice::Color::kRGB});
  if (!grey) p.random_crop(model.width, model.height, {.padding = 4}).flip_horizontal(0.5);
  std::vector<float> mean = grey ? std::vector<float>{0.2860f} : std::vector<float>{0.4914f, 0.4822f, 0.4465f};
  std::vector<float> std = grey ? std::vector<float>{0.3530f} : std::vector<float>{0.2470f, 0.2435f, 0.2616f};
  p.normalize({.mean = std::move(mean), .std = std::move(std), .layout = sluice::Layout::kNCHW,
               .dtype = sluice::DType::kF32});
  // Every rank must take the same number of steps (a missing one would leave the others waiting
  // in MPI_Allreduce): full batches only, and the epoch's step count is the ranks' minimum.
  p.batch(o.batch, {.drop_last = true});
  return p.build({.threads = o.loader_threads, .seed = o.seed});
}

// A hash of every parameter's bytes: equal on all ranks when the weights are.
std::uint64_t weights_hash(sluice::train::Context& ctx, const std::vector<sluice::train::Parameter>& params) {
  std::uint64_t h = 1469598103934665603ull;
  std::vector<float> host;
  for (const sluice::train::Parameter& p : params) {
    host.resize(static_cast<std::size_t>(p.value->elements()));
    sluice::train::ops::copy_to_host(ctx, *p.value, host.data());
    const auto* bytes = reinterpret_cast<const unsigned char*>(host.data());
    for (std::size_t i = 0; i < host.size() * sizeof(float); ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  }
  return h;
}

// Rank 0's line every --log-every steps: the loss and accuracy of the steps since the last
// line, over all ranks' batches, and the images per second over all ranks since the start.
class ProgressLog final : public sluice::train::EpochHook {
 public:
  explicit ProgressLog(int every) : every_(every) {}

  void on_step_end(const sluice::train::StepReport& s) override {
    images_ += s.result.images;
    window_ += s.result;
    if (s.step % every_ != 0) return;
    std::printf("epoch %lld step %5lld  loss %.4f  train accuracy %.3f  %.0f images/s over all ranks\n",
                static_cast<long long>(s.epoch), static_cast<long long>(s.step), window_.mean_loss(),
                window_.accuracy(), static_cast<double>(images_) / seconds());
    std::fflush(stdout);
    window_ = {};
  }

  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  int every_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::int64_t images_ = 0;
  sluice::train::BatchResult window_;
};

int run(const Options& o, int rank, int world) {
  namespace st = sluice::train;
  const sluice::LauncherRank launched = sluice::launcher_rank();
  if (launched.rank != rank || launched.world != world) {
    std::fprintf(stderr, "rank %d: the launcher's variables (%s) say rank %d of %d, MPI says %d of %d\n", rank,
                 launched.source.empty() ? "none" : launched.source.c_str(), launched.rank, launched.world, rank,
                 world);
    return 1;
  }
  const st::ModelInfo& info = st::model_info(o.model);
  sluice::Loader loader = make_loader(o, info);

  const sluice::DeviceId device = parse_device(o.device);
  sluice::Allocator allocator(device, {.name = "training"});
  st::Context ctx(allocator, {.threads = o.train_threads});
  std::unique_ptr<st::Sequential> model = st::make_model(ctx, o.model, o.seed);
  st::Sgd optimizer({.learning_rate = o.lr});
  // Declared after the context and before `dp`: its device buffer returns to the allocator first.
  const std::unique_ptr<sluice_examples::GradientAllReduce> all_reduce = make_all_reduce(o, ctx);
  sluice_examples::DataParallel dp(ctx, *model, optimizer, MPI_COMM_WORLD, all_reduce.get());
  dp.broadcast_weights(0);

  if (rank == 0) {
    std::printf("%s, %d ranks (%s), %d images per rank and step, %lld samples on rank 0\n", o.model.c_str(), world,
                launched.source.empty() ? "no launcher variables" : launched.source.c_str(), o.batch,
                static_cast<long long>(loader.samples_per_epoch()));
    std::printf("rank 0 trains on %s; gradients: %s\n", sluice::to_string(device).c_str(),
                dp.all_reduce().describe().c_str());
  }
  // The library's epoch loop: this rank's shard, each epoch cut to the ranks' fewest batches,
  // one data-parallel step a batch, and rank 0's progress line as a hook.
  sluice::LoaderBatches shard(loader);
  sluice_examples::EvenEpochs batches(shard, MPI_COMM_WORLD);
  sluice_examples::DataParallelStep step(ctx, *model, dp);
  st::EpochRunner runner(step, batches, {.epochs = o.epochs, .max_steps = o.steps});
  ProgressLog log(o.log_every);
  if (rank == 0) runner.add_hook(log);
  const st::RunReport& report = runner.run();
  const double seconds = log.seconds();
  const std::int64_t step_count = report.steps, images = report.images;

  // The point of data parallelism: the ranks' models are the same model.
  unsigned long long hash = weights_hash(ctx, dp.parameters());
  unsigned long long low = hash, high = hash;
  MPI_Allreduce(MPI_IN_PLACE, &low, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &high, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf("%lld steps, %lld images in %.1f s: %.0f images/s over %d ranks; weights %s on every rank\n",
                static_cast<long long>(step_count), static_cast<long long>(images), seconds,
                static_cast<double>(images) / seconds, world, low == high ? "identical" : "DIFFER");
  }
  return low == high ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  int status = 0;
  try {
    status = run(parse(argc, argv, rank), rank, world);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);  // the other ranks may be waiting in a collective
  }
  MPI_Finalize();
  return status;
}
