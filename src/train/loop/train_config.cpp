// make_training: a TrainConfig as a model, an optimizer and the trainer's options.
#include "sluice/train/train_config.hpp"

#include <algorithm>

#include "sluice/core/error.hpp"
#include "sluice/train/gradient_checkpointing.hpp"
#include "sluice/train/precision.hpp"
#include "sluice/train/models.hpp"

namespace sluice::train {

float learning_rate(const TrainConfig& config) {
  if (config.lr > 0) return config.lr;
  return config.optimizer == "adam" ? 1e-3f : 0.05f;
}

TrainSetup make_training(Context& ctx, const TrainConfig& config) {
  if (config.optimizer != "sgd" && config.optimizer != "adam") {
    throw Error(ErrorCode::kInvalidArgument, "the optimizer must be sgd or adam, got \"" + config.optimizer + "\"");
  }
  if (config.batch < 1) {
    throw Error(ErrorCode::kInvalidArgument, "the batch must be at least 1, got " + std::to_string(config.batch));
  }
  if (config.accumulate < 1 || config.batch % config.accumulate != 0) {
    throw Error(ErrorCode::kInvalidArgument, "accumulation over " + std::to_string(config.accumulate) +
                                                 " micro-batches does not divide the batch of " +
                                                 std::to_string(config.batch) + " into equal micro-batches");
  }
  CheckpointPolicy checkpoint;
  try {
    checkpoint = CheckpointPolicy::parse(config.checkpoint);
  } catch (const Error& e) {
    throw Error(ErrorCode::kInvalidArgument, "checkpoint: " + e.cause());
  }
  const Precision precision = parse_precision(config.precision);  // throws for an unknown name
  TrainSetup s;
  s.learning_rate = learning_rate(config);
  const ModelInfo& info = model_info(config.model);
  s.model = make_model(ctx, info.name, config.seed);
  s.model->set_checkpointing(checkpoint);
  if (config.optimizer == "adam") {
    s.optimizer = std::make_unique<AdamW>(AdamWOptions{.learning_rate = s.learning_rate, .offload = config.offload});
  } else {
    s.optimizer = std::make_unique<Sgd>(SgdOptions{.learning_rate = s.learning_rate, .offload = config.offload});
  }
  s.trainer.accumulate = config.accumulate;
  s.trainer.precision = precision;
  if (config.total_steps > 0) {
    s.trainer.schedule = CosineSchedule{.base = s.learning_rate,
                                        .warmup_steps = std::max<std::int64_t>(1, config.total_steps / 20),
                                        .total_steps = config.total_steps};
  }
  return s;
}

}  // namespace sluice::train
