// TrainConfig: what a training run is, as plain values (the model's name, the batch, the
// optimizer...), and make_training(), the one function that turns it into a model, an optimizer
// and the trainer's options. `sluice train`, `sluice plan` (the planner, sluice/train/planner.hpp)
// and the batch-size search (sluice/train/batch_search.hpp) all build through it, so a
// prediction is made for the very objects the run will use: a technique added to the training
// core is a field here, read by make_training, and every one of them follows.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "sluice/train/context.hpp"
#include "sluice/train/optimizer.hpp"
#include "sluice/train/sequential.hpp"
#include "sluice/train/trainer.hpp"

namespace sluice::train {

struct TrainConfig {
  std::string model = "fashion-cnn";  // a name of model_catalog()
  std::int64_t batch = 128;
  std::string optimizer = "sgd";      // "sgd" (Nesterov momentum 0.9) or "adam" (AdamW)
  float lr = 0.0f;                    // peak learning rate; 0: 0.05 for sgd, 0.001 for adam
  std::uint64_t seed = 1;
  std::int64_t total_steps = 0;       // the cosine schedule's length (warmup: 5%); 0: no schedule
  int accumulate = 1;                 // micro-batches of batch / accumulate per optimizer step
  std::string checkpoint = "none";    // gradient checkpointing: none, sqrt, every:K
  bool offload = false;               // the optimizer's state in host memory (SgdOptions::offload)
  std::string precision = "f32";      // f32, mixed_f16 or mixed_bf16 (sluice/train/precision.hpp)
};

// The learning rate `config` trains with (its lr, or the optimizer's default).
float learning_rate(const TrainConfig& config);

struct TrainSetup {
  std::unique_ptr<Sequential> model;
  std::unique_ptr<Optimizer> optimizer;
  TrainerOptions trainer;
  float learning_rate = 0.0f;
};

// The model (initialised from config.seed on ctx), the optimizer and the trainer's options.
// Throws sluice::Error(kInvalidArgument) for an unknown model or optimizer, an accumulation that
// does not divide the batch, a checkpoint policy CheckpointPolicy::parse rejects, or an unknown precision.
TrainSetup make_training(Context& ctx, const TrainConfig& config);

}  // namespace sluice::train
