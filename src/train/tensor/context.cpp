// Context: the device, its backend, the CPU worker count and the grow-only workspace.
#include "sluice/train/context.hpp"

#include <algorithm>
#include <thread>

#include "sluice/core/error.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/ops.hpp"
#include "train/tensor/backend.hpp"

namespace sluice::train {

Context::Context(Allocator& allocator, ContextOptions options)
    : allocator_(&allocator), device_(allocator.device()), options_(options) {
  if (options.threads < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "Context: threads must be >= 0 (0: the hardware's count), got " + std::to_string(options.threads));
  }
  threads_ = options.threads > 0 ? options.threads
                                 : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  if (options.meta_compute_major < 0) {
    throw Error(ErrorCode::kInvalidArgument, "Context: meta_compute_major must be >= 0 (0: the device's), got " +
                                                 std::to_string(options.meta_compute_major));
  }
  const DeviceId modelled = options.meta_device.value_or(device_);
  if (!options.meta) {
    backend_ = device_.is_cuda() ? make_cuda_backend(device_.index, allocator) : make_cpu_backend(threads_);
  } else if (modelled.is_cuda()) {
    backend_ = make_cuda_meta_backend(modelled, options.meta_compute_major, allocator);
  } else {
    backend_ = make_meta_backend(make_cpu_backend(threads_));
  }
}

Context::~Context() = default;

Tensor Context::empty(const Shape& shape, DType dtype, TensorCategory category) const {
  return Tensor(*allocator_, shape, dtype, category);
}

Tensor Context::zeros(const Shape& shape, DType dtype, TensorCategory category) {
  Tensor t = empty(shape, dtype, category);
  ops::fill(*this, t, 0.0f);
  return t;
}

void* Context::workspace(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  if (!workspace_.defined() || workspace_.bytes() < bytes) reserve_workspace(bytes);
  return workspace_.data();
}

void Context::reserve_workspace(std::size_t bytes) {
  if (workspace_.defined() && workspace_.bytes() >= bytes) return;
  // Free first: the old block's memory can then be part of the new one.
  workspace_.reset();
  workspace_ = Tensor(*allocator_, {static_cast<std::int64_t>(bytes)}, DType::kU8,
                      TensorCategory::kWorkspace);
}

void Context::synchronize() { backend_->synchronize(); }

void Context::wait_event(void* native_event) {
  if (native_event != nullptr) backend_->wait_event(native_event);
}

void* Context::native_stream() { return backend_->native_stream(); }

}  // namespace sluice::train
