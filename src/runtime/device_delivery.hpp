// DeviceDelivery: a pipeline with to_device(). Its batches are assembled in the page-locked slots
// of a TransferRing, copied on the ring's stream once complete (optionally normalised on the
// device), handed to the consumer's stream with an event, and given back when the consumer's
// stream is done with them. This is the only part of the loader that calls the TransferRing;
// the batch ring sees its slots as memory it does not own.
//
// A ring slot's life, in the calls the loader makes: begin_fill (before workers write into it),
// ship (its last sample finished), hand_over (the consumer gets it), record_stream (optional: the
// consumer reads it on another stream too), release (its Batch let go).
// Threads: begin_fill and hand_over on the consumer's thread, ship on the worker that finished
// the batch, record_stream and release wherever the Batch is used and released.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>

#include "sluice/detail/device/gpu_normalize.hpp"
#include "sluice/device/stream.hpp"
#include "sluice/detail/device/transfer_ring.hpp"
#include "sluice/memory/budget.hpp"
#include "sluice/pipeline/batch.hpp"
#include "stages/program/resolved_pipeline.hpp"

namespace sluice::runtime {

class DeviceDelivery {
 public:
  // True when the plan's batches go through a transfer ring: to_device(cuda(i)), or to_device(host())
  // with stage_through_ring.
  static bool wanted(const stages::ResolvedPipeline& plan);

  // Allocates the ring (`slots` slots) and its page-locked memory, reserved from `budget`, and its
  // device memory from `device_budget` when given (kDeviceBatches: a training job's device side).
  // Throws sluice::Error when the device is unusable or the memory does not fit.
  DeviceDelivery(const stages::ResolvedPipeline& plan, const stages::SampleProgram& program, int slots,
                 MemoryBudget& budget, MemoryBudget* device_budget = nullptr);
  DeviceDelivery(const DeviceDelivery&) = delete;
  DeviceDelivery& operator=(const DeviceDelivery&) = delete;

  int slots() const { return ring_->slots(); }
  // The NUMA node of the page-locked slots (-1 where unknown, or on a one-node machine): the
  // workers that write them run there.
  int numa_node() const { return ring_->numa_node(); }
  // Where workers write a slot's batch: its labels and its samples; and, with mixup() or
  // cutmix(), where the batch's soft labels and the mix's scratch go (null without them).
  std::int32_t* host_labels(int slot);
  std::uint8_t* host_data(int slot);
  std::byte* host_mix(int slot);

  // The slot's previous copy has finished reading its host memory.
  void begin_fill(int slot);
  // Copies the slot's first `samples` samples, their labels and soft labels (and normalises them)
  // on the ring's stream. Returns null, or the error for the batch's consumer.
  std::exception_ptr ship(int slot, int samples) noexcept;
  // The consumer's stream waits for the copy; `batch` gets the device view of the slot.
  void hand_over(int slot, int samples, Batch& batch);
  // The consumer reads the slot's batch on `native_stream` as well as on its own stream:
  // release() then records there too (TransferRing::record_stream). Any consumer thread; throws
  // sluice::Error(kInvalidArgument) beyond TransferRing::kMaxConsumerStreams streams.
  void record_stream(int slot, void* native_stream);
  // The consumer's stream is done with the slot once its work so far has run (an event, not a
  // host wait).
  void release(int slot) noexcept;

  TransferRingStats transfer_stats() const { return ring_->stats(); }

 private:
  spec::ToDevice to_;
  NormalizeOptions device_normalize_;
  DType dtype_;
  Shape sample_shape_;
  Size2 output_;
  int channels_ = 3;
  std::size_t sample_bytes_ = 0;
  std::size_t labels_bytes_ = 0;   // labels first in a ring slot (rounded to 256 bytes)
  int mix_classes_ = 0;            // mixup() / cutmix(): the soft labels' width, else 0
  std::size_t mix_bytes_ = 0;      // then their soft labels and scratch (rounded), if any
  std::size_t data_offset_ = 0;    // then the data
  std::size_t output_offset_ = 0;  // normalize_on_device: where the device's output starts
  GpuNormalizer normalizer_;
  Reservation device_reservation_;  // the ring's device memory in the job's device budget
  std::unique_ptr<TransferRing> ring_;
  std::unique_ptr<Stream> consumer_stream_;
};

}  // namespace sluice::runtime
