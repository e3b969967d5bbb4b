// LoaderImpl: a built pipeline at run time, composed of parts that each own their state
// (docs/decisions/loader-parts.md):
//   SharedSlots      the batch ring, device delivery and the budget; batches share it
//   SampleSubmitter  which claimed samples run, under the in-flight limit
//   SampleTask       one sample on a worker: program, skip policy, skip log, workspaces
//   LoaderTuning     the knobs and the autotuner's periods
//   LoaderState      save and restore
// plus the caches, the sample program, the epoch order and the worker pool. The parts do not call
// each other: a part that fails says so in its return value, and this class, which calls them,
// decides what follows (a sample's error is kept with its batch, a failed copy too).
//
// Threads: issuing batches, waiting and epoch changes happen on the consumer's thread; workers
// run run_sample(); a Batch may be released on any thread (SharedSlots::recycle).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "runtime/executor.hpp"
#include "runtime/loader_state.hpp"
#include "runtime/loader_tuning.hpp"
#include "runtime/loader_memory_plan.hpp"
#include "runtime/sample_submitter.hpp"
#include "runtime/sample_task.hpp"
#include "runtime/shared_slots.hpp"
#include "sluice/memory/budget.hpp"
#include "sluice/pipeline/batch.hpp"
#include "sluice/pipeline/stats.hpp"
#include "sluice/runtime/loader.hpp"
#include "stages/cache/disk_cache.hpp"
#include "stages/source/epoch_order.hpp"
#include "stages/cache/memory_cache.hpp"
#include "stages/program/resolved_pipeline.hpp"

namespace sluice {

class LoaderImpl {
 public:
  explicit LoaderImpl(stages::ResolvedPipeline plan);
  // Stops the workers; batches the consumer still holds keep the shared slots alive.
  ~LoaderImpl();
  LoaderImpl(const LoaderImpl&) = delete;
  LoaderImpl& operator=(const LoaderImpl&) = delete;

  void start_epoch(std::int64_t epoch);
  // Waits for the epoch's next batch (in order unless unordered) and hands it over. False when
  // the epoch is complete. Rethrows a sample's error under OnError::kFail.
  bool next(Batch& out);

  std::int64_t samples_per_epoch() const { return order_.size(); }
  // Of a whole epoch; of the epoch in progress once one started (a resume at another world size
  // splits what was left anew).
  std::int64_t batches_per_epoch() const;
  // The host program's full batch (u8 NHWC when the device normalises).
  Shape batch_shape() const;
  std::vector<OutputDescription> outputs() const;
  Stats stats() const;

  std::vector<std::uint8_t> state() const;
  void restore(std::span<const std::uint8_t> state);
  std::int64_t resume_epoch() const { return state_.resume_epoch(); }

  const stages::Dataset& dataset() const { return plan_.dataset; }

  // Loader::cancel and Loader::set_wait_check. cancel() is the only member another thread may
  // call while the consumer runs.
  void cancel();
  void set_wait_check(std::function<bool()> check, std::chrono::milliseconds interval);

 private:
  MemoryBudget& budget() { return *shared_->budget; }
  runtime::BatchRing& ring() { return *shared_->ring; }
  const runtime::BatchRing& ring() const { return *shared_->ring; }
  void check_budget() const;
  void create_caches();
  void create_slots();

  static void run_sample_entry(void* self, std::int64_t slot, std::int64_t position);
  void run_sample(int slot, std::int64_t position);
  void finish_sample(runtime::BatchSlot& slot);
  // mixup() / cutmix() on a complete batch, on the worker that finished it.
  void mix_batch(runtime::BatchSlot& slot) const;
  int mix_classes() const;  // the soft labels' width; 0 without mixing
  void fetch_ahead(std::int64_t epoch, std::span<const stages::EpochSegment> done);
  void issue_batches();
  int wait_for_ready();
  void abandon_epoch();
  void tune();
  void apply(const runtime::TuningSettings& settings);

  // Declared first: destroyed last. Batches share it, so it may outlive this object.
  std::shared_ptr<runtime::SharedSlots> shared_;
  stages::ResolvedPipeline plan_;
  std::unique_ptr<stages::MemoryCacheStore> memory_cache_;
  std::unique_ptr<stages::DiskCacheStore> disk_cache_;
  std::unique_ptr<stages::SampleProgram> program_;
  runtime::LoaderMemoryPlan memory_plan_;
  int threads_ = 1;

  stages::EpochOrder order_;
  Reservation order_reservation_;           // the epoch order's index arrays
  Reservation items_reservation_;           // the item table (plan_.dataset.items)
  Reservation remote_reservation_;          // remote transfers' buffers (an epoch's fetch), for the loader's life
  Reservation resume_reservation_;          // the sample program's JPEG resume points, at most
  std::vector<std::int64_t> epoch_items_;   // (slice_.positions) item index per position of the slice
  stages::EpochSlice slice_;                // this rank's part of the epoch in progress
  std::int64_t early_epoch_ = -1;           // the epoch fetch_ahead() streams for, until an epoch starts
  double consumer_wait_seconds_ = 0;
  std::int64_t batches_done_ = 0;
  std::atomic<bool> cancel_requested_{false};  // set by cancel() on any thread, taken by next()
  std::function<bool()> wait_check_;           // set_wait_check(): polled while next() waits
  std::chrono::milliseconds wait_check_interval_{50};

  runtime::LoaderState state_;
  std::unique_ptr<runtime::LoaderTuning> tuning_;
  std::unique_ptr<runtime::SampleTask> task_;
  std::unique_ptr<runtime::SampleSubmitter> submitter_;

  // Declared last: destroyed first, so workers finish before the parts they use go.
  std::unique_ptr<runtime::Executor> executor_;
};

}  // namespace sluice
