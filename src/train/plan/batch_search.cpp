// The batch-size search: planner guess, real trials, out-of-memory caught and memory returned.
#include "sluice/train/batch_search.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <span>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/detail/device/copy.hpp"
#include "sluice/detail/device/device_pool.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/models.hpp"
#include "sluice/train/out_of_memory.hpp"
#include "sluice/train/trainer.hpp"

namespace sluice::train {
namespace {

std::int64_t round_down(std::int64_t b, std::int64_t g) { return b / g * g; }

// A trial's batch of zeros, where the loader leaves a real run's batches: host memory for the
// CPU, device memory of its own (outside the training allocator, like the transfer ring's slots)
// for a CUDA context, so that no trial stages its batch through the allocator the real run
// does not stage through either (sluice/train/planner.hpp).
class TrialBatch {
 public:
  TrialBatch(DeviceId device, const ModelInfo& info, std::int64_t batch)
      : device_(device),
        host_data_(static_cast<std::size_t>(batch * info.channels * info.height * info.width), 0.0f),
        host_labels_(static_cast<std::size_t>(batch), 0) {
    const Shape shape{batch, info.channels, info.height, info.width};
    view_ = TensorView{host_data_.data(), DType::kF32, shape};
    labels_ = host_labels_;
    if (device.is_host()) return;
    pool_ = make_caching_pool(device);
    data_ = DeviceBuffer(*pool_, std::max<std::size_t>(view_.bytes(), 1));
    device_labels_ = DeviceBuffer(*pool_, std::max<std::size_t>(host_labels_.size() * sizeof(std::int32_t), 1));
    copy_to_device(device, data_.data(), host_data_.data(), view_.bytes());
    copy_to_device(device, device_labels_.data(), host_labels_.data(), host_labels_.size() * sizeof(std::int32_t));
    view_.data = data_.data();
    labels_ = {static_cast<const std::int32_t*>(device_labels_.data()), host_labels_.size()};
    host_data_ = {};  // only the device copy is read
  }

  DeviceId device() const { return device_; }
  const TensorView& view() const { return view_; }
  std::span<const std::int32_t> labels() const { return labels_; }

