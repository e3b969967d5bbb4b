// Tensor: the training core's dense, row-major n-dimensional array. A tensor either owns a block
// of the training allocator (reference-counted: the block goes back to the allocator when the
// last Tensor sharing it is destroyed) or views memory someone else owns (a sluice batch's data
// and labels, on the host or a device). Either way it carries its shape, element type, device
// and a TensorCategory, so the allocator's statistics and the profiler can say what every byte
// is for (weights, gradients, optimizer state, activations, workspace, input).
//
// Copying a Tensor shares its storage (like torch.Tensor or a shared_ptr); it never copies
// elements. Element access is for host tensors only: device memory is reached through ops
// (sluice/train/ops.hpp), which take the device from the tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "sluice/core/device_id.hpp"
#include "sluice/core/dtype.hpp"
#include "sluice/core/shape.hpp"
#include "sluice/train/category.hpp"

namespace sluice {
class Allocator;
}  // namespace sluice

namespace sluice::train {

class Tensor {
 public:
  // An undefined tensor: no storage, rank 0 shape, defined() is false.
  Tensor() = default;

  // New storage for `shape` x `dtype` from `allocator`, on its device, accounted to `category`.
  // The contents are uninitialised. Throws sluice::OutOfMemory when the allocator cannot
  // provide the block. The allocator must outlive the tensor (and every copy of it).
  Tensor(Allocator& allocator, const Shape& shape, DType dtype, TensorCategory category);

  // A non-owning view of `data` (host or device memory, row-major `shape` x `dtype`). The
  // memory must outlive the view and its copies; nothing is freed when they go.
  static Tensor wrap(void* data, const Shape& shape, DType dtype, DeviceId device = host(),
                     TensorCategory category = TensorCategory::kInputHost);
  static Tensor wrap(const TensorView& view, DeviceId device = host(),
                     TensorCategory category = TensorCategory::kInputHost);

  bool defined() const { return defined_; }
  // True when this tensor shares a block of the allocator, false for views and undefined ones.
  bool owns_storage() const { return storage_ != nullptr; }
  // How many Tensors share this one's storage (0 for views): 1 means no one else can see it.
  long use_count() const { return storage_ ? storage_.use_count() : 0; }

  void* data() const { return data_; }
  // The elements as T. Unchecked: T must match dtype() (float for f32, std::uint16_t for f16 and
  // bf16, std::int32_t for i32, std::uint8_t for u8), and host tensors only may be dereferenced.
  template <class T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }

  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  // Dimension i; negative i counts from the end (-1 is the last).
  std::int64_t dim(int i) const { return shape_[i < 0 ? i + shape_.rank() : i]; }
  std::int64_t elements() const { return shape_.elements(); }
  std::size_t bytes() const { return static_cast<std::size_t>(elements()) * size_of(dtype_); }
  DType dtype() const { return dtype_; }
  DeviceId device() const { return device_; }
  TensorCategory category() const { return category_; }
  bool is_host() const { return device_.is_host(); }

  // The same storage with another shape of the same element count (Flatten). Throws
  // sluice::Error(kInvalidArgument) when the counts differ.
  Tensor reshaped(const Shape& shape) const;
  // Items [begin, end) along dimension 0, sharing the storage: a micro-batch of a batch.
  Tensor slice(std::int64_t begin, std::int64_t end) const;
  // The core's non-owning view (host memory only; throws for a device tensor).
  TensorView host_view() const;

  // Drops this reference; the block returns to the allocator when it was the last.
  void reset() { *this = Tensor(); }

  // "f32 (128, 64, 32, 32) on host, activations": for error messages and summaries.
  std::string describe() const;

 private:
  struct Storage;

  std::shared_ptr<Storage> storage_;  // null for views
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::kF32;
  DeviceId device_ = host();
  TensorCategory category_ = TensorCategory::kActivations;
  bool defined_ = false;
};

// True for f32, f16 and bf16: the types the ops compute on (16-bit ones are widened to f32 on
// load and rounded back on store).
constexpr bool is_floating(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16;
}

}  // namespace sluice::train
