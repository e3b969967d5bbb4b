// The oneTBB arena behind Executor.
//
// Two oneTBB details shape this file:
//  - the arena reserves no slot for an external thread (task_arena(n, 0)): the consumer never
//    joins it, so all n slots go to workers;
//  - oneTBB keeps (cores - 1) workers by default, expecting the main thread to help, so an arena
//    of n workers on n cores would get n - 1. A global_control raising max_allowed_parallelism
//    lifts that. The control is process-wide and oneTBB applies the smallest live one, so one
//    control per executor capped every executor at the smallest one's threads (a training loader
//    of 2 beside a validation loader of 1 ran on one worker). The process therefore holds one
//    control (ParallelismLimit) at the sum of the live executors' threads + 1, replaced as
//    executors come and go; each executor's own limit is its arena's max_concurrency. A smaller
//    limit the application sets itself still wins.
// Submissions are task_group tasks enqueued into the arena (enqueue(defer(...))). wait_idle()
// waits on a count of our own, outside the arena: a thread waiting in the arena (execute() then
// task_group::wait) runs the arena's tasks itself, and oneTBB gives every arena at least two
// slots, so a one-thread executor ran two tasks at once while its owner waited (seen under TSan
// in CI). The destructor then also waits on oneTBB's own count of live tasks (no handler is left
// to run by then, so nobody joins), so destruction cannot race a task's last instructions.
#include "runtime/executor.hpp"

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>
#include <oneapi/tbb/task_scheduler_observer.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "sluice/detail/device/numa.hpp"

namespace sluice::runtime {
namespace {

// Binds the arena's workers to a NUMA node while they are in it (executor.hpp). The affinity a
// worker had on entry goes on a per-thread stack, tagged with the observer, and back on exit, so
// nested entries (a task that enters another arena) unwind in order. oneTBB forbids exceptions
// out of the callbacks: a failure only leaves the worker unbound. oneTBB sends no exit
// notification once observation stops, so the executor waits for its workers to leave the idle
// arena first (wait_for_workers_to_leave): a worker must not carry the binding into other arenas.
class NumaObserver final : public tbb::task_scheduler_observer {
 public:
  NumaObserver(tbb::task_arena& arena, int node, std::function<bool(int)> bind)
      : tbb::task_scheduler_observer(arena), node_(node), bind_(std::move(bind)) {
    observe(true);
  }
  ~NumaObserver() override { observe(false); }  // before the members the callbacks use go
  NumaObserver(const NumaObserver&) = delete;
  NumaObserver& operator=(const NumaObserver&) = delete;

  void on_scheduler_entry(bool is_worker) override {
    if (!is_worker) return;  // the destructor's last wait in the arena keeps its own affinity
    try {
      Entry entry{this, {}, false};
      entry.restore = sched_getaffinity(0, sizeof entry.mask, &entry.mask) == 0 && bind_(node_);
      entries().push_back(entry);
      inside_.fetch_add(1, std::memory_order_acq_rel);
      if (entry.restore) bindings_.fetch_add(1, std::memory_order_relaxed);
    } catch (...) {  // std::bad_alloc: this worker stays where it was
    }
  }

  void on_scheduler_exit(bool is_worker) override {
    std::vector<Entry>& stack = entries();
    if (!is_worker || stack.empty() || stack.back().owner != this) return;
    const Entry entry = stack.back();
    stack.pop_back();
    if (entry.restore) (void)sched_setaffinity(0, sizeof entry.mask, &entry.mask);
    inside_.fetch_sub(1, std::memory_order_acq_rel);
  }

