// SharedSlots: the part of a loader that its batches keep alive. A Batch holds a shared reference
// to it, so a batch the consumer still holds after destroying its Loader stays readable and
// returns its slot into living memory: the batch ring, the device delivery whose
// page-locked and device memory the ring's slots may be, and the memory budget both are
// accounted in (the loader's own, or its part of a training job's). Everything else (workers,
// caches, workspaces) goes with the Loader.
//
// Why shared ownership rather than an error when a loader dies with batches out: the C API and
// the Python module already let a batch (and a DLPack tensor made from it) outlive its loader
// handle, and a C++ consumer that keeps the last batch of a run past the loader's scope has done
// nothing a reader would call wrong. The cost is one atomic increment and decrement per batch.
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/batch_ring.hpp"
#include "runtime/device_delivery.hpp"
#include "sluice/memory/budget.hpp"
#include "sluice/pipeline/batch.hpp"

namespace sluice::runtime {

class SharedSlots final : public BatchRecycler {
 public:
  // `budget`: the loader's own (a part of a job's budget when it has one).
  explicit SharedSlots(std::shared_ptr<MemoryBudget> budget) : budget(std::move(budget)) {}

  // Any thread: the device memory is free for reuse once the consumer's stream is done with it
  // (an event, not a host wait), the slot at once.
  void recycle(int slot) noexcept override {
    if (device) device->release(slot);
    ring->recycle(slot);
  }
  // The batch is read on `native_stream` too (Batch::record_stream): the slot's release is
  // recorded there as well, so its next copy waits for that stream's work. Nothing on the host.
  void record_stream(int slot, void* native_stream) override {
    if (device) device->record_stream(slot, native_stream);
  }

  // Declared first: destroyed last, after everything that holds a reservation against it.
  std::shared_ptr<MemoryBudget> budget;
  std::unique_ptr<DeviceDelivery> device;  // to_device() through a transfer ring, else null
  // Made once the sample size is known; its slots may be the device delivery's memory.
  std::unique_ptr<BatchRing> ring;
};

}  // namespace sluice::runtime
