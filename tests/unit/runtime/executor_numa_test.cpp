// The executor's NUMA placement (docs/device.md promised a task_scheduler_observer that
// binds the workers to the GPU's node; none existed). On this machine's one node the observer is
// harmless: workers keep the process's CPUs and nothing is bound. On a fake two-node /sys
// (node 1 = one CPU this process may use) every task runs on that node's CPU, the consumer thread
// that waits in the arena is not bound, and the workers get their CPUs back when they leave: an
// executor without placement afterwards runs on every CPU again. Without a placement there is no
// observer at all.
#include <gtest/gtest.h>

#include <sched.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "device/numa_detail.hpp"
#include "runtime/executor.hpp"
#include "sluice/device/numa.hpp"
#include "test_support.hpp"

namespace sluice::runtime {
namespace {

std::vector<int> my_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

// The CPUs each task ran with, and which threads ran them.
struct Recorder {
  std::mutex mutex;
  std::vector<std::vector<int>> masks;
  std::set<std::thread::id> threads;
  std::atomic<int> done{0};

  static void record(void* context, std::int64_t, std::int64_t) {
    auto* r = static_cast<Recorder*>(context);
    std::vector<int> cpus = my_cpus();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // long enough for every worker to take some
    std::lock_guard lock(r->mutex);
    r->masks.push_back(std::move(cpus));
    r->threads.insert(std::this_thread::get_id());
    r->done.fetch_add(1);
  }
};

constexpr int kTasks = 40;

// As the loader's consumer: it waits for the work without entering the arena (wait_idle() enters
// it and may run tasks itself, on its own unbound thread), then waits idle once all ran.
void run(Executor& e, Recorder& r) {
  for (int i = 0; i < kTasks; ++i) e.submit(i, 0);
  while (r.done.load() < kTasks) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  e.wait_idle();
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

TEST(ExecutorNuma, WithoutAPlacementNothingIsObservedOrBound) {
  const std::vector<int> all = my_cpus();
  Recorder r;
  {
    Executor e(2, &Recorder::record, &r);
    run(e, r);
    EXPECT_EQ(e.numa_bindings(), 0);
  }
  ASSERT_EQ(r.masks.size(), static_cast<std::size_t>(kTasks));
  for (const std::vector<int>& m : r.masks) EXPECT_EQ(m, all);
}

TEST(ExecutorNuma, APlacementIsHarmlessOnOneNode) {
  if (numa_node_count() > 1) GTEST_SKIP() << "a multi-node machine: the binding is real here";
  const std::vector<int> all = my_cpus();
  Recorder r;
  {
    // The observer is there (a node was given) and calls the real binder, which declines.
    Executor e(2, &Recorder::record, &r, WorkerPlacement{.numa_node = 0});
    run(e, r);
    EXPECT_EQ(e.numa_bindings(), 0);
  }
  ASSERT_EQ(r.masks.size(), static_cast<std::size_t>(kTasks));
  for (const std::vector<int>& m : r.masks) EXPECT_EQ(m, all) << "a worker lost CPUs on a one-node machine";
  EXPECT_EQ(my_cpus(), all);
}

TEST(ExecutorNuma, OnAFakeTwoNodeMachineWorkersRunOnTheNodeAndGetTheirCpusBack) {
  const std::vector<int> all = my_cpus();
  if (all.size() < 2) GTEST_SKIP() << "this process may use one CPU: no second node to bind to";
  test::TempDir sys;
  write_file(sys / "devices/system/node/online", "0-1\n");
  write_file(sys / "devices/system/node/node0/cpulist", std::to_string(all[0]) + "\n");
  write_file(sys / "devices/system/node/node1/cpulist", std::to_string(all[1]) + "\n");
  const std::string root = sys.path().string();
  // bind_current_thread_to_numa_node's steps, over the fake /sys.
  auto bind = [root](int node) {
    return device_detail::numa_node_count_in(root) > 1 &&
           device_detail::restrict_thread_to_cpus(device_detail::numa_node_cpus_in(root, node)) == 0;
  };
  Recorder placed;
  {
    Executor e(2, &Recorder::record, &placed, WorkerPlacement{.numa_node = 1, .bind = bind});
    run(e, placed);
    EXPECT_GE(e.numa_bindings(), 1);
    EXPECT_EQ(my_cpus(), all) << "the thread waiting in wait_idle() was bound";
  }
  ASSERT_EQ(placed.masks.size(), static_cast<std::size_t>(kTasks));
  for (const std::vector<int>& m : placed.masks) EXPECT_EQ(m, std::vector<int>{all[1]});
  std::printf("  %zu worker thread(s) ran on node 1 (CPU %d)\n", placed.threads.size(), all[1]);

  // oneTBB keeps its workers for the next arena: they must have left this one unbound.
  Recorder after;
  {
    Executor e(2, &Recorder::record, &after);
    run(e, after);
  }
  for (const std::vector<int>& m : after.masks) EXPECT_EQ(m, all) << "a worker kept the node binding";
}

}  // namespace
}  // namespace sluice::runtime
