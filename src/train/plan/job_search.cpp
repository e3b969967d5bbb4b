// --batch auto and --accumulate auto inside a training job's limit: the room the pipelines and the
// offloaded state leave the training step at each candidate, dry runs for the guess, real trials
// in that room on a new allocator each.
#include <chrono>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/train/context.hpp"
#include "sluice/train/job_plan.hpp"
#include "sluice/train/models.hpp"
#include "sluice/train/out_of_memory.hpp"
#include "sluice/train/trainer.hpp"

namespace sluice::train {
namespace {

// What the job's limit leaves the training step at a training batch; 0 when the pipelines'
// minimums (or, on a device, the host side) do not fit at all.
class Room {
 public:
  explicit Room(const JobConfig& config) : config_(config) {
    if (config.train.offload) {
      PlanConfig pc{.train = config.train, .threads = config.threads, .eval_batch = 0, .epochs = 1};
      offload_ = plan_peak(pc).offload_reserved_bytes;
    }
  }

  std::uint64_t at(std::int64_t batch) const {
    std::uint64_t pipelines = 0;
    if (config_.pipelines) {
      for (const PipelineNeeds& p : config_.pipelines(batch)) pipelines += p.minimum_bytes();
    }
    if (config_.device.is_cuda()) {
      const bool host_fits = config_.host_memory_limit == 0 || pipelines + offload_ <= config_.host_memory_limit;
      return host_fits ? config_.memory_limit : 0;
    }
    const std::uint64_t others = pipelines + offload_;
    return others >= config_.memory_limit ? 0 : config_.memory_limit - others;
  }

  // The training allocator for a trial or dry run at `batch`: one region of the room, or the
  // hand split's allocator when it fits the room (nullopt when nothing fits).
  std::optional<AllocatorOptions> allocator(std::int64_t batch) const {
    const std::uint64_t room = at(batch) / Allocator::kGranularity * Allocator::kGranularity;
    if (config_.allocator) {
      if (config_.allocator->limit > room) return std::nullopt;
      return *config_.allocator;
    }
    if (room == 0) return std::nullopt;
    return AllocatorOptions{.mode = AllocatorMode::kPreallocate, .limit = room, .name = "training (trial)"};
  }

  bool plan_fits(const TrainConfig& train) const {
    const std::optional<AllocatorOptions> a = allocator(train.batch);
    if (!a) return false;
    const PlanConfig pc{.train = train, .threads = config_.threads, .allocator = *a, .eval_batch = config_.eval_batch,
                        .epochs = config_.epochs};
    return plan_peak(pc).fits;
  }

 private:
  const JobConfig& config_;
  std::uint64_t offload_ = 0;
};

// Real steps (and one real evaluation batch) on zeros, on a new allocator in the room.
BatchTrial trial(const JobConfig& config, const Room& room, const TrainConfig& train, int steps) {
  BatchTrial t;
  t.batch = train.batch;
  const std::optional<AllocatorOptions> options = room.allocator(train.batch);
  if (!options) return t;
  const auto start = std::chrono::steady_clock::now();
  const ModelInfo& info = model_info(train.model);
  auto zeros = [&](std::int64_t batch) {
    return std::vector<float>(static_cast<std::size_t>(batch * info.channels * info.height * info.width), 0.0f);
  };
  try {
    Allocator allocator(config.device, *options);
    Context ctx(allocator, ContextOptions{.threads = config.threads});
    {
      TrainSetup s = make_training(ctx, train);
      Trainer trainer(ctx, *s.model, *s.optimizer, s.trainer);
      std::vector<float> data = zeros(train.batch);
      std::vector<std::int32_t> labels(static_cast<std::size_t>(train.batch), 0);
      const TensorView view{data.data(), DType::kF32, Shape{train.batch, info.channels, info.height, info.width}};
      for (int i = 0; i < steps; ++i) trainer.step(view, labels, host());
      if (config.eval_batch > 0) {
        data = zeros(config.eval_batch);
        labels.assign(static_cast<std::size_t>(config.eval_batch), 0);
        const TensorView eval{data.data(), DType::kF32, Shape{config.eval_batch, info.channels, info.height, info.width}};
        trainer.evaluate(eval, labels, host());
      }
      t.fits = true;
    }
    const AllocatorStats st = allocator.stats();
    t.peak_in_use_bytes = st.peak_in_use_bytes;
    t.reserved_bytes = st.reserved_bytes;
  } catch (const OutOfMemory& e) {
    t.fits = false;
    t.peak_in_use_bytes = e.stats().peak_in_use_bytes;
    t.reserved_bytes = e.stats().reserved_bytes;
  }
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return t;
}

}  // namespace

BatchSearchResult find_job_batch(const JobConfig& config, const BatchSearchOptions& options) {
  const Room room(config);
  int plans = 0;
  TrainConfig train = config.train;
  auto fits = [&](std::int64_t b) {
    train.batch = b;
    return room.plan_fits(train);
  };
  const std::int64_t guess = options.use_planner ? planned_max_batch(fits, options, &plans) : 0;
  BatchSearchResult r = search_max_batch(
      [&](std::int64_t b) {
        TrainConfig c = config.train;
        c.batch = b;
        return trial(config, room, c, options.steps);
      },
      guess, options);
  r.plans = plans;
  return r;
}

std::int64_t planned_job_batch(const JobConfig& config, const BatchSearchOptions& options, int* plans) {
  const Room room(config);
  TrainConfig train = config.train;
  return planned_max_batch(
      [&](std::int64_t b) {
        train.batch = b;
        return room.plan_fits(train);
      },
      options, plans);
}

int planned_job_accumulation(const JobConfig& config, int* plans) {
  const Room room(config);
  TrainConfig train = config.train;
  int count = 0;
  int found = 0;
  for (std::int64_t k = 1; k <= train.batch && found == 0; ++k) {
    if (train.batch % k != 0) continue;
    train.accumulate = static_cast<int>(k);
    ++count;
    if (room.plan_fits(train)) found = static_cast<int>(k);
  }
  if (plans != nullptr) *plans = count;
  return found;
}

AccumulationSearchResult find_job_accumulation(const JobConfig& config, int steps) {
  const Room room(config);
  return search_accumulation(
      config.train.batch,
      [&](int k) {
        TrainConfig c = config.train;
        c.accumulate = k;
        return room.plan_fits(c);
      },
      [&](int k) {
        TrainConfig c = config.train;
        c.accumulate = k;
        return trial(config, room, c, steps);
      });
}

}  // namespace sluice::train
