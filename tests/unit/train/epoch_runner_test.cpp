// EpochRunner: hooks at the right points and in nesting order, the step limit inside an epoch,
// evaluation after every epoch, the reports' counts and memory peaks per epoch, the pruning and
// profiling hooks, and training through it equal to a hand-written loop over the same batches
// (deterministic for a seed, and different for another seed).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "model_test_support.hpp"
#include "sluice/core/error.hpp"
#include "sluice/train/epoch_runner.hpp"
#include "sluice/train/layers.hpp"
#include "sluice/train/profiler.hpp"
#include "sluice/train/pruning.hpp"

namespace sluice::train {
namespace {

using test::HostRig;

constexpr int kSide = 8;

// Batches of a toy set (1 x 8 x 8 images), in an order that depends on the epoch (rotated by
// it), as a shuffling loader's does; counts the calls the runner makes.
class ToySource final : public BatchSource {
 public:
  ToySource(std::int64_t batches, std::int64_t batch, std::uint64_t seed)
      : set_(test::toy_set(batches * batch, 1, kSide, 4, seed)), batches_(batches), batch_(batch) {}

  std::int64_t batches_per_epoch() const override { return batches_; }
  void start_epoch(std::int64_t epoch) override {
    epochs_started.push_back(epoch);
    epoch_ = epoch;
    next_ = 0;
  }
  const TrainBatch* next() override {
    ++next_calls;
    if (next_ == batches_) return nullptr;
    current_ = batch_at((next_++ + epoch_) % batches_);
    return &current_;
  }
  void end_epoch() override { ++epochs_ended; }
  InputStats input_stats() const override {
    return {.busy_seconds = 0.5 * static_cast<double>(next_calls), .workers = 2, .host_bytes = 1000, .pinned_bytes = 24};
  }

  // Batch i of the set, whatever the epoch.
  TrainBatch batch_at(std::int64_t i) {
    const std::int64_t image = kSide * kSide;
    return TrainBatch{.data = TensorView{set_.images.data() + i * batch_ * image, DType::kF32, {batch_, 1, kSide, kSide}},
                      .labels = std::span<const std::int32_t>(set_.labels.data() + i * batch_, batch_)};
  }

  std::vector<std::int64_t> epochs_started;
  int epochs_ended = 0;
  int next_calls = 0;

 private:
  test::ToySet set_;
  std::int64_t batches_, batch_;
  std::int64_t epoch_ = 0, next_ = 0;
  TrainBatch current_;
};

// A step that trains nothing: each batch's result is its size, a loss of 1 per image and one
// correct prediction; counts its calls.
class CountingStep final : public TrainingStep {
 public:
  BatchResult train(const TrainBatch& batch) override {
    ++trained;
    return {.loss_sum = static_cast<double>(batch.labels.size()), .correct = 1,
            .images = static_cast<std::int64_t>(batch.labels.size())};
  }
  BatchResult evaluate(const TrainBatch& batch) override {
    ++evaluated;
    return {.loss_sum = 2.0 * static_cast<double>(batch.labels.size()), .correct = 2,
            .images = static_cast<std::int64_t>(batch.labels.size())};
  }
  int trained = 0;
  int evaluated = 0;
};

// Writes every event it sees into a shared log, prefixed with its name.
class LoggingHook final : public EpochHook {
 public:
  LoggingHook(std::string name, std::vector<std::string>& log) : name_(std::move(name)), log_(log) {}
  void on_epoch_begin(std::int64_t e) override { add("epoch_begin", e); }
  void on_step_begin(std::int64_t s) override { add("step_begin", s); }
  void on_step_end(const StepReport& s) override { add("step_end", s.step); }
  void on_evaluation_begin(std::int64_t e) override { add("evaluation_begin", e); }
  void on_evaluation_end(std::int64_t e) override { add("evaluation_end", e); }
  void on_epoch_end(EpochReport& r) override { add("epoch_end", r.epoch); }

