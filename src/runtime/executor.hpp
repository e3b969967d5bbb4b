// Executor: the worker pool, a oneTBB task arena (this is the only file pair that includes
// oneTBB; the header stays free of it). Work is submitted as (a, b) integer pairs handed to one
// handler fixed at construction, so a submission allocates nothing of ours and captures nothing
// that could dangle: the loader submits (slot, position) per sample.
//
// NUMA: with WorkerPlacement::numa_node set (the loader sets the node its pinned ring's pages are
// on, which is only ever a node on a machine with more than one, for a device), a oneTBB
// task_scheduler_observer binds each worker to that node's CPUs when it enters the arena and
// gives it its previous affinity back when it leaves (oneTBB's workers serve every arena of the
// process). A thread waiting for the pool (wait_idle, the destructor) is never bound.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

namespace sluice::runtime {

struct WorkerPlacement {
  int numa_node = -1;  // the node the workers run on; -1: wherever the OS puts them
  // Restricts the calling thread to `node`'s CPUs; true when it did. Empty: the device module's
  // bind_current_thread_to_numa_node (a no-op on one node). Tests give one over a fake /sys.
  std::function<bool(int node)> bind;
};

class Executor {
 public:
  using Handler = void (*)(void* context, std::int64_t a, std::int64_t b);

  // threads >= 1 worker threads dedicated to this executor's arena, placed as `placement` says.
  Executor(int threads, Handler handler, void* context, WorkerPlacement placement = {});
  // Waits for every submitted call to return.
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Runs handler(context, a, b) on a worker, roughly in submission order. Fire and forget.
  void submit(std::int64_t a, std::int64_t b);
  // Blocks until every call submitted so far has returned, without running any of them itself.
  void wait_idle();

  int threads() const { return threads_; }
  // Times a worker entering the arena was bound to the placement's node (0 without one, and on a
  // machine with one node).
  std::int64_t numa_bindings() const;
  // The calling worker's index in the arena, or -1 off the pool: in [0, threads()), except that
  // oneTBB gives every arena at least two slots, so a one-thread pool may run in slot 1.
  static int current_worker();
  // Cores this process may use (oneTBB's default concurrency, which honours CPU affinity).
  static int available_cores();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int threads_;
};

}  // namespace sluice::runtime
