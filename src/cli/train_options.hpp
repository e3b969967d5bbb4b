// The options `sluice train` and `sluice plan` share, and the one place that turns them into the
// training core's configuration (sluice/train/train_config.hpp) and allocator options: plan predicts for
// exactly what train builds.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "sluice/core/device_id.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/train_config.hpp"

namespace CLI {
class App;
class Option;
}

namespace sluice::cli {

struct TrainOptions {
  std::string dataset;                 // "fashion-mnist" or empty
  std::string data_root = "data";      // where `sluice prepare` put it
  std::string data;                    // a folder with train/ and test/
  std::string shards;                  // or tar shards: the training split (a pattern)...
  std::string test_shards;             // ...and the test split
  std::string model;                   // empty: the catalog's model for --dataset
  int epochs = 0;                      // 0: the model's default
  std::int64_t steps = 0;              // > 0: stop after this many steps
  int batch = 128;
  std::string batch_text = "128";      // --batch: a number or "auto"
  int accumulate = 1;                  // micro-batches of batch / accumulate per optimizer step
  std::string accumulate_text = "1";   // --accumulate: a number or "auto"
  std::string checkpoint = "none";     // gradient checkpointing: none, sqrt, every:K
  std::string optimizer = "sgd";
  std::string precision = "f32";       // f32, mixed_f16 or mixed_bf16
  float lr = 0.0f;                     // 0: the optimizer's default
  int threads = 0;                     // training threads; 0: all cores
  int loader_threads = 1;
  std::string device = "cpu";
  std::uint64_t seed = 1;
  std::string memory = "grow";         // grow | grow:LIMIT | prealloc:SIZE
  std::string memory_limit;            // the whole job's (empty: none); the device's on CUDA
  std::string host_memory_limit;       // CUDA: the host side's (empty: unbounded)
  std::string profile;                 // a Chrome trace file to write
  std::string save;
  std::int64_t warmup_steps = 0;       // first steps left out of train_images_per_sec
  bool no_eval = false;                // skip the test set (speed measurements)
  bool json = false;
  double prune = 0.0;                  // > 0: magnitude pruning to this final sparsity
  std::int64_t prune_begin = -1;       // -1: step 0
  std::int64_t prune_end = -1;         // -1: about 75% of the steps (see prune_schedule)
  std::int64_t prune_frequency = 0;    // 0: 100, or a tenth of the pruning span when shorter
  std::string save_pruned;             // write the weights compressed (bitmap + nonzeros) here
  std::string offload = "none";        // "optimizer": the optimizer's state in host memory
};

// Throws when --save, --save-pruned or --profile could not be written (a missing or read-only
// folder, a symlink or a foreign file at the path): checked before the run, not after it.
void check_outputs(const TrainOptions& o);

// The evaluation batch of `sluice train` (the planner simulates it too).
inline constexpr std::int64_t kEvalBatch = 256;

// Fills in what the flags left to the model catalog (sluice/train/models.hpp), alike for train and
// plan: --model (the one made for --dataset, else the catalog's default) and --epochs (the
// model's). Throws sluice::Error(kInvalidArgument) for an unknown model.
void apply_model_defaults(TrainOptions& o);

// --model, --batch, --accumulate, --checkpoint, --optimizer, --precision, --offload, --lr, --threads, --device,
// --seed, --memory, --memory-limit, --host-memory-limit, --no-eval: the flags that decide what a
// training step allocates and what the job may hold, registered alike on train and plan.
void add_model_options(CLI::App* cmd, TrainOptions& o);
// --dataset, --data, --shards, --test-shards, --data-root, --loader-threads: where the data is and
// how many workers read it (train always; plan for a whole job's plan under --memory-limit).
// Returns the options of which a command may require one.
struct DataOptions {
  CLI::Option* dataset = nullptr;
  CLI::Option* data = nullptr;
  CLI::Option* shards = nullptr;
};
DataOptions add_data_options(CLI::App* cmd, TrainOptions& o);

// --device: "cpu" (or "host") or "cuda:N". Throws sluice::Error(kInvalidArgument) otherwise.
DeviceId parse_device(const std::string& text);

// --memory: "grow" (regions as needed, no limit), "grow:LIMIT" (as needed up to LIMIT) or
// "prealloc:SIZE" (one region of SIZE at start, never more); sizes as 512MiB, 2GiB, 1000000.
// Throws sluice::Error(kInvalidArgument) naming the problem.
AllocatorOptions parse_memory(const std::string& text);
// "grow (no limit)", "grow up to 1.0 GiB", "preallocated 2.0 GiB".
std::string describe_memory(const AllocatorOptions& options);

// --batch: a number in [2, 65536], or "auto" (returns 0). Throws kInvalidArgument otherwise.
int parse_batch(const std::string& text);
// --accumulate: a number >= 1, or "auto" (returns 0): the smallest that fits --memory's limit
// with --batch kept as the effective batch. Throws kInvalidArgument otherwise.
int parse_accumulate(const std::string& text);

// The training core's configuration for these options, with the batch and the schedule's length.
train::TrainConfig train_config(const TrainOptions& o, std::int64_t batch, std::int64_t total_steps);

}  // namespace sluice::cli