 private:
  void add(const char* what, std::int64_t n) { log_.push_back(name_ + " " + what + " " + std::to_string(n)); }
  std::string name_;
  std::vector<std::string>& log_;
};

TEST(EpochRunner, HooksSeeEveryStepEvaluationAndEpochInOrder) {
  ToySource train(2, 4, 1), eval(3, 4, 2);
  CountingStep step;
  EpochRunner runner(step, train, {.epochs = 2, .evaluation = &eval});
  std::vector<std::string> log;
  LoggingHook hook("h", log);
  runner.add_hook(hook);
  runner.run();
  const std::vector<std::string> expected{
      "h epoch_begin 0", "h step_begin 1", "h step_end 1", "h step_begin 2", "h step_end 2",
      "h evaluation_begin 0", "h evaluation_end 0", "h epoch_end 0",
      "h epoch_begin 1", "h step_begin 3", "h step_end 3", "h step_begin 4", "h step_end 4",
      "h evaluation_begin 1", "h evaluation_end 1", "h epoch_end 1"};
  EXPECT_EQ(log, expected);
  EXPECT_EQ(step.trained, 4);
  EXPECT_EQ(step.evaluated, 6);  // the 3 evaluation batches after each epoch
  EXPECT_EQ(train.epochs_started, (std::vector<std::int64_t>{0, 1}));
  EXPECT_EQ(eval.epochs_started, (std::vector<std::int64_t>{0, 0}));  // the same batches every time
  EXPECT_EQ(train.epochs_ended, 2);
  EXPECT_EQ(eval.epochs_ended, 2);
  EXPECT_TRUE(runner.done());
  EXPECT_THROW((void)runner.run_epoch(), Error);
}

TEST(EpochRunner, HooksNestBeginsInOrderEndsInReverse) {
  ToySource train(1, 4, 1), eval(1, 4, 2);
  CountingStep step;
  EpochRunner runner(step, train, {.epochs = 1, .evaluation = &eval});
  std::vector<std::string> log;
  LoggingHook outer("outer", log), inner("inner", log);
  runner.add_hook(outer);
  runner.add_hook(inner);
  runner.run();
  const std::vector<std::string> expected{
      "outer epoch_begin 0", "inner epoch_begin 0", "outer step_begin 1", "inner step_begin 1",
      "inner step_end 1", "outer step_end 1", "outer evaluation_begin 0", "inner evaluation_begin 0",
      "inner evaluation_end 0", "outer evaluation_end 0", "inner epoch_end 0", "outer epoch_end 0"};
  EXPECT_EQ(log, expected);
}

TEST(EpochRunner, StepLimitStopsInsideAnEpochAndStillEvaluates) {
  ToySource train(3, 4, 1), eval(2, 4, 2);
  CountingStep step;
  EpochRunner runner(step, train, {.epochs = 5, .max_steps = 4, .evaluation = &eval});
  const RunReport& r = runner.run();
  ASSERT_EQ(r.per_epoch.size(), 2u);
  EXPECT_EQ(r.steps, 4);
  EXPECT_EQ(step.trained, 4);
  EXPECT_EQ(r.per_epoch[0].steps, 3);
  EXPECT_EQ(r.per_epoch[1].steps, 4);
  EXPECT_EQ(r.per_epoch[1].train.images, 4);  // one batch of the second epoch
  EXPECT_TRUE(r.per_epoch[1].evaluation.has_value());
  // No batch is fetched past the limit: 3 + the end of epoch 0, then 1.
  EXPECT_EQ(train.next_calls, 5);
  EXPECT_EQ(train.epochs_ended, 2);  // the cut epoch is ended too, so its batch goes back
  EXPECT_TRUE(runner.done());
}

TEST(EpochRunner, ReportsCountImagesEvaluationInputAndWarmup) {
  ToySource train(3, 4, 1), eval(2, 5, 2);
  CountingStep step;
  EpochRunner runner(step, train, {.epochs = 2, .warmup_steps = 2, .evaluation = &eval});
  const EpochReport first = runner.run_epoch();
  EXPECT_EQ(first.epoch, 0);
  EXPECT_EQ(first.train.images, 12);
  EXPECT_EQ(first.train.correct, 3);
  EXPECT_DOUBLE_EQ(first.train.mean_loss(), 1.0);
  ASSERT_TRUE(first.evaluation.has_value());
  EXPECT_EQ(first.evaluation->images, 10);
  EXPECT_EQ(first.evaluation->correct, 4);
  EXPECT_DOUBLE_EQ(first.evaluation->mean_loss(), 2.0);
  // The source's busy time moved by 0.5 s a next() call: 4 calls in the epoch.
  EXPECT_DOUBLE_EQ(first.input_busy_seconds, 2.0);
  EXPECT_EQ(first.input_workers, 2);
  EXPECT_DOUBLE_EQ(first.input_images_per_sec(), 12.0 * 2 / 2.0);
  EXPECT_FALSE(first.pruning.has_value());
  EXPECT_GE(first.seconds, first.step_seconds);
  EXPECT_GT(first.step_seconds, 0.0);
  EXPECT_EQ(first.memory.peak_in_use_bytes, 0u);  // no allocator given
  EXPECT_FALSE(runner.done());

  const RunReport& r = runner.run();
  ASSERT_EQ(r.per_epoch.size(), 2u);
  EXPECT_EQ(r.steps, 6);
  EXPECT_EQ(r.images, 24);
  EXPECT_EQ(r.timed_images, 16);  // steps 3 to 6
  EXPECT_LE(r.timed_seconds, r.step_seconds);
  EXPECT_DOUBLE_EQ(r.input_busy_seconds, 4.0);
  ASSERT_TRUE(r.last_evaluation().has_value());
  EXPECT_EQ(r.last_evaluation()->images, 10);
}

TEST(EpochRunner, AHookThatThrowsStopsTheRun) {
  ToySource train(4, 4, 1);
  CountingStep step;
  EpochRunner runner(step, train, {.epochs = 1});
  struct Cancel final : EpochHook {
    void on_step_begin(std::int64_t s) override {
      if (s == 3) throw Error(ErrorCode::kCancelled, "interrupted");
    }
  } cancel;
  runner.add_hook(cancel);
  try {
    runner.run();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCancelled);
  }
  EXPECT_EQ(step.trained, 2);
  EXPECT_EQ(runner.steps(), 2);
}

TEST(EpochRunner, BadOptionsAreRejected) {
  ToySource train(1, 4, 1);
  CountingStep step;
  EXPECT_THROW(EpochRunner(step, train, {.epochs = 0}), Error);
  EXPECT_THROW(EpochRunner(step, train, {.max_steps = -1}), Error);
  EXPECT_THROW(EpochRunner(step, train, {.warmup_steps = -1}), Error);
}

// A step that holds `spike` bytes of workspace during its first call only.
class SpikeStep final : public TrainingStep {
 public:
  SpikeStep(Context& ctx, std::int64_t spike) : ctx_(ctx), spike_(spike) {}
  BatchResult train(const TrainBatch& batch) override {
    if (calls_++ == 0) Tensor t = ctx_.empty({spike_ / 4}, DType::kF32, TensorCategory::kWorkspace);
    return {.images = static_cast<std::int64_t>(batch.labels.size())};
  }
  BatchResult evaluate(const TrainBatch&) override { return {}; }

