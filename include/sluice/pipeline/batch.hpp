// Batch: what the consumer receives. It owns a slot of the pipeline's batch ring until it is
// destroyed (or release() is called); while a consumer holds batches, production of new ones
// waits for free slots rather than allocating: the consumer's pace is the pipeline's backpressure.
// Only the runtime makes batches; a consumer gets them from Loader::epoch() and may move them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "sluice/core/device_id.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/shape.hpp"

namespace sluice {

// Where a Batch returns its slot. Implemented by the runtime; the pipeline module only knows this
// interface, so it does not depend on the module that executes it.
class BatchRecycler {
 public:
  virtual void recycle(int slot) noexcept = 0;
  // The slot's device batch is read on `native_stream` too (Batch::record_stream): the runtime's
  // transfer ring records the release there as well (TransferRing::record_stream).
  virtual void record_stream(int slot, void* native_stream) = 0;

 protected:
  ~BatchRecycler() = default;
};

namespace runtime {
class BatchAccess;  // how the runtime makes batches (src/runtime/batch_access.hpp)
}

// A batch shares ownership of its loader's slots: it stays valid, and returns its slot safely,
// even when the Loader that produced it is destroyed first (the slot memory, the budget it is
// accounted in and the transfer ring then live until the last such batch is released).
class Batch {
 public:
  Batch() = default;
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;
  Batch(Batch&& other) noexcept { *this = std::move(other); }
  Batch& operator=(Batch&& other) noexcept {
    if (this != &other) {
      release();
      data_ = other.data_;
      labels_ = other.labels_;
      soft_labels_ = other.soft_labels_;
      epoch_ = other.epoch_;
      index_ = other.index_;
      padding_ = other.padding_;
      slot_ = other.slot_;
      recycler_ = std::move(other.recycler_);
      device_ = other.device_;
      device_data_ = other.device_data_;
      device_labels_ = other.device_labels_;
      device_soft_labels_ = other.device_soft_labels_;
      ready_event_ = other.ready_event_;
    }
    return *this;
  }
  ~Batch() { release(); }

  // (N, C, H, W) or (N, H, W, C) as the normalize stage chose; N is size().
  const TensorView& data() const { return data_; }
  std::span<const std::int32_t> labels() const { return labels_; }
  // With mixup() or cutmix(): the mixed one-hot labels, f32 (N, num_classes), which C and Python
  // export as the batch's labels (docs/decisions/batch-mix-labels.md); labels() keeps the classes.
  // Empty (data == nullptr) without them.
  const TensorView& soft_labels() const { return soft_labels_; }
  std::int64_t size() const { return static_cast<std::int64_t>(labels_.size()); }
  std::int64_t epoch() const { return epoch_; }
  std::int64_t index() const { return index_; }  // position of the batch in its epoch
  // The last padding() samples of the batch repeat earlier ones: with shard(rank, world) and
  // without drop_last, a rank short of samples at the end of an epoch pads its last batch so
  // every rank yields as many batches of the same size (docs/distributed.md). Stats never count
  // them as samples. 0 for every other batch.
  std::int64_t padding() const { return padding_; }
  bool valid() const { return recycler_ != nullptr; }

  // With to_device(): the batch on the device (normalised there when asked), its labels there,
  // and the event its copy recorded (a cudaEvent_t; the consumer's stream already waits on it,
  // other streams can wait too). data() then holds what was shipped, in page-locked memory.
  bool on_device() const { return device_data_.data != nullptr; }
  DeviceId device() const { return device_; }
  const TensorView& device_data() const { return device_data_; }
  const std::int32_t* device_labels() const { return device_labels_; }
  // With mixup() or cutmix() as well: soft_labels() on the device, shipped with the batch.
  const TensorView& device_soft_labels() const { return device_soft_labels_; }
  void* ready_event() const { return ready_event_; }

  // With to_device() on a CUDA device: the batch is read on `native_stream` (a cudaStream_t;
  // nullptr is the legacy default stream) besides the loader's consumer stream
  // (ToDeviceOptions::stream), as torch's Tensor.record_stream says of a tensor: once the batch is
  // released, its slot is refilled only after the work queued on that stream by then has run.
  // Call it before releasing, for every other stream that reads the batch (Python's
  // __dlpack__(stream) and the C API's sluice_batch_use_on_stream do); the stream must outlive
  // the release. It does not make the stream wait for the batch's copy: ready_event() is for
  // that. A no-op for a batch on the host. Throws sluice::Error(kInvalidArgument) for a released
  // batch, or for a fifth stream besides the loader's.
  void record_stream(void* native_stream) {
    if (recycler_ == nullptr) throw Error(ErrorCode::kInvalidArgument, "Batch::record_stream: the batch was released");
    if (on_device() && device_.is_cuda()) recycler_->record_stream(slot_, native_stream);
  }

  // Returns the slot now; the views are invalid afterwards.
  void release() noexcept {
    if (recycler_ != nullptr) {
      recycler_->recycle(slot_);
      recycler_.reset();  // the last holder of a destroyed loader's slots frees them here
    }
  }

 private:
  friend class runtime::BatchAccess;

  Batch(TensorView data, std::span<const std::int32_t> labels, std::int64_t epoch, std::int64_t index,
        std::int64_t padding, int slot, std::shared_ptr<BatchRecycler> recycler)
      : data_(data), labels_(labels), epoch_(epoch), index_(index), padding_(padding), slot_(slot),
        recycler_(std::move(recycler)) {}
  // Where the batch is on the device, for a pipeline with to_device().
  void set_device(DeviceId device, TensorView data, const std::int32_t* labels, void* ready_event) {
    device_ = device;
    device_data_ = data;
    device_labels_ = labels;
    ready_event_ = ready_event;
  }

  TensorView data_;
  std::span<const std::int32_t> labels_;
  TensorView soft_labels_;
  std::int64_t epoch_ = 0;
  std::int64_t index_ = 0;
  std::int64_t padding_ = 0;
  int slot_ = -1;
  std::shared_ptr<BatchRecycler> recycler_;
  DeviceId device_ = host();
  TensorView device_data_;
  const std::int32_t* device_labels_ = nullptr;
  TensorView device_soft_labels_;
  void* ready_event_ = nullptr;
};

}  // namespace sluice
