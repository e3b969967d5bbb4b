// TransferRing: the batch ring of a pipeline that feeds a device. Each slot is a page-locked host
// buffer that batch assembly writes straight into, and the device memory the batch is copied to.
// A slot's life, with the calls that move it on:
//
//   begin_fill(s)     producer: the slot's previous copy has finished reading the host buffer
//                     (an event query; the host blocks only when the device is behind)
//   ...               workers write the batch into host_slot(s)
//   submit(s, bytes)  producer: on the copy stream, wait (device-side) until the previous
//                     consumer of the device memory is done, copy, optionally normalise on the
//                     device, record the slot's ready event. Returns at once.
//   hand_over(s, st)  consumer: its stream `st` waits for the ready event; the host does not
//   record_stream(s, x)  consumer, optional: the batch is also read on stream `x` (torch's
//                     current stream through DLPack): release records on `x` too
//   release(s, st)    consumer: records on `st` (and every recorded `x`) when it has finished
//                     with the device memory
//
// So a slot is reused only after the consumer released it and the work that used it finished,
// on whichever streams it ran, checked with events at reuse time, never with a host
// synchronisation per batch. With the host device the same calls run synchronously (memcpy, the
// CPU twin of the normalize kernel).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "sluice/detail/device/device_pool.hpp"
#include "sluice/detail/device/gpu_normalize.hpp"
#include "sluice/detail/device/pinned.hpp"
#include "sluice/device/stream.hpp"
#include "sluice/memory/budget.hpp"

namespace sluice {

struct TransferRingOptions {
  DeviceId device = host();
  int slots = 3;                     // prefetch + 2: the consumer's, one in flight, the rest filling
  std::size_t host_slot_bytes = 0;   // what the CPU writes per batch (data and labels), pinned
  std::size_t device_slot_bytes = 0; // device memory per batch; 0: host_slot_bytes
  PinnedOptions pinned{};
  DevicePool* pool = nullptr;        // where device memory comes from; nullptr: the ring's own
  StreamOptions copy_stream{};
  // When set, the ring's host bytes (footprint().host_bytes) are reserved from it as
  // MemoryUse::kPinned for the ring's lifetime; a ring that does not fit fails at construction
  // with kOutOfBudget and the numbers. Leave it null when the runtime's memory plan already
  // counts the ring. Device memory is the pool's to account, not the host budget's.
  MemoryBudget* budget = nullptr;
};

// Bytes a ring takes, for the memory budget (reserve before constructing).
struct TransferRingFootprint {
  std::uint64_t host_bytes = 0;    // page-locked host memory (ordinary memory for the host device)
  std::uint64_t device_bytes = 0;  // device memory (host memory for the host device)
};

// Normalise on the device after the copy: u8 HWC at device_slot + src_offset -> the
// normalizer's output at device_slot + dst_offset. The ranges must not overlap.
struct DeviceNormalizeStep {
  const GpuNormalizer* normalizer = nullptr;
  std::size_t src_offset = 0;
  std::size_t dst_offset = 0;
  int batch = 0;
  int height = 0;
  int width = 0;
};

struct TransferRingStats {
  std::uint64_t submitted = 0;
  std::uint64_t released = 0;
  std::uint64_t streams_recorded = 0;  // record_stream() calls
  std::uint64_t stream_waits = 0;      // device-side waits of copies on a consumer's release events
  std::uint64_t fill_polls = 0;  // begin_fill() calls
  std::uint64_t fill_waits = 0;  // ... that blocked the host (the device was behind the CPU)
  std::uint64_t bytes_copied = 0;
};

class TransferRing {
 public:
  // Slots start at multiples of this in both buffers.
  static constexpr std::size_t kSlotAlignment = 4096;

  static TransferRingFootprint footprint(const TransferRingOptions& options);

  // Allocates every slot up front. Throws sluice::Error: kInvalidArgument for bad options or an
  // unusable device, kOutOfBudget when memory runs out.
  explicit TransferRing(TransferRingOptions options);
  TransferRing(const TransferRing&) = delete;
  TransferRing& operator=(const TransferRing&) = delete;
  // Waits for the copy stream, then frees; the consumer must have released every slot whose
  // device memory it still reads.
  ~TransferRing();

  DeviceId device() const { return options_.device; }
  int slots() const { return options_.slots; }
  std::size_t host_slot_bytes() const { return options_.host_slot_bytes; }
  std::size_t device_slot_bytes() const { return options_.device_slot_bytes; }
  bool pinned() const { return host_.pinned(); }
  int numa_node() const { return host_.numa_node(); }
  Stream& copy_stream() { return copy_stream_; }

  std::span<std::uint8_t> host_slot(int slot);
  void* device_slot(int slot) const;
  const Event& ready_event(int slot) const;

  void begin_fill(int slot);
  // Throws sluice::Error on a CUDA error, including one kept from an earlier release().
  void submit(int slot, std::size_t bytes, const DeviceNormalizeStep* normalize = nullptr);
  void hand_over(int slot, Stream& consumer);
  // The slot's batch is read on `native_stream` too (a cudaStream_t of the ring's device; nullptr
  // is the legacy default stream), not only on the stream release() will be given: release()
  // then records on it as well, and the slot's next copy waits (on the device) for that record,
  // so work the consumer queued there before releasing is not overwritten. Repeats are free.
  // The stream must outlive the release. A no-op for a host ring. Throws
  // sluice::Error(kInvalidArgument) for a bad slot or a stream beyond the
  // kMaxConsumerStreams a batch may be recorded on.
  static constexpr std::size_t kMaxConsumerStreams = 4;
  void record_stream(int slot, void* native_stream);
  // Never throws (it runs in a Batch's destructor); a CUDA error is kept for the next submit().
  void release(int slot, Stream& consumer) noexcept;

  TransferRingStats stats() const;

 private:
  struct Slot;

  Slot& slot_at(int slot);
  const Slot& slot_at(int slot) const;

  TransferRingOptions options_;
  Reservation reservation_;  // the host bytes, when options_.budget is set
  std::size_t host_stride_ = 0;
  std::size_t device_stride_ = 0;
  std::unique_ptr<DevicePool> own_pool_;
  PinnedBuffer host_;
  DeviceBuffer device_;
  Stream copy_stream_;
  std::vector<std::unique_ptr<Slot>> slots_;

  std::atomic<std::uint64_t> submitted_{0};
  std::atomic<std::uint64_t> released_{0};
  std::atomic<std::uint64_t> fill_polls_{0};
  std::atomic<std::uint64_t> fill_waits_{0};
  std::atomic<std::uint64_t> bytes_copied_{0};
  std::atomic<std::uint64_t> streams_recorded_{0};
  std::atomic<std::uint64_t> stream_waits_{0};
  // Guards each slot's consumer streams and release records: record_stream() runs on any
  // consumer thread, release() on the one dropping the batch, submit() on the producer.
  std::mutex consumers_mutex_;
  std::mutex error_mutex_;
  std::string deferred_error_;  // from release(), thrown by the next submit()
};

}  // namespace sluice
