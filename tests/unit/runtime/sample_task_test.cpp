// SampleTask alone, run on executor workers as the loader runs it: a sample's pixels and label
// land where it is told; under kFail a bad file's error is returned (naming it), not logged;
// under kSkip the sample is replaced by another position of the epoch, the same one at any thread
// count, and logged as one file and one event per replacement; an unreadable data set and a
// cancelled budget are errors even under kSkip; the workspaces' memory is the budget's and goes
// back to it.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "pipeline_support.hpp"
#include "runtime/executor.hpp"
#include "runtime/sample_task.hpp"
#include "sluice/sluice.hpp"
#include "stages/program/resolved_pipeline.hpp"
#include "test_support.hpp"

namespace sluice::runtime {
namespace {

using test::TempDir;

// Coded items (pixels encode the label) planned as read().decode_jpeg().batch(4), u8 NHWC 24x16.
class SampleTaskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    items_ = test::make_coded_items(dir_.path(), 10);
    items_.push_back(Item{(dir_.path() / "missing.jpg").string(), 10});  // position 10: bad
  }
  stages::ResolvedPipeline plan(const std::vector<Item>& items) const {
    return stages::resolve_pipeline(Pipeline::from_items(items).read().decode_jpeg().batch(4).spec(), BuildOptions{});
  }

  // Runs `positions` of epoch `epoch` through a task of `threads` workers; each sample's bytes
  // and label, and each position's error (null when it succeeded).
  struct Run {
    std::vector<std::vector<std::uint8_t>> bytes;
    std::vector<std::int32_t> labels;
    std::vector<std::exception_ptr> errors;
  };
  static Run run(SampleTask& task, const stages::SampleProgram& program, const std::vector<std::int64_t>& epoch_items,
                 int threads, std::int64_t epoch) {
    struct Context {
      SampleTask* task;
      const std::vector<std::int64_t>* epoch_items;
      std::int64_t epoch;
      Run* out;
    };
    Run out;
    const std::size_t n = epoch_items.size();
    out.bytes.assign(n, std::vector<std::uint8_t>(program.sample_bytes()));
    out.labels.assign(n, -1);
    out.errors.assign(n, nullptr);
    Context context{&task, &epoch_items, epoch, &out};
    {
      Executor executor(threads, [](void* c, std::int64_t, std::int64_t position) {
        auto* ctx = static_cast<Context*>(c);
        const auto p = static_cast<std::size_t>(position);
        const auto real = static_cast<std::int64_t>(ctx->epoch_items->size());  // no padding
        ctx->out->errors[p] = ctx->task->run(ctx->epoch, position, *ctx->epoch_items, real,
                                             SampleTarget{ctx->out->bytes[p].data(), &ctx->out->labels[p]});
      }, &context);
      for (std::size_t p = 0; p < n; ++p) executor.submit(0, static_cast<std::int64_t>(p));
    }
    return out;
  }
  static std::vector<std::int64_t> identity(std::size_t n) {
    std::vector<std::int64_t> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::int64_t>(i);
    return v;
  }
  static int colour_index(const std::vector<std::uint8_t>& sample) {
    return test::index_of_colour(sample.data() + (8 * 24 + 12) * 3);  // the centre of a 24x16 RGB sample
  }

  TempDir dir_;
  std::vector<Item> items_;
};

TEST_F(SampleTaskTest, WritesEachSamplesPixelsAndLabelWhereItIsTold) {
  const auto p = plan(items_);
  stages::SampleProgram program(p.program);
  MemoryBudget budget(0);
  SampleTask task(program, p.dataset.items, budget, {.on_error = OnError::kFail, .threads = 2});
  const auto order = identity(10);  // the good ones
  const Run r = run(task, program, order, 2, 0);
  for (std::size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(r.errors[i], nullptr);
    EXPECT_EQ(r.labels[i], static_cast<std::int32_t>(i));
    EXPECT_EQ(colour_index(r.bytes[i]), static_cast<int>(i));
  }
  Stats stats;
  task.add_stats(stats);
  EXPECT_EQ(stats.samples, 10);
  ASSERT_EQ(stats.stages.size(), 4u);
  EXPECT_EQ(stats.stages[0].items, 10);  // read
  EXPECT_EQ(stats.skipped, 0);
}

TEST_F(SampleTaskTest, UnderFailABadFileIsReturnedNamingItAndNotLogged) {
  const auto p = plan(items_);
  stages::SampleProgram program(p.program);
  MemoryBudget budget(0);
  SampleTask task(program, p.dataset.items, budget, {.on_error = OnError::kFail, .threads = 1});
  const Run r = run(task, program, identity(11), 1, 0);
  ASSERT_NE(r.errors[10], nullptr);
  try {
    std::rethrow_exception(r.errors[10]);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_EQ(e.path(), items_[10].path);
  }
  for (std::size_t i = 0; i < 10; ++i) EXPECT_EQ(r.errors[i], nullptr);
  EXPECT_EQ(task.skips().files(), 0);
  EXPECT_EQ(task.skips().events(), 0);
}

