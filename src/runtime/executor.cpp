// The oneTBB arena behind Executor.
//
// Two oneTBB details shape this file:
//  - the arena reserves no slot for an external thread (task_arena(n, 0)): the consumer never
//    joins it, so all n slots go to workers;
//  - oneTBB keeps (cores - 1) workers by default, expecting the main thread to help, so an arena
//    of n workers on n cores would get n - 1. A global_control raising max_allowed_parallelism to
//    n + 1 for the executor's lifetime lifts that. oneTBB applies the smallest of all live
//    global_control values, so a smaller limit the application sets itself still wins.
// Submissions are task_group tasks enqueued into the arena (enqueue(defer(...))), so wait_idle()
// waits on oneTBB's own count of live tasks: nothing of ours is touched after a task's last
// instruction, and destruction cannot race a finishing task.
#include "runtime/executor.hpp"

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <algorithm>

namespace sluice::runtime {

struct Executor::Impl {
  Impl(int threads, Handler h, void* c)
      : control(tbb::global_control::max_allowed_parallelism,
                static_cast<std::size_t>(std::max(threads + 1, tbb::info::default_concurrency()))),
        arena(threads, 0),
        handler(h),
        context(c) {}

  tbb::global_control control;
  tbb::task_arena arena;
  tbb::task_group group;
  Handler handler;
  void* context;
};

Executor::Executor(int threads, Handler handler, void* context)
    : impl_(std::make_unique<Impl>(threads, handler, context)), threads_(threads) {}

Executor::~Executor() { wait_idle(); }

void Executor::submit(std::int64_t a, std::int64_t b) {
  Impl* impl = impl_.get();
  impl->arena.enqueue(impl->group.defer([impl, a, b] { impl->handler(impl->context, a, b); }));
}

void Executor::wait_idle() {
  impl_->arena.execute([this] { impl_->group.wait(); });
}

int Executor::current_worker() {
  const int index = tbb::this_task_arena::current_thread_index();
  return index == tbb::task_arena::not_initialized ? -1 : index;
}

int Executor::available_cores() { return tbb::info::default_concurrency(); }

}  // namespace sluice::runtime
