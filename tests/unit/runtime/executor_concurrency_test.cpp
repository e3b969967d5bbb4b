// Each executor gets its own thread count, whatever other executors the process holds. Before,
// every executor held a process-wide oneTBB global_control at its threads + 1 and oneTBB applies
// the smallest live one, so a validation loader of 1 thread beside a training loader of 2 left
// the training loader one worker (7,050 -> 3,442 images/s in Python).
//
// Rates on a shared machine are noise, so the tests measure the thing a rate follows from: how
// many of an executor's tasks run at once. Every task of every executor waits at one rendezvous
// until all of them have arrived; that completes only if each executor runs as many tasks at once
// as it has threads, side by side with the others. A capped executor never completes it (the
// tasks give up after a timeout, and the test fails). Each task also counts how many of its own
// executor's tasks run with it, which must never exceed that executor's threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/executor.hpp"

namespace sluice::runtime {
namespace {

using namespace std::chrono_literals;

// Where every task of every executor meets.
struct Rendezvous {
  explicit Rendezvous(int total) : expected(total) {}
  // True when all `expected` tasks arrived within the timeout.
  bool arrive_and_wait() {
    std::unique_lock lock(mutex);
    ++arrived;
    wake.notify_all();
    return wake.wait_for(lock, 20s, [this] { return arrived >= expected; });
  }
  std::mutex mutex;
  std::condition_variable wake;
  int expected;
  int arrived = 0;
};

// One executor's tasks: each meets the others at the rendezvous and records the most of this
// executor's tasks it saw running at once.
struct Pool {
  Pool(int threads, Rendezvous& r) : rendezvous(r), executor(threads, &run, this) {}

  static void run(void* context, std::int64_t, std::int64_t) {
    auto* pool = static_cast<Pool*>(context);
    const int now = pool->running.fetch_add(1) + 1;
    int seen = pool->most_at_once.load();
    while (now > seen && !pool->most_at_once.compare_exchange_weak(seen, now)) {
    }
    if (!pool->rendezvous.arrive_and_wait()) pool->timed_out.fetch_add(1);
    pool->running.fetch_sub(1);
  }

  Rendezvous& rendezvous;
  std::atomic<int> running{0};
  std::atomic<int> most_at_once{0};
  std::atomic<int> timed_out{0};
  Executor executor;  // last: destroyed (waiting for its tasks) before the counters go
};

// Builds executors of `threads` in that order, gives each as many tasks as it has threads, and
// checks every one ran all of them at once, side by side.
void expect_each_gets_its_threads(const std::vector<int>& threads) {
  int total = 0;
  for (const int t : threads) total += t;
  Rendezvous rendezvous(total);
  std::vector<std::unique_ptr<Pool>> pools;
  for (const int t : threads) pools.push_back(std::make_unique<Pool>(t, rendezvous));
  for (auto& pool : pools) {
    for (int i = 0; i < pool->executor.threads(); ++i) pool->executor.submit(i, 0);
  }
  for (std::size_t i = 0; i < pools.size(); ++i) {
    pools[i]->executor.wait_idle();
    EXPECT_EQ(pools[i]->timed_out.load(), 0) << "executor " << i << " of " << threads[i] << " threads did not run them all at once";
    EXPECT_EQ(pools[i]->most_at_once.load(), threads[i]) << "executor " << i;
  }
}

TEST(ExecutorConcurrency, TwoExecutorsOfDifferentThreadsEachGetTheirOwn) {
  expect_each_gets_its_threads({2, 1});  // a training loader, then a validation loader
}

TEST(ExecutorConcurrency, ThreeExecutorsOfDifferentThreadsEachGetTheirOwn) {
  expect_each_gets_its_threads({3, 1, 2});
}

TEST(ExecutorConcurrency, AnExecutorNeverRunsMoreThanItsThreads) {
  // Twice its threads in tasks: the first `threads` meet at a rendezvous of `threads`, the rest
  // follow; no more than `threads` ever run at once, beside a larger executor.
  Rendezvous big_meeting(4);
  Pool big(4, big_meeting);
  Rendezvous small_meeting(1);
  Pool small(1, small_meeting);
  for (int i = 0; i < 4; ++i) big.executor.submit(i, 0);
  for (int i = 0; i < 3; ++i) small.executor.submit(i, 0);
  big.executor.wait_idle();
  small.executor.wait_idle();
  EXPECT_EQ(big.timed_out.load(), 0);
  EXPECT_EQ(big.most_at_once.load(), 4);
  EXPECT_EQ(small.most_at_once.load(), 1);
}

TEST(ExecutorConcurrency, ALimitLeftByADestroyedExecutorDoesNotCapTheOthers) {
  // Executors come and go (a validation loader per evaluation): the remaining ones keep theirs.
  { Rendezvous r(1); Pool gone(1, r); gone.executor.submit(0, 0); }
  expect_each_gets_its_threads({3});
  expect_each_gets_its_threads({2, 2});
}

}  // namespace
}  // namespace sluice::runtime
