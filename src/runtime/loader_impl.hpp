// LoaderImpl: a built pipeline at run time. It owns the batch ring, the worker pool and one
// workspace per worker; the consumer's thread issues work a batch at a time as ring slots free
// up, workers run one fused task per sample straight into the slot, and the last sample of a
// batch to finish marks it ready.
//
// Threads: all issuing, waiting and epoch changes happen on the consumer's thread. Workers only
// touch their own workspace and their sample's part of a slot, then one atomic decrement. A
// Batch may be released from any thread: free slots travel through a lock-free queue.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "runtime/executor.hpp"
#include "sluice/memory/aligned_buffer.hpp"
#include "sluice/pipeline/batch.hpp"
#include "sluice/pipeline/stats.hpp"
#include "stages/epoch_order.hpp"
#include "stages/validate.hpp"

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

  std::int64_t samples_per_epoch() const { return order_.size(); }
  std::int64_t batches_per_epoch() const;
  Shape batch_shape() const;
  DType dtype() const { return plan_.program->dtype(); }
  Stats stats() const;

 private:
  enum SlotState : std::uint32_t { kFree, kFilling, kReady, kHeld };

  struct Slot {
    AlignedBuffer data;                 // (batch, sample...) in the program's dtype and layout
    std::vector<std::int32_t> labels;   // (batch)
    std::atomic<std::int32_t> remaining{0};
    std::atomic<std::uint32_t> state{kFree};
    std::int64_t epoch = -1;
    std::int64_t batch = -1;
    std::uint32_t generation = 0;       // generation_ when issued
    int size = 0;
    std::mutex error_mutex;             // taken only when a sample fails
    std::exception_ptr error;
    std::int64_t error_position = 0;
  };

  static void run_sample_entry(void* self, std::int64_t slot, std::int64_t position);
  void run_sample(int slot, std::int64_t position);
  void record_skip(const std::string& path, const std::string& cause);
  void record_error(Slot& slot, std::int64_t position, std::exception_ptr error);
  void finish_sample(Slot& slot);

  void issue_ready_batches();
  void abandon_epoch();
  void signal();

  stages::PipelinePlan plan_;
  const stages::SampleProgram& program_;
  std::size_t sample_bytes_ = 0;
  int threads_ = 1;

  stages::EpochOrder order_;
  std::vector<std::int64_t> epoch_items_;   // (samples_per_epoch) item index per output position
  std::int64_t epoch_ = -1;
  std::int64_t batches_ = 0;                // in this epoch
  std::int64_t next_issue_ = 0;             // next batch to issue
  std::int64_t next_return_ = 0;            // next batch to hand out (ordered)
  std::int64_t returned_ = 0;               // batches handed out this epoch
  std::vector<int> slot_of_batch_;          // (batches_) slot index or -1
  std::atomic<std::uint32_t> generation_{0};// bumped when an epoch is abandoned: stale tasks skip

  std::vector<std::unique_ptr<Slot>> slots_;
  struct FreeSlots;
  std::unique_ptr<FreeSlots> free_slots_;
  std::atomic<std::uint32_t> events_{0};    // bumped on every completion and recycle: the consumer waits on it

  std::vector<std::unique_ptr<stages::SampleProgram::Workspace>> workspaces_;  // (threads)

  mutable std::mutex skip_mutex_;
  std::int64_t skipped_ = 0;
  std::vector<SkippedSample> skipped_samples_;
  std::set<std::string> skipped_paths_;

  std::atomic<std::int64_t> samples_done_{0};
  std::int64_t batches_done_ = 0;
  double consumer_wait_seconds_ = 0;

  // Declared last: destroyed first, so workers finish before the slots and workspaces go.
  std::unique_ptr<runtime::Executor> executor_;
};

}  // namespace sluice