TEST_F(SampleTaskTest, UnderSkipABadFileIsReplacedTheSameWayAtAnyThreadCountAndLogged) {
  const auto p = plan(items_);
  stages::SampleProgram program(p.program);
  std::vector<Run> runs;
  for (int threads : {1, 2, 4}) {
    MemoryBudget budget(0);
    SampleTask task(program, p.dataset.items, budget, {.on_error = OnError::kSkip, .skip_key = 77, .threads = threads});
    runs.push_back(run(task, program, identity(11), threads, 3));
    const Run& r = runs.back();
    EXPECT_EQ(r.errors[10], nullptr);
    EXPECT_NE(r.labels[10], 10);  // another position's item, with its own label and pixels
    EXPECT_EQ(colour_index(r.bytes[10]), r.labels[10]);
    EXPECT_EQ(task.skips().files(), 1);
    EXPECT_EQ(task.skips().events(), 1);
    Stats stats;
    task.add_stats(stats);
    EXPECT_EQ(stats.skipped, 1);
    EXPECT_EQ(stats.skip_events, 1);
    ASSERT_EQ(stats.skipped_samples.size(), 1u);
    EXPECT_EQ(stats.skipped_samples[0].path, items_[10].path);
  }
  EXPECT_EQ(runs[1].labels, runs[0].labels);
  EXPECT_EQ(runs[2].labels, runs[0].labels);
  EXPECT_EQ(runs[1].bytes, runs[0].bytes);
}

TEST_F(SampleTaskTest, AnUnreadableDataSetIsAnErrorEvenUnderSkip) {
  std::vector<Item> bad;
  for (int i = 0; i < 5; ++i) bad.push_back(Item{(dir_.path() / ("gone-" + std::to_string(i) + ".jpg")).string(), i});
  bad.insert(bad.begin(), items_[0]);  // resolve_pipeline probes the first file for the sample size
  const auto p = plan(bad);
  stages::SampleProgram program(p.program);
  MemoryBudget budget(0);
  SampleTask task(program, p.dataset.items, budget, {.on_error = OnError::kSkip, .threads = 1});
  // Every position names a bad file: replacements can never succeed.
  const std::vector<std::int64_t> order{1, 2, 3, 4, 5};
  const Run r = run(task, program, order, 1, 0);
  ASSERT_NE(r.errors[0], nullptr);
  try {
    std::rethrow_exception(r.errors[0]);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
    EXPECT_NE(std::string(e.what()).find("64 replacements"), std::string::npos) << e.what();
  }
  EXPECT_EQ(task.skips().files(), 5);
  EXPECT_EQ(task.skips().events(), 5 * SampleTask::kMaxReplacements);
}

TEST_F(SampleTaskTest, WorkspacesHoldTheBudgetsMemoryAndGiveItBack) {
  const auto p = plan(items_);
  stages::SampleProgram program(p.program);
  MemoryBudget budget(0);
  {
    SampleTask task(program, p.dataset.items, budget, {.on_error = OnError::kFail, .threads = 2});
    run(task, program, identity(10), 2, 0);
    EXPECT_GT(budget.used(MemoryUse::kReadBuffers), 0u);
    EXPECT_GT(budget.used(MemoryUse::kDecodeBuffers), 0u);
    // Two workspaces, each holding at most one 24x16 file and its decode: a few pages each.
    EXPECT_LT(budget.used(), 2u * 256 * 1024);
  }
  EXPECT_EQ(budget.used(), 0u);
}

TEST_F(SampleTaskTest, ACancelledBudgetIsAnErrorEvenUnderSkip) {
  // The loader cancels its budget when it is destroyed: a sample that needs memory then fails
  // with kCancelled, which replacing it cannot cure, so it is not logged as a skip.
  const auto p = plan(items_);
  stages::SampleProgram program(p.program);
  MemoryBudget budget(0);
  budget.cancel();
  SampleTask task(program, p.dataset.items, budget, {.on_error = OnError::kSkip, .threads = 1});
  const Run r = run(task, program, identity(1), 1, 0);
  ASSERT_NE(r.errors[0], nullptr);
  try {
    std::rethrow_exception(r.errors[0]);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCancelled) << e.what();
  }
  EXPECT_EQ(task.skips().events(), 0);
}

TEST(SkipLog, EachFileOnceWithItsFirstCauseAndEveryEvent) {
  SkipLog log;
  log.record("a.jpg", "truncated");
  log.record("b.jpg", "empty");
  log.record("a.jpg", "something else");
  Stats stats;
  log.add_stats(stats);
  EXPECT_EQ(stats.skipped, 2);
  EXPECT_EQ(stats.skip_events, 3);
  ASSERT_EQ(stats.skipped_samples.size(), 2u);
  EXPECT_EQ(stats.skipped_samples[0].path, "a.jpg");
  EXPECT_EQ(stats.skipped_samples[0].cause, "truncated");
  EXPECT_EQ(stats.skipped_samples[1].path, "b.jpg");
}

}  // namespace
}  // namespace sluice::runtime