 private:
  DeviceId device_;
  std::vector<float> host_data_;
  std::vector<std::int32_t> host_labels_;
  std::unique_ptr<DevicePool> pool_;  // before the buffers: they return to it
  DeviceBuffer data_;
  DeviceBuffer device_labels_;
  TensorView view_;
  std::span<const std::int32_t> labels_;
};

}  // namespace

BatchSearchResult search_max_batch(const std::function<BatchTrial(std::int64_t)>& trial, std::int64_t guess,
                                   const BatchSearchOptions& o) {
  const std::int64_t g = std::max<std::int64_t>(1, o.granularity);
  const std::int64_t lo_bound = std::max<std::int64_t>(g, (o.min_batch + g - 1) / g * g);
  const std::int64_t hi_bound = round_down(o.max_batch, g);
  if (lo_bound > hi_bound) throw Error(ErrorCode::kInvalidArgument, "batch search: no multiple of the granularity in [min, max]");
  BatchSearchResult r;
  r.planner_guess = guess;
  std::int64_t lo = 0;   // the largest known to fit (0: none yet)
  std::int64_t hi = 0;   // the smallest known to fail (0: none yet)
  auto run = [&](std::int64_t b) {
    BatchTrial t = trial(b);
    t.batch = b;
    r.trials.push_back(t);
    if (t.fits) lo = std::max(lo, b);
    else hi = hi == 0 ? b : std::min(hi, b);
    return t.fits;
  };
  auto budget = [&] { return static_cast<int>(r.trials.size()) < o.max_trials; };

  std::int64_t start = guess > 0 ? std::clamp(round_down(guess, g), lo_bound, hi_bound) : lo_bound;
  if (run(start)) {
    // Up: from a guess by increments doubling from one step; without one, the batch doubling.
    std::int64_t step = g;
    while (budget() && lo < hi_bound && hi == 0) {
      const std::int64_t next = guess > 0 ? lo + step : lo * 2;
      run(std::min(round_down(next, g), hi_bound));
      step *= 2;
    }
  } else {
    std::int64_t step = g;
    while (budget() && lo == 0 && hi > lo_bound) {
      run(std::max(lo_bound, hi - step));
      step *= 2;
    }
  }
  // Bisect between the last fit and the first failure.
  while (budget() && lo > 0 && hi > 0 && hi - lo > g) {
    run(lo + round_down((hi - lo) / 2, g));
  }
  r.batch = lo;
  return r;
}

PlanConfig plan_for(const Context& ctx) {
  PlanConfig pc;
  pc.threads = ctx.threads();
  pc.allocator = ctx.allocator().options();
  const ContextOptions& o = ctx.options();
  pc.device = o.meta ? o.meta_device.value_or(ctx.device()) : ctx.device();
  pc.compute_major = o.meta ? o.meta_compute_major : 0;
  return pc;
}

BatchTrial try_batch(Context& ctx, const TrainConfig& config, std::int64_t batch, int steps) {
  Allocator& allocator = ctx.allocator();
  ctx.release_workspace();
  allocator.release_free_regions();
  allocator.reset_growth();  // grow mode: regions as a new allocator's, as the planner assumes
  const std::uint64_t before = allocator.stats().in_use_bytes;
  allocator.reset_peak();
  BatchTrial t;
  t.batch = batch;
  const auto start = std::chrono::steady_clock::now();
  {
    TrainConfig c = config;
    c.batch = batch;
    const TrialBatch input(ctx.device(), model_info(c.model), batch);
    try {
      TrainSetup s = make_training(ctx, c);
      Trainer trainer(ctx, *s.model, *s.optimizer, s.trainer);
      for (int i = 0; i < steps; ++i) trainer.step(input.view(), input.labels(), input.device());
      t.fits = true;
    } catch (const OutOfMemory&) {
      t.fits = false;  // the step released what its forward kept; the rest goes with the scope
    }
    ctx.synchronize();  // the queued steps are done with the batch before its memory goes
  }
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const AllocatorStats st = allocator.stats();
  t.peak_in_use_bytes = st.peak_in_use_bytes;
  t.reserved_bytes = st.reserved_bytes;
  ctx.release_workspace();
  allocator.release_free_regions();
  allocator.reset_growth();
  const std::uint64_t after = allocator.stats().in_use_bytes;
  if (after != before) {
    throw Error(ErrorCode::kInternal, "batch search: the trial at batch " + std::to_string(batch) + " left " +
                                          std::to_string(after - before) + " bytes in use");
  }
  return t;
}

std::int64_t planned_max_batch(const PlanConfig& base, const BatchSearchOptions& o, int* plans) {
  PlanConfig pc = base;
  return planned_max_batch(
      [&](std::int64_t b) {
        pc.train.batch = b;
        return plan_peak(pc).fits;
      },
      o, plans);
}

std::int64_t planned_max_batch(const std::function<bool(std::int64_t)>& test, const BatchSearchOptions& o, int* plans) {
  const std::int64_t g = std::max<std::int64_t>(1, o.granularity);
  int count = 0;
  auto fits = [&](std::int64_t b) {
    ++count;
    return test(b);
  };
  std::int64_t lo = std::max<std::int64_t>(g, (o.min_batch + g - 1) / g * g);
  std::int64_t hi = round_down(o.max_batch, g);
  std::int64_t best = 0;
  if (fits(lo)) {
    best = lo;
    // Doubling to bracket, then bisection: O(log) dry runs of a few milliseconds each.
    std::int64_t fail = 0;
    while (fail == 0 && best < hi) {
      const std::int64_t c = std::min(hi, round_down(best * 2, g));
      if (fits(c)) best = c;
      else fail = c;
    }
    while (fail != 0 && fail - best > g) {
      const std::int64_t mid = best + round_down((fail - best) / 2, g);
      if (fits(mid)) best = mid;
      else fail = mid;
    }
  }
  if (plans != nullptr) *plans = count;
  return best;
}

BatchSearchResult find_max_batch(Context& ctx, const TrainConfig& config, const BatchSearchOptions& options) {
  if (ctx.allocator().options().limit == 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "the batch-size search needs a memory limit (grow:LIMIT or prealloc:SIZE): without one every batch fits");
  }
  int plans = 0;
  PlanConfig pc = plan_for(ctx);
  pc.train = config;
  pc.steps = options.steps;
  pc.eval_batch = 0;  // the trials run training steps only
  const std::int64_t guess = options.use_planner ? planned_max_batch(pc, options, &plans) : 0;
  BatchSearchResult r = search_max_batch(
      [&](std::int64_t b) { return try_batch(ctx, config, b, options.steps); }, guess, options);
  r.plans = plans;
  return r;
}

AccumulationSearchResult search_accumulation(std::int64_t batch, const std::function<bool(int)>& plan_fits,
                                             const std::function<BatchTrial(int)>& trial_at) {
  AccumulationSearchResult r;
  r.batch = batch;
  std::vector<int> divisors;
  for (std::int64_t k = 1; k <= batch; ++k) {
    if (batch % k == 0) divisors.push_back(static_cast<int>(k));
  }
  std::size_t guess = divisors.size();
  for (std::size_t i = 0; i < divisors.size(); ++i) {
    ++r.plans;
    if (plan_fits(divisors[i])) {
      guess = i;
      break;
    }
  }
  r.planner_guess = guess < divisors.size() ? divisors[guess] : 0;
  auto trial = [&](std::size_t i) {
    BatchTrial t = trial_at(divisors[i]);
    t.batch = batch / divisors[i];
    r.trials.push_back(t);
    return t.fits;
  };
  std::size_t i = guess < divisors.size() ? guess : 0;
  if (trial(i)) {
    // Confirm the divisor below does not fit (else walk down while it does).
    while (i > 0 && trial(i - 1)) --i;
    r.accumulate = divisors[i];
  } else {
    while (++i < divisors.size()) {
      if (trial(i)) {
        r.accumulate = divisors[i];
        break;
      }
    }
  }
  return r;
}

AccumulationSearchResult find_accumulation(Context& ctx, const TrainConfig& config, int steps) {
  if (ctx.allocator().options().limit == 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "the accumulation search needs a memory limit (grow:LIMIT or prealloc:SIZE): without one every step fits");
  }
  PlanConfig pc = plan_for(ctx);
  pc.train = config;
  pc.steps = steps;
  pc.eval_batch = 0;
  return search_accumulation(
      config.batch,
      [&](int k) {
        pc.train.accumulate = k;
        return plan_peak(pc).fits;
      },
      [&](int k) {
        TrainConfig c = config;
        c.accumulate = k;
        return try_batch(ctx, c, config.batch, steps);
      });
}

}  // namespace sluice::train
