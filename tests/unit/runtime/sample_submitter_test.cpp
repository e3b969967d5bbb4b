// SampleSubmitter alone, on a real Executor: every claimed position runs once, with the slot it
// was claimed for; never more than the in-flight limit run at once, at 1 and 4 workers; samples
// cancelled before submission are reported per slot; nothing is submitted after stop().
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/executor.hpp"
#include "runtime/sample_submitter.hpp"

namespace sluice::runtime {
namespace {

// Workers that record what they ran and how many ran at once, then count themselves out the way
// the loader's workers do.
struct Recorder {
  explicit Recorder(int in_flight) : submitter(in_flight) {}

  static void entry(void* self, std::int64_t slot, std::int64_t position) {
    auto* r = static_cast<Recorder*>(self);
    const int now = r->running.fetch_add(1) + 1;
    int seen = r->most.load();
    while (now > seen && !r->most.compare_exchange_weak(seen, now)) {
    }
    while (r->gate_closed.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    {
      std::lock_guard lock(r->mutex);
      r->ran.emplace_back(slot, position);
    }
    r->running.fetch_sub(1);
    r->done.fetch_add(1);
    if (r->submitter.finished_one()) r->submitter.submit();
  }
  void wait_for(int count) {
    while (done.load() < count) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  SampleSubmitter submitter;
  std::atomic<bool> gate_closed{false};  // workers wait here while it is set
  std::atomic<int> running{0};
  std::atomic<int> most{0};
  std::atomic<int> done{0};
  std::mutex mutex;
  std::vector<std::pair<std::int64_t, std::int64_t>> ran;  // (slot, position)
};

TEST(SampleSubmitter, EveryClaimedPositionRunsOnceWithItsSlotUnderTheLimit) {
  for (int threads : {1, 4}) {
    for (int limit : {1, 3, 8}) {
      Recorder r(limit);
      Executor executor(threads, &Recorder::entry, &r);
      r.submitter.attach(executor);
      r.submitter.reset(0);
      // Three batches of 5, 5 and 2 samples in slots 7, 2 and 4.
      r.submitter.claim(7, 0, 5);
      r.submitter.claim(2, 5, 5);
      r.submitter.claim(4, 10, 2);
      r.submitter.submit();
      r.wait_for(12);
      executor.wait_idle();
      std::sort(r.ran.begin(), r.ran.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
      ASSERT_EQ(r.ran.size(), 12u);
      for (std::int64_t p = 0; p < 12; ++p) {
        EXPECT_EQ(r.ran[static_cast<std::size_t>(p)].second, p);
        EXPECT_EQ(r.ran[static_cast<std::size_t>(p)].first, p < 5 ? 7 : p < 10 ? 2 : 4);
      }
      EXPECT_LE(r.most.load(), limit) << threads << " threads";
      EXPECT_EQ(r.submitter.running(), 0);
    }
  }
}

TEST(SampleSubmitter, ARaisedLimitRunsMoreAtOnce) {
  Recorder r(1);
  Executor executor(4, &Recorder::entry, &r);
  r.submitter.attach(executor);
  r.submitter.reset(0);
  r.submitter.set_in_flight(4);
  for (int b = 0; b < 8; ++b) r.submitter.claim(b % 8, b * 8, 8);
  r.submitter.submit();
  r.wait_for(64);
  executor.wait_idle();
  EXPECT_LE(r.most.load(), 4);
  EXPECT_GE(r.most.load(), 2);  // 64 samples of 200 us on four workers overlap
}

TEST(SampleSubmitter, CancelledSamplesAreReportedPerSlotAndNeverRun) {
  Recorder r(2);
  r.gate_closed = true;  // the workers hold the first two samples until the cancel is done
  Executor executor(2, &Recorder::entry, &r);
  r.submitter.attach(executor);
  r.submitter.reset(40);  // a restored epoch: positions before 40 are done
  r.submitter.claim(1, 40, 4);
  r.submitter.claim(3, 44, 4);
  r.submitter.submit();  // positions 40 and 41 are submitted; 42..47 wait for room
  const auto cancelled = r.submitter.cancel_unsubmitted();
  ASSERT_EQ(cancelled.size(), 2u);
  EXPECT_EQ(cancelled[0].slot, 1);
  EXPECT_EQ(cancelled[0].samples, 2);  // 42, 43
  EXPECT_EQ(cancelled[1].slot, 3);
  EXPECT_EQ(cancelled[1].samples, 4);  // 44..47
  r.gate_closed = false;
  r.wait_for(2);
  executor.wait_idle();  // the finishing workers found nothing more to submit
  std::sort(r.ran.begin(), r.ran.end());
  ASSERT_EQ(r.ran.size(), 2u);
  EXPECT_EQ(r.ran[0], (std::pair<std::int64_t, std::int64_t>{1, 40}));
  EXPECT_EQ(r.ran[1], (std::pair<std::int64_t, std::int64_t>{1, 41}));
}

TEST(SampleSubmitter, NothingIsSubmittedAfterStop) {
  Recorder r(4);
  Executor executor(2, &Recorder::entry, &r);
  r.submitter.attach(executor);
  r.submitter.reset(0);
  r.submitter.claim(0, 0, 4);
  r.submitter.stop();
  r.submitter.submit();
  executor.wait_idle();
  EXPECT_TRUE(r.ran.empty());
}

}  // namespace
}  // namespace sluice::runtime
