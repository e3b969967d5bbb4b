// BatchAccess: the runtime's way to make a Batch and to say where it is on the device. Batch's
// constructor and set_device are private so that users cannot forge a batch or point one at
// memory the loader does not own; this class, known only inside src/runtime, is their friend.
#pragma once

#include <memory>
#include <span>

#include "sluice/pipeline/batch.hpp"

namespace sluice::runtime {

class BatchAccess {
 public:
  static Batch make(TensorView data, std::span<const std::int32_t> labels, std::int64_t epoch, std::int64_t index,
                    std::int64_t padding, int slot, std::shared_ptr<BatchRecycler> recycler) {
    return Batch(data, labels, epoch, index, padding, slot, std::move(recycler));
  }
  static void set_device(Batch& batch, DeviceId device, TensorView data, const std::int32_t* labels,
                         void* ready_event) {
    batch.set_device(device, data, labels, ready_event);
  }
  static void set_soft_labels(Batch& batch, TensorView soft_labels) { batch.soft_labels_ = soft_labels; }
  static void set_device_soft_labels(Batch& batch, TensorView soft_labels) { batch.device_soft_labels_ = soft_labels; }
};

}  // namespace sluice::runtime
