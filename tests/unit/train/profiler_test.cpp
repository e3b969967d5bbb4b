// The memory profiler: the allocator's observer hook changes nothing when unset or set, the
// profiler's counters agree with the allocator's stats, per-step peaks, external samples, and the
// Chrome trace is valid JSON with one counter track per category and the step slices.
#include "sluice/train/profiler.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "allocator_test_support.hpp"
#include "sluice/core/error.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/train_config.hpp"
#include "sluice/train/trainer.hpp"

namespace sluice::train {
namespace {

using test::FakeBacking;

// A fixed mix of allocations and frees over every allocator category.
void workload(Allocator& a) {
  std::vector<void*> live;
  const TensorCategory cats[] = {TensorCategory::kWeights, TensorCategory::kGradients, TensorCategory::kOptimizerState,
                                 TensorCategory::kActivations, TensorCategory::kWorkspace};
  for (int i = 0; i < 200; ++i) {
    live.push_back(a.allocate(static_cast<std::size_t>(1000 + 37 * i * i % 70000), cats[i % 5]));
    if (i % 3 == 2) {
      a.deallocate(live[static_cast<std::size_t>(i) / 2]);
      live[static_cast<std::size_t>(i) / 2] = nullptr;
    }
  }
  for (void* p : live) a.deallocate(p);
}

void expect_same_stats(const AllocatorStats& x, const AllocatorStats& y) {
  EXPECT_EQ(x.in_use_bytes, y.in_use_bytes);
  EXPECT_EQ(x.peak_in_use_bytes, y.peak_in_use_bytes);
  EXPECT_EQ(x.reserved_bytes, y.reserved_bytes);
  EXPECT_EQ(x.total_allocations, y.total_allocations);
  EXPECT_EQ(x.regions, y.regions);
  EXPECT_EQ(x.largest_free_block, y.largest_free_block);
  for (std::size_t i = 0; i < kTensorCategoryCount; ++i) {
    EXPECT_EQ(x.by_category[i].peak_in_use_bytes, y.by_category[i].peak_in_use_bytes) << i;
  }
}

TEST(Profiler, AnObserverUnsetOrSetChangesNothingTheAllocatorDoes) {
  Allocator plain(FakeBacking::make());
  workload(plain);
  Allocator observed(FakeBacking::make());
  {
    Profiler p(observed);
    workload(observed);
  }
  observed.check_invariants();
  expect_same_stats(plain.stats(), observed.stats());
  // Detached: later events reach no one (the profiler is gone; a dangling call would crash).
  workload(observed);
}

TEST(Profiler, PeaksMatchTheAllocatorsStats) {
  Allocator a(FakeBacking::make());
  void* w = a.allocate(4096, TensorCategory::kWeights);  // before the profiler: its starting point
  Profiler p(a);
  workload(a);
  const AllocatorStats s = a.stats();
  const ProfileSummary sum = p.summary();
  EXPECT_EQ(sum.peak_in_use_bytes, s.peak_in_use_bytes);
  EXPECT_EQ(sum.peak_reserved_bytes, s.reserved_bytes);
  for (std::size_t i = 0; i < kTensorCategoryCount; ++i) {
    EXPECT_EQ(sum.peak_by_category[i], s.by_category[i].peak_in_use_bytes) << i;
  }
  EXPECT_EQ(sum.events, 2 * 200u);
  EXPECT_EQ(sum.dropped_samples, 0u);
  a.deallocate(w);
}

TEST(Profiler, StepPeaksAndExternalSamples) {
  Allocator a(FakeBacking::make());
  Profiler p(a);
  void* keep = a.allocate(1 << 20, TensorCategory::kWeights);
  p.begin_step(1);
  void* act = a.allocate(3 << 20, TensorCategory::kActivations);
  p.begin("forward");
  a.deallocate(act);
  p.end();
  p.end_step();
  p.begin_step(2);
  void* act2 = a.allocate(1 << 20, TensorCategory::kActivations);
  a.deallocate(act2);
  p.end_step();
  p.sample(TensorCategory::kInputHost, 12345);
  p.sample(TensorCategory::kInputPinned, 777);
  p.sample(TensorCategory::kInputHost, 100);
  ASSERT_EQ(p.steps().size(), 2u);
  EXPECT_EQ(p.steps()[0].peak_in_use_bytes, std::uint64_t{4} << 20);
  EXPECT_EQ(p.steps()[0].peak_by_category[index_of(TensorCategory::kActivations)], std::uint64_t{3} << 20);
  EXPECT_EQ(p.steps()[1].peak_in_use_bytes, std::uint64_t{2} << 20);
  EXPECT_EQ(p.steps()[1].peak_by_category[index_of(TensorCategory::kWeights)], std::uint64_t{1} << 20);
  const ProfileSummary s = p.summary();
  EXPECT_EQ(s.peak_by_category[index_of(TensorCategory::kInputHost)], 12345u);
  EXPECT_EQ(s.peak_by_category[index_of(TensorCategory::kInputPinned)], 777u);
  EXPECT_EQ(s.peak_in_use_bytes, a.stats().peak_in_use_bytes);  // the input is outside the allocator
  EXPECT_NE(p.summary_table().find("reserved, peak"), std::string::npos);
  EXPECT_THROW(p.end_step(), Error);
  a.deallocate(keep);
}

TEST(Profiler, TheTraceIsChromeTraceJsonWithATrackPerCategory) {
  Allocator a(FakeBacking::make());
  Profiler p(a);
  p.begin_step(1);
  workload(a);
  p.end_step();
  p.sample(TensorCategory::kInputHost, 5000);
  const nlohmann::json j = nlohmann::json::parse(p.trace_json());  // throws when not JSON
  ASSERT_TRUE(j["traceEvents"].is_array());
  std::set<std::string> counters;
  int slices = 0;
  std::uint64_t last_in_use = 0;
  double last_ts = -1;
  for (const auto& e : j["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "C") {
      counters.insert(e["name"].get<std::string>());
      ASSERT_TRUE(e["args"]["bytes"].is_number_unsigned());
      ASSERT_GE(e["ts"].get<double>(), last_ts);  // in time order
      last_ts = e["ts"].get<double>();
      if (e["name"] == Profiler::track_name(Profiler::kInUseTrack)) last_in_use = e["args"]["bytes"];
    } else if (ph == "X") {
      ++slices;
      EXPECT_EQ(e["name"], "step 1");
      EXPECT_GE(e["dur"].get<double>(), 0.0);
    }
  }
  for (std::size_t t = 0; t < Profiler::kTrackCount; ++t) {
    if (t == index_of(TensorCategory::kInputPinned)) continue;  // never sampled here
    EXPECT_TRUE(counters.count(Profiler::track_name(t))) << Profiler::track_name(t);
  }
  EXPECT_EQ(slices, 1);
  EXPECT_EQ(last_in_use, a.stats().in_use_bytes);  // the track ends where the allocator is
}

TEST(Profiler, TheTrainerMarksForwardBackwardAndOptimizerInsideEachStep) {
  Allocator a(host());
  Context ctx(a, ContextOptions{.threads = 1});
  Profiler p(a);
  TrainSetup s = make_training(ctx, TrainConfig{.model = "fashion-cnn", .batch = 2});
  s.trainer.profiler = &p;
  Trainer trainer(ctx, *s.model, *s.optimizer, s.trainer);
  std::vector<float> x(2 * 28 * 28, 0.0f);
  std::vector<std::int32_t> y{1, 2};
  for (int i = 1; i <= 2; ++i) {
    p.begin_step(i);
    trainer.step(TensorView{x.data(), DType::kF32, Shape{2, 1, 28, 28}}, y, host());
    p.end_step();
  }
  const nlohmann::json j = nlohmann::json::parse(p.trace_json());
  std::vector<std::string> names;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X") names.push_back(e["name"]);
  }
  const std::vector<std::string> expected{"step 1", "forward", "backward", "optimizer",
                                          "step 2", "forward", "backward", "optimizer"};
  EXPECT_EQ(names, expected);
  EXPECT_EQ(p.steps()[1].peak_in_use_bytes, a.stats().peak_in_use_bytes);  // step 2 has the optimizer state
}

TEST(Profiler, BeyondMaxSamplesPeaksStayExact) {
  Allocator a(FakeBacking::make());
  Profiler p(a, ProfilerOptions{.max_samples = 50});
  workload(a);
  const ProfileSummary s = p.summary();
  EXPECT_EQ(s.samples, 50u);
  EXPECT_GT(s.dropped_samples, 0u);
  EXPECT_EQ(s.peak_in_use_bytes, a.stats().peak_in_use_bytes);
}

}  // namespace
}  // namespace sluice::train
