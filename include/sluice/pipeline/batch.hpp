// Batch: what the consumer receives. It owns a slot of the pipeline's batch ring until it is
// destroyed (or release() is called); while a consumer holds batches, production of new ones
// waits for free slots rather than allocating: the consumer's pace is the pipeline's backpressure.
#pragma once

#include <cstdint>
#include <span>

#include "sluice/core/shape.hpp"

namespace sluice {

// Where a Batch returns its slot. Implemented by the runtime; the pipeline module only knows this
// interface, so it does not depend on the module that executes it.
class BatchRecycler {
 public:
  virtual void recycle(int slot) noexcept = 0;

 protected:
  ~BatchRecycler() = default;
};

class Batch {
 public:
  Batch() = default;
  Batch(TensorView data, std::span<const std::int32_t> labels, std::int64_t epoch,
        std::int64_t index, int slot, BatchRecycler* recycler)
      : data_(data), labels_(labels), epoch_(epoch), index_(index), slot_(slot),
        recycler_(recycler) {}
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;
  Batch(Batch&& other) noexcept { *this = std::move(other); }
  Batch& operator=(Batch&& other) noexcept {
    if (this != &other) {
      release();
      data_ = other.data_;
      labels_ = other.labels_;
      epoch_ = other.epoch_;
      index_ = other.index_;
      slot_ = other.slot_;
      recycler_ = other.recycler_;
      other.recycler_ = nullptr;
    }
    return *this;
  }
  ~Batch() { release(); }

  // (N, C, H, W) or (N, H, W, C) as the normalize stage chose; N is size().
  const TensorView& data() const { return data_; }
  std::span<const std::int32_t> labels() const { return labels_; }
  std::int64_t size() const { return static_cast<std::int64_t>(labels_.size()); }
  std::int64_t epoch() const { return epoch_; }
  std::int64_t index() const { return index_; }  // position of the batch in its epoch
  bool valid() const { return recycler_ != nullptr; }

  // Returns the slot now; the views are invalid afterwards.
  void release() noexcept {
    if (recycler_ != nullptr) {
      recycler_->recycle(slot_);
      recycler_ = nullptr;
    }
  }

 private:
  TensorView data_;
  std::span<const std::int32_t> labels_;
  std::int64_t epoch_ = 0;
  std::int64_t index_ = 0;
  int slot_ = -1;
  BatchRecycler* recycler_ = nullptr;
};

}  // namespace sluice
