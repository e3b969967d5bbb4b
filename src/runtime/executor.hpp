// Executor: the worker pool, a oneTBB task arena (this is the only file pair that includes
// oneTBB; the header stays free of it). Work is submitted as (a, b) integer pairs handed to one
// handler fixed at construction, so a submission allocates nothing of ours and captures nothing
// that could dangle: the loader submits (slot, position) per sample.
#pragma once

#include <cstdint>
#include <memory>

namespace sluice::runtime {

class Executor {
 public:
  using Handler = void (*)(void* context, std::int64_t a, std::int64_t b);

  // threads >= 1 worker threads dedicated to this executor's arena.
  Executor(int threads, Handler handler, void* context);
  // Waits for every submitted call to return.
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Runs handler(context, a, b) on a worker, roughly in submission order. Fire and forget.
  void submit(std::int64_t a, std::int64_t b);
  // Blocks until every call submitted so far has returned.
  void wait_idle();

  int threads() const { return threads_; }
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