 private:
  Context& ctx_;
  std::int64_t spike_;
  int calls_ = 0;
};

TEST(EpochRunner, MemoryPeaksArePerEpochAndTheRunKeepsTheHighest) {
  HostRig rig;
  constexpr std::int64_t kSpike = 4 << 20;
  SpikeStep step(rig.ctx, kSpike);
  ToySource train(2, 4, 1);
  EpochRunner runner(step, train, {.epochs = 2, .allocator = &rig.allocator});
  const RunReport& r = runner.run();
  const std::size_t workspace = index_of(TensorCategory::kWorkspace);
  EXPECT_GE(r.per_epoch[0].memory.peak_in_use_bytes, static_cast<std::uint64_t>(kSpike));
  EXPECT_GE(r.per_epoch[0].memory.by_category[workspace].peak_in_use_bytes, static_cast<std::uint64_t>(kSpike));
  EXPECT_LT(r.per_epoch[1].memory.peak_in_use_bytes, static_cast<std::uint64_t>(kSpike));  // reset at its start
  EXPECT_EQ(r.peak_in_use_bytes, r.per_epoch[0].memory.peak_in_use_bytes);
  EXPECT_EQ(r.peak_by_category[workspace], r.per_epoch[0].memory.by_category[workspace].peak_in_use_bytes);
  EXPECT_GE(r.peak_reserved_bytes, static_cast<std::uint64_t>(kSpike));
}

std::unique_ptr<Sequential> small_cnn(Context& ctx, std::uint64_t seed) {
  auto m = std::make_unique<Sequential>(Shape{1, kSide, kSide});
  m->add<Conv2D>(ctx, Conv2DOptions{.in_channels = 1, .out_channels = 8});
  m->add<BatchNorm>(ctx, BatchNormOptions{.channels = 8});
  m->add<ReLU>();
  m->add<MaxPool2D>();
  m->add<Flatten>();
  m->add<Dropout>(0.1f);
  m->add<Dense>(ctx, DenseOptions{.in_features = 8 * 4 * 4, .out_features = 4});
  m->initialize(ctx, seed);
  return m;
}

struct Trained {
  std::vector<double> losses;       // per epoch
  std::vector<double> eval_losses;  // per epoch
  std::vector<std::int64_t> eval_correct;
};

// Three epochs of the toy set through the runner with a real Trainer.
Trained train_with_runner(std::uint64_t seed, int threads) {
  HostRig rig(threads);
  auto model = small_cnn(rig.ctx, seed);
  Sgd sgd({.learning_rate = 0.05f});
  Trainer trainer(rig.ctx, *model, sgd);
  TrainerStep step(trainer);
  ToySource train(8, 16, 7), eval(4, 16, 8);
  EpochRunner runner(step, train, {.epochs = 3, .evaluation = &eval, .allocator = &rig.allocator});
  Trained t;
  for (const EpochReport& e : runner.run().per_epoch) {
    t.losses.push_back(e.train.mean_loss());
    t.eval_losses.push_back(e.evaluation->mean_loss());
    t.eval_correct.push_back(e.evaluation->correct);
  }
  return t;
}

// The reference: the same batches in the same order, stepped by hand.
Trained train_by_hand(std::uint64_t seed) {
  HostRig rig(1);
  auto model = small_cnn(rig.ctx, seed);
  Sgd sgd({.learning_rate = 0.05f});
  Trainer trainer(rig.ctx, *model, sgd);
  ToySource train(8, 16, 7), eval(4, 16, 8);
  Trained t;
  for (std::int64_t e = 0; e < 3; ++e) {
    BatchResult seen;
    for (std::int64_t i = 0; i < 8; ++i) {
      const TrainBatch b = train.batch_at((i + e) % 8);
      seen += trainer.step(b.data, b.labels);
    }
    BatchResult tested;
    for (std::int64_t i = 0; i < 4; ++i) {
      const TrainBatch b = eval.batch_at(i);
      tested += trainer.evaluate(b.data, b.labels);
    }
    t.losses.push_back(seen.mean_loss());
    t.eval_losses.push_back(tested.mean_loss());
    t.eval_correct.push_back(tested.correct);
  }
  return t;
}

TEST(EpochRunner, TrainsExactlyAsAHandWrittenLoopAndIsDeterministicForASeed) {
  const Trained reference = train_by_hand(3);
  const Trained a = train_with_runner(3, 1);
  EXPECT_EQ(a.losses, reference.losses);  // bit for bit: the runner adds no arithmetic
  EXPECT_EQ(a.eval_losses, reference.eval_losses);
  EXPECT_EQ(a.eval_correct, reference.eval_correct);
  EXPECT_LT(a.losses.back(), a.losses.front());  // it learns
  const Trained again = train_with_runner(3, 1);
  EXPECT_EQ(again.losses, a.losses);
  EXPECT_EQ(again.eval_losses, a.eval_losses);
  const Trained two_threads = train_with_runner(3, 2);
  EXPECT_EQ(two_threads.losses, a.losses);
  const Trained other_seed = train_with_runner(4, 1);
  EXPECT_NE(other_seed.losses, a.losses);
}

TEST(EpochRunner, PruningHookPrunesAfterEveryStepAndReportsTheSparsity) {
  HostRig rig;
  auto model = small_cnn(rig.ctx, 5);
  Sgd sgd({.learning_rate = 0.05f});
  Trainer trainer(rig.ctx, *model, sgd);
  TrainerStep step(trainer);
  // Masks recomputed at steps 0, 2, 4 and 6 (0-based), reaching 60% at step 6: the 7th step.
  const PolynomialDecay schedule{.final_sparsity = 0.6, .begin_step = 0, .end_step = 6, .frequency = 2};
  MagnitudePruner pruner(model->parameters(), schedule);
  PruningHook pruning(pruner, rig.ctx, model->parameters());
  ToySource train(4, 8, 7);
  EpochRunner runner(step, train, {.epochs = 2});
  runner.add_hook(pruning);
  const EpochReport first = runner.run_epoch();  // steps 0-3: last update at step 2
  ASSERT_TRUE(first.pruning.has_value());
  EXPECT_DOUBLE_EQ(first.pruning->target_sparsity, schedule.sparsity(2));
  EXPECT_DOUBLE_EQ(first.pruning->sparsity, measured_sparsity(rig.ctx, model->parameters()));
  EXPECT_GT(first.pruning->sparsity, 0.0);
  const EpochReport second = runner.run_epoch();  // steps 4-7: the final update at step 6
  EXPECT_DOUBLE_EQ(second.pruning->target_sparsity, 0.6);
  // Applied after every step, the masks hold the weights at the target: only the rounding of
  // each tensor's kept count separates the two.
  EXPECT_NEAR(second.pruning->sparsity, 0.6, 0.01);
}

TEST(EpochRunner, ProfilingHookMarksEveryStepAndTheEvaluation) {
  HostRig rig;
  auto model = small_cnn(rig.ctx, 5);
  Sgd sgd({.learning_rate = 0.05f});
  Profiler profiler(rig.allocator);
  Trainer trainer(rig.ctx, *model, sgd, {.profiler = &profiler});
  TrainerStep step(trainer);
  ToySource train(3, 8, 7), eval(1, 8, 8);
  ProfilingHook profiling(profiler, train);
  EpochRunner runner(step, train, {.epochs = 2, .evaluation = &eval});
  runner.add_hook(profiling);
  runner.run();
  ASSERT_EQ(profiler.steps().size(), 6u);
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(profiler.steps()[i].step, static_cast<std::int64_t>(i + 1));
  const ProfileSummary summary = profiler.summary();
  EXPECT_EQ(summary.peak_by_category[index_of(TensorCategory::kInputHost)], 1000u);  // the source's
  EXPECT_EQ(summary.peak_by_category[index_of(TensorCategory::kInputPinned)], 24u);
  const std::string trace = profiler.trace_json();
  std::size_t evaluations = 0;
  for (std::size_t at = trace.find("\"evaluate\""); at != std::string::npos; at = trace.find("\"evaluate\"", at + 1)) {
    ++evaluations;
  }
  EXPECT_EQ(evaluations, 2u);
}

}  // namespace
}  // namespace sluice::train
