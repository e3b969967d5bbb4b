// Tensor storage: a block of the training allocator shared by reference count, and views.
#include "sluice/train/tensor.hpp"

#include "sluice/core/error.hpp"
#include "sluice/train/allocator.hpp"

namespace sluice::train {

// One allocator block. Tensors share it through a shared_ptr; the last one returns the block.
struct Tensor::Storage {
  Allocator* allocator = nullptr;
  void* ptr = nullptr;

  Storage(Allocator& a, std::size_t bytes, TensorCategory category)
      : allocator(&a), ptr(a.allocate(bytes, category)) {}
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage() {
    try {
      allocator->deallocate(ptr);
    } catch (...) {
      // deallocate throws only for a pointer it does not know: a bug, but not one a destructor
      // can report; the allocator's check_invariants() finds it in tests.
    }
  }
};

Tensor::Tensor(Allocator& allocator, const Shape& shape, DType dtype, TensorCategory category)
    : shape_(shape), dtype_(dtype), device_(allocator.device()), category_(category), defined_(true) {
  for (std::int64_t d : shape) {
    if (d < 0) {
      throw Error(ErrorCode::kInvalidArgument, "Tensor: negative dimension in " + shape.to_string());
    }
  }
  storage_ = std::make_shared<Storage>(allocator, bytes(), category);
  data_ = storage_->ptr;
}

Tensor Tensor::wrap(void* data, const Shape& shape, DType dtype, DeviceId device, TensorCategory category) {
  for (std::int64_t d : shape) {
    if (d < 0) {
      throw Error(ErrorCode::kInvalidArgument, "Tensor::wrap: negative dimension in " + shape.to_string());
    }
  }
  if (data == nullptr && shape.elements() != 0) {
    throw Error(ErrorCode::kInvalidArgument, "Tensor::wrap: null data for " + shape.to_string());
  }
  Tensor t;
  t.data_ = data;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = device;
  t.category_ = category;
  t.defined_ = true;
  return t;
}

Tensor Tensor::wrap(const TensorView& view, DeviceId device, TensorCategory category) {
  return wrap(view.data, view.shape, view.dtype, device, category);
}

Tensor Tensor::reshaped(const Shape& shape) const {
  if (shape.elements() != elements()) {
    throw Error(ErrorCode::kInvalidArgument, "Tensor::reshaped: " + shape_.to_string() + " has " +
                                                 std::to_string(elements()) + " elements, " +
                                                 shape.to_string() + " has " +
                                                 std::to_string(shape.elements()));
  }
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::slice(std::int64_t begin, std::int64_t end) const {
  if (rank() == 0 || begin < 0 || end < begin || end > shape_[0]) {
    throw Error(ErrorCode::kInvalidArgument, "Tensor::slice: [" + std::to_string(begin) + ", " +
                                                 std::to_string(end) + ") of " + shape_.to_string());
  }
  Tensor t = *this;
  const std::int64_t item = shape_[0] == 0 ? 0 : elements() / shape_[0];
  t.data_ = static_cast<std::byte*>(data_) + static_cast<std::size_t>(begin * item) * size_of(dtype_);
  t.shape_[0] = end - begin;
  return t;
}

TensorView Tensor::host_view() const {
  if (!device_.is_host()) {
    throw Error(ErrorCode::kInvalidArgument, "Tensor::host_view: " + describe() + " is not in host memory");
  }
  return TensorView{data_, dtype_, shape_};
}

std::string Tensor::describe() const {
  if (!defined_) return "undefined tensor";
  return std::string(to_string(dtype_)) + " " + shape_.to_string() + " on " + to_string(device_) +
         ", " + std::string(to_string(category_));
}

}  // namespace sluice::train
