// DLPack descriptions of sluice batches and the managed tensors that carry them.
#include "c/dlpack_export.hpp"

#include <cstdint>

// stream_wait_event: a consumer's stream waits for a batch's copy, known to the batch only by its
// cudaEvent_t (the device module's public Stream waits on an Event it owns).
#include "device/cuda_backend.hpp"

namespace sluice::dlpack {

namespace {

// One DLManagedTensor, the arrays its DLTensor points to and the hold on the batch, freed
// together by its deleter.
struct ManagedTensor {
  DLManagedTensor managed{};
  std::int64_t shape[Shape::kMaxRank]{};
  std::int64_t strides[Shape::kMaxRank]{};  // in elements, row-major: DLPack's convention
  std::shared_ptr<const void> hold;
};

extern "C" {
// C linkage, since DLManagedTensor::deleter is a C function pointer.
static void delete_managed(DLManagedTensor* self) {
  if (self != nullptr) delete static_cast<ManagedTensor*>(self->manager_ctx);
}
}  // extern "C"

}  // namespace

TensorDesc describe(const Batch& batch, BatchPart part) {
  TensorDesc d;
  if (part == BatchPart::kLabels && batch.soft_labels().data != nullptr) {
    // mixup() / cutmix(): the soft labels stand for the labels (docs/decisions/batch-mix-labels.md).
    const TensorView& soft = batch.on_device() ? batch.device_soft_labels() : batch.soft_labels();
    d.data = soft.data;
    d.dtype = DType::kF32;
    d.shape = soft.shape;
  } else if (part == BatchPart::kLabels) {
    // DLPack's data pointer is not const; consumers get the slot's labels as they are.
    d.data = const_cast<std::int32_t*>(batch.on_device() ? batch.device_labels() : batch.labels().data());
    d.dtype = DType::kI32;
    d.shape = Shape{batch.size()};
  } else {
    const TensorView& v = batch.on_device() ? batch.device_data() : batch.data();
    d.data = v.data;
    d.dtype = v.dtype;
    d.shape = v.shape;
  }
  d.device = batch.on_device() ? batch.device() : host();
  return d;
}

DLDataType dl_dtype(DType dtype) noexcept {
  switch (dtype) {
    case DType::kU8: return DLDataType{kDLUInt, 8, 1};
    case DType::kI32: return DLDataType{kDLInt, 32, 1};
    case DType::kF16: return DLDataType{kDLFloat, 16, 1};
    case DType::kBF16: return DLDataType{kDLBfloat, 16, 1};
    case DType::kF32: return DLDataType{kDLFloat, 32, 1};
  }
  return DLDataType{kDLOpaqueHandle, 0, 0};
}

DLDevice dl_device(DeviceId device) noexcept {
  return device.is_cuda() ? DLDevice{kDLCUDA, device.index} : DLDevice{kDLCPU, 0};
}

DLManagedTensor* export_tensor(const TensorDesc& tensor, std::shared_ptr<const void> hold) {
  auto managed = std::make_unique<ManagedTensor>();
  std::int64_t stride = 1;
  for (int i = tensor.shape.rank() - 1; i >= 0; --i) {
    managed->shape[i] = tensor.shape[i];
    managed->strides[i] = stride;
    stride *= tensor.shape[i];
  }
  DLTensor& t = managed->managed.dl_tensor;
  t.data = tensor.data;
  t.device = dl_device(tensor.device);
  t.ndim = tensor.shape.rank();
  t.dtype = dl_dtype(tensor.dtype);
  t.shape = managed->shape;
  t.strides = managed->strides;
  t.byte_offset = 0;
  managed->managed.manager_ctx = managed.get();
  managed->managed.deleter = &delete_managed;
  managed->hold = std::move(hold);
  return &managed.release()->managed;
}

void use_on_stream(Batch& batch, void* native_stream) {
  if (!batch.on_device() || !batch.device().is_cuda()) return;
  if (batch.ready_event() != nullptr) {
    device_detail::stream_wait_event(batch.device().index, native_stream, batch.ready_event());
  }
  batch.record_stream(native_stream);
}

}  // namespace sluice::dlpack