  // Waits, at most `limit`, until no worker is in the arena (each left and got its affinity
  // back). An idle arena's workers leave within milliseconds.
  void wait_for_workers_to_leave(std::chrono::milliseconds limit) const {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (inside_.load(std::memory_order_acquire) > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  std::int64_t bindings() const { return bindings_.load(std::memory_order_relaxed); }

 private:
  struct Entry {
    const NumaObserver* owner;
    cpu_set_t mask;
    bool restore;  // bound on entry: put `mask` back on exit
  };
  static std::vector<Entry>& entries() {
    thread_local std::vector<Entry> stack;
    return stack;
  }

  int node_;
  std::function<bool(int)> bind_;
  std::atomic<std::int64_t> bindings_{0};
  std::atomic<int> inside_{0};  // workers between entry and exit
};

// The process-wide worker limit: enough workers for every live executor's arena at once (the
// sum of their threads; + 1 because oneTBB counts the main thread in the limit), never below
// oneTBB's default. Replacing the control makes a new one before dropping the old: while both
// live, the smaller applies, which is the old limit when growing and the new one when shrinking.
class ParallelismLimit {
 public:
  static void add(int threads) { instance().change(threads); }
  static void remove(int threads) { instance().change(-threads); }

 private:
  static ParallelismLimit& instance() {
    // Made while the first executor is constructed, so destroyed after every executor (static
    // ones included).
    static ParallelismLimit limit;
    return limit;
  }
  void change(int delta) {
    std::lock_guard lock(mutex_);
    total_ += delta;
    const auto wanted = static_cast<std::size_t>(std::max(total_ + 1, tbb::info::default_concurrency()));
    if (control_ && wanted == value_) return;
    std::unique_ptr<tbb::global_control> next;
    if (total_ > 0) next = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, wanted);
    control_ = std::move(next);
    value_ = wanted;
  }

  std::mutex mutex_;
  int total_ = 0;
  std::size_t value_ = 0;
  std::unique_ptr<tbb::global_control> control_;
};

// An executor's share of the limit, for its lifetime (declared before its arena).
struct ParallelismShare {
  explicit ParallelismShare(int t) : threads(t) { ParallelismLimit::add(threads); }
  ~ParallelismShare() { ParallelismLimit::remove(threads); }
  ParallelismShare(const ParallelismShare&) = delete;
  ParallelismShare& operator=(const ParallelismShare&) = delete;
  int threads;
};

}  // namespace

struct Executor::Impl {
  Impl(int threads, Handler h, void* c, WorkerPlacement placement)
      : share(threads),
        arena(threads, 0),
        handler(h),
        context(c) {
    // Observing before the first task is enqueued: every worker that ever joins is seen.
    if (placement.numa_node >= 0) {
      if (!placement.bind) placement.bind = &bind_current_thread_to_numa_node;
      numa.emplace(arena, placement.numa_node, std::move(placement.bind));
    }
  }

  ParallelismShare share;
  tbb::task_arena arena;
  std::optional<NumaObserver> numa;  // after the arena: stops observing before it goes
  tbb::task_group group;
  Handler handler;
  void* context;
  // Calls submitted and not yet returned; wait_idle() sleeps on `idle` until it is 0.
  std::mutex mutex;
  std::condition_variable idle;
  std::int64_t pending = 0;
};

Executor::Executor(int threads, Handler handler, void* context, WorkerPlacement placement)
    : impl_(std::make_unique<Impl>(threads, handler, context, std::move(placement))), threads_(threads) {}

Executor::~Executor() {
  wait_idle();
  impl_->arena.execute([this] { impl_->group.wait(); });  // oneTBB's last touches of the tasks
  if (impl_->numa) impl_->numa->wait_for_workers_to_leave(std::chrono::seconds(2));
}

void Executor::submit(std::int64_t a, std::int64_t b) {
  Impl* impl = impl_.get();
  {
    std::lock_guard lock(impl->mutex);
    ++impl->pending;
  }
  impl->arena.enqueue(impl->group.defer([impl, a, b] {
    // The count goes down under the lock and the waiter wakes before it is released, so a
    // wait_idle() that sees 0 cannot return (and the executor go) while this still touches it.
    // A guard, so a handler that throws (oneTBB then cancels the group) is still counted.
    struct Done {
      Impl* impl;
      ~Done() {
        std::lock_guard lock(impl->mutex);
        if (--impl->pending == 0) impl->idle.notify_all();
      }
    } done{impl};
    impl->handler(impl->context, a, b);
  }));
}

void Executor::wait_idle() {
  std::unique_lock lock(impl_->mutex);
  impl_->idle.wait(lock, [this] { return impl_->pending == 0; });
}

int Executor::current_worker() {
  const int index = tbb::this_task_arena::current_thread_index();
  return index == tbb::task_arena::not_initialized ? -1 : index;
}

int Executor::available_cores() { return tbb::info::default_concurrency(); }

std::int64_t Executor::numa_bindings() const { return impl_->numa ? impl_->numa->bindings() : 0; }

}  // namespace sluice::runtime
