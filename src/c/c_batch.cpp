// The C API's batch side (include/sluice/c/sluice.h): batch handles and the DLPack tensors taken
// from them. A batch owns a slot of the loader's ring; a consumer such as torch.from_dlpack keeps
// the tensor's memory past the handle's release, so the slot is reference-counted: the handle
// and each DLManagedTensor are one hold, and the last release hands the slot back.
#include <cstdint>
#include <memory>

#include "c/c_api_internal.hpp"
#include "device/cuda_backend.hpp"  // stream_wait_event: the caller's stream waits for the copy

namespace sluice::c_api {

void drop_hold(sluice_batch* batch) noexcept {
  // acq_rel: every holder's reads of the slot happen before the slot is recycled and refilled.
  if (batch != nullptr && batch->holds.fetch_sub(1, std::memory_order_acq_rel) == 1) delete batch;
}

namespace {

// One DLManagedTensor and the arrays its DLTensor points to, freed together by its deleter.
struct TensorHold {
  DLManagedTensor managed{};
  std::int64_t shape[Shape::kMaxRank]{};
  std::int64_t strides[Shape::kMaxRank]{};  // in elements, row-major: DLPack's convention
  sluice_batch* batch = nullptr;
};

extern "C" {
// The consumer's release. C linkage, since DLManagedTensor::deleter is a C function pointer.
static void delete_tensor(DLManagedTensor* self) {
  if (self == nullptr) return;
  auto* hold = static_cast<TensorHold*>(self->manager_ctx);
  sluice_batch* batch = hold->batch;
  delete hold;
  drop_hold(batch);
}
}  // extern "C"

DLManagedTensor* make_tensor(sluice_batch* batch, void* data, DType dtype, const Shape& shape, DLDevice device) {
  auto hold = std::make_unique<TensorHold>();
  std::int64_t stride = 1;
  for (int i = shape.rank() - 1; i >= 0; --i) {
    hold->shape[i] = shape[i];
    hold->strides[i] = stride;
    stride *= shape[i];
  }
  DLTensor& t = hold->managed.dl_tensor;
  t.data = data;
  t.device = device;
  t.ndim = shape.rank();
  t.dtype = dl_dtype(dtype);
  t.shape = hold->shape;
  t.strides = hold->strides;
  t.byte_offset = 0;
  hold->managed.manager_ctx = hold.get();
  hold->managed.deleter = &delete_tensor;
  hold->batch = batch;
  batch->holds.fetch_add(1, std::memory_order_relaxed);  // the caller holds one already
  return &hold.release()->managed;
}

void require_valid(const sluice_batch* batch, const char* function) {
  if (batch == nullptr) throw Error(ErrorCode::kInvalidArgument, std::string(function) + ": batch is NULL");
  if (!batch->batch.valid()) {
    throw Error(ErrorCode::kInvalidArgument, std::string(function) + ": the batch holds no slot");
  }
}

}  // namespace
}  // namespace sluice::c_api

using namespace sluice;
using namespace sluice::c_api;

extern "C" {

sluice_status_t sluice_batch_info(const sluice_batch_t* batch, sluice_batch_info_t* info) {
  return guard([&] {
    require_valid(batch, "sluice_batch_info");
    const Batch& b = batch->batch;
    sluice_batch_info_t out = SLUICE_BATCH_INFO_INIT;
    out.size = b.size();
    out.epoch = b.epoch();
    out.index = b.index();
    out.device = b.on_device() ? dl_device(b.device()) : DLDevice{kDLCPU, 0};
    out.ready_event = b.on_device() && b.device().is_cuda() ? b.ready_event() : nullptr;
    write_sized(info, out, "sluice_batch_info: info");
    return SLUICE_OK;
  });
}

sluice_status_t sluice_batch_data(sluice_batch_t* batch, DLManagedTensor** tensor) {
  return guard([&] {
    require(tensor, "sluice_batch_data: tensor");
    *tensor = nullptr;
    require_valid(batch, "sluice_batch_data");
    const Batch& b = batch->batch;
    // After to_device() the consumer gets the device copy; data() is then the page-locked
    // staging buffer, which is the ring's business.
    if (b.on_device()) {
      const TensorView& v = b.device_data();
      *tensor = make_tensor(batch, v.data, v.dtype, v.shape, dl_device(b.device()));
    } else {
      const TensorView& v = b.data();
      *tensor = make_tensor(batch, v.data, v.dtype, v.shape, DLDevice{kDLCPU, 0});
    }
    return SLUICE_OK;
  });
}

sluice_status_t sluice_batch_labels(sluice_batch_t* batch, DLManagedTensor** tensor) {
  return guard([&] {
    require(tensor, "sluice_batch_labels: tensor");
    *tensor = nullptr;
    require_valid(batch, "sluice_batch_labels");
    const Batch& b = batch->batch;
    const Shape shape{b.size()};
    // DLPack's data pointer is not const; consumers get the slot's labels as they are.
    void* labels = b.on_device() ? const_cast<std::int32_t*>(b.device_labels())
                                 : const_cast<std::int32_t*>(b.labels().data());
    const DLDevice device = b.on_device() ? dl_device(b.device()) : DLDevice{kDLCPU, 0};
    *tensor = make_tensor(batch, labels, DType::kI32, shape, device);
    return SLUICE_OK;
  });
}

sluice_status_t sluice_batch_use_on_stream(sluice_batch_t* batch, void* cuda_stream) {
  return guard([&] {
    require_valid(batch, "sluice_batch_use_on_stream");
    Batch& b = batch->batch;
    if (!b.on_device() || !b.device().is_cuda()) return SLUICE_OK;
    if (b.ready_event() != nullptr) device_detail::stream_wait_event(b.device().index, cuda_stream, b.ready_event());
    b.record_stream(cuda_stream);
    return SLUICE_OK;
  });
}

void sluice_batch_release(sluice_batch_t* batch) {
  drop_hold(batch);
}

}  // extern "C"
