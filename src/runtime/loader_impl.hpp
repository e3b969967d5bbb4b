// LoaderImpl: a built pipeline at run time. It owns the memory budget, the caches, the batch
// ring, the worker pool and one workspace per worker. The consumer's thread claims ring slots for
// batches as they free up; samples of claimed batches are submitted to the workers while fewer
// than `in_flight` are running (the limit the autotuner moves), and each finishing sample submits
// the next; the last sample of a batch to finish marks it ready.
//
// Threads: issuing batches, waiting and epoch changes happen on the consumer's thread. Workers
// touch their own workspace, their sample's part of a slot, and the short submission lock. A
// Batch may be released from any thread: free slots travel through a lock-free queue.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "runtime/autotuner.hpp"
#include "runtime/executor.hpp"
#include "runtime/memory_plan.hpp"
#include "sluice/device/gpu_normalize.hpp"
#include "sluice/device/stream.hpp"
#include "sluice/device/transfer_ring.hpp"
#include "sluice/memory/aligned_buffer.hpp"
#include "sluice/memory/budget.hpp"
#include "sluice/pipeline/batch.hpp"
#include "sluice/pipeline/stats.hpp"
#include "stages/disk_cache.hpp"
#include "stages/epoch_order.hpp"
#include "stages/memory_cache.hpp"
#include "stages/pipeline_plan.hpp"

namespace sluice {

class LoaderImpl final : public BatchRecycler {
 public:
  explicit LoaderImpl(stages::PipelinePlan plan);
  ~LoaderImpl();

  void start_epoch(std::int64_t epoch);
  // Waits for the epoch's next batch (in order unless unordered) and hands it over. False when
  // the epoch is complete. Rethrows a sample's error under OnError::kFail.
  bool next(Batch& out);

  void recycle(int slot) noexcept override;
  void record_stream(int slot, void* native_stream) override;

  std::int64_t samples_per_epoch() const { return order_.size(); }
  std::int64_t batches_per_epoch() const;
  Shape batch_shape() const;
  DType dtype() const { return program_->dtype(); }
  Stats stats() const;

  std::vector<std::uint8_t> state() const;
  void restore(std::span<const std::uint8_t> state);
  std::int64_t resume_epoch() const { return resume_epoch_ < 0 ? 0 : resume_epoch_; }

 private:
  enum SlotState : std::uint32_t { kFree, kFilling, kReady, kHeld };

  struct Slot {
    AlignedBuffer data;                 // (batch, sample...) in the program's dtype and layout
    std::vector<std::int32_t> labels;   // (batch)
    // Where workers write: data and labels above, or a slot of the transfer ring (to_device).
    std::uint8_t* data_ptr = nullptr;
    std::int32_t* labels_ptr = nullptr;
    int index = -1;                     // in slots_
    std::atomic<std::int32_t> remaining{0};
    std::atomic<std::uint32_t> state{kFree};
    std::int64_t epoch = -1;
    std::int64_t batch = -1;
    std::uint32_t generation = 0;       // generation_ when issued
    int size = 0;
    bool retire = false;                // the prefetch depth shrank: free it when it comes back
    std::mutex error_mutex;             // taken only when a sample fails
    std::exception_ptr error;
    std::int64_t error_position = 0;
  };

  static void run_sample_entry(void* self, std::int64_t slot, std::int64_t position);
  void run_sample(int slot, std::int64_t position);
  void record_skip(const std::string& path, const std::string& cause);
  void record_error(Slot& slot, std::int64_t position, std::exception_ptr error);
  void finish_sample(Slot& slot);

  bool add_slot(Reclaim reclaim);
  void setup_device();           // to_device: the transfer ring and its slots
  void ship(int slot);           // to_device: the slot's batch is complete, copy it
  void describe_device_batch(int slot, Batch& batch);
  void issue_ready_batches();
  void submit_samples();
  void abandon_epoch();
  void signal();
  void tune();
  void apply(const runtime::TuningSettings& settings);

  // Declared first: destroyed last, after everything that holds a reservation against it.
  MemoryBudget budget_;
  stages::PipelinePlan plan_;
  std::unique_ptr<stages::MemoryCacheStore> memory_cache_;
  std::unique_ptr<stages::DiskCacheStore> disk_cache_;
  std::unique_ptr<stages::SampleProgram> program_;
  runtime::MemoryPlan memory_plan_;
  std::size_t sample_bytes_ = 0;
  int threads_ = 1;

  stages::EpochOrder order_;
  Reservation order_reservation_;           // the epoch order's index arrays
  Reservation items_reservation_;           // the item table (plan_.dataset.items)
  std::vector<std::int64_t> epoch_items_;   // (samples_per_epoch) item index per output position
  std::int64_t epoch_ = -1;
  std::int64_t batches_ = 0;                // in this epoch
  std::int64_t next_issue_ = 0;             // next batch to claim a slot for
  std::int64_t next_return_ = 0;            // next batch to hand out (ordered)
  std::int64_t returned_ = 0;               // batches handed out this epoch
  std::vector<int> slot_of_batch_;          // (batches_) slot index or -1
  std::atomic<std::uint32_t> generation_{0};// bumped when an epoch is abandoned: stale tasks skip
  std::int64_t resume_epoch_ = -1;          // restore(): the epoch to start mid-way, and where
  std::int64_t resume_batch_ = 0;
  std::uint64_t fingerprint() const;

  std::vector<std::unique_ptr<Slot>> slots_;  // grows to the prefetch depth, up to kMaxSlots
  int live_slots_ = 0;                        // slots with memory (not retired)
  struct FreeSlots;
  std::unique_ptr<FreeSlots> free_slots_;
  std::atomic<std::uint32_t> events_{0};    // bumped on every completion and recycle: the consumer waits on it

  // Submission: samples of claimed batches go to the workers while fewer than in_flight_ run.
  std::mutex submit_mutex_;
  std::int64_t submitted_ = 0;              // positions [0, submitted_) of the epoch are submitted
  std::int64_t claimed_end_ = 0;            // positions [0, claimed_end_) have a slot
  std::atomic<std::int64_t> running_{0};    // submitted and not finished (written under the lock
                                            // when submitting, atomically when finishing)
  bool stopping_ = false;                   // the destructor runs: submit nothing
  std::atomic<int> in_flight_{1};
  std::atomic<int> prefetch_{1};

  std::vector<std::unique_ptr<stages::SampleProgram::Workspace>> workspaces_;  // (threads)

  mutable std::mutex skip_mutex_;
  std::int64_t skipped_ = 0;
  std::vector<SkippedSample> skipped_samples_;
  std::set<std::string> skipped_paths_;

  std::atomic<std::int64_t> samples_done_{0};
  std::int64_t batches_done_ = 0;
  double consumer_wait_seconds_ = 0;

  // Autotuning: measured on the consumer's thread every period.
  std::unique_ptr<runtime::Autotuner> autotuner_;
  std::chrono::steady_clock::time_point period_start_;
  std::int64_t period_batches_ = 0;
  double period_wait_ = 0;
  double period_busy_start_ = 0;

  // to_device: the ring owns the page-locked slots and their device twins.
  std::unique_ptr<TransferRing> ring_;
  std::unique_ptr<Stream> consumer_stream_;
  GpuNormalizer device_normalizer_;
  std::size_t ring_labels_bytes_ = 0;   // labels first in a ring slot, then the data
  std::size_t ring_output_offset_ = 0;  // normalize_on_device: where the device's output starts

  // Declared last: destroyed first, so workers finish before the slots and workspaces go.
  std::unique_ptr<runtime::Executor> executor_;
};

}  // namespace sluice
