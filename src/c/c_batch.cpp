// The C API's batch side (include/sluice/c/sluice.h): batch handles and the DLPack tensors taken
// from them (made by the export the Python module shares, c/dlpack_export.hpp). A batch owns a
// slot of the loader's ring; a consumer such as torch.from_dlpack keeps the tensor's memory past
// the handle's release, so the slot is reference-counted: the handle and each DLManagedTensor
// are one hold, and the last release hands the slot back.
#include <cstdint>
#include <memory>

#include "c/c_api_internal.hpp"
#include "c/dlpack_export.hpp"

namespace sluice::c_api {

void drop_hold(sluice_batch* batch) noexcept {
  // acq_rel: every holder's reads of the slot happen before the slot is recycled and refilled.
  if (batch != nullptr && batch->holds.fetch_sub(1, std::memory_order_acq_rel) == 1) delete batch;
}

namespace {

// A DLManagedTensor of `part` of the batch, holding one of the batch's holds until the consumer
// calls its deleter.
DLManagedTensor* export_part(sluice_batch* batch, dlpack::BatchPart part) {
  const dlpack::TensorDesc tensor = dlpack::describe(batch->batch, part);
  batch->holds.fetch_add(1, std::memory_order_relaxed);  // the caller holds one already
  // If the shared_ptr cannot be made, it calls its deleter at once: the hold is dropped again.
  std::shared_ptr<const void> hold(batch, [](const void* held) {
    drop_hold(static_cast<sluice_batch*>(const_cast<void*>(held)));
  });
  return dlpack::export_tensor(tensor, std::move(hold));
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
    out.device = b.on_device() ? dlpack::dl_device(b.device()) : DLDevice{kDLCPU, 0};
    out.ready_event = b.on_device() && b.device().is_cuda() ? b.ready_event() : nullptr;
    out.padding = b.padding();
    write_sized(info, out, "sluice_batch_info: info");
    return SLUICE_OK;
  });
}

sluice_status_t sluice_batch_data(sluice_batch_t* batch, DLManagedTensor** tensor) {
  return guard([&] {
    require(tensor, "sluice_batch_data: tensor");
    *tensor = nullptr;
    require_valid(batch, "sluice_batch_data");
    *tensor = export_part(batch, dlpack::BatchPart::kData);
    return SLUICE_OK;
  });
}

sluice_status_t sluice_batch_labels(sluice_batch_t* batch, DLManagedTensor** tensor) {
  return guard([&] {
    require(tensor, "sluice_batch_labels: tensor");
    *tensor = nullptr;
    require_valid(batch, "sluice_batch_labels");
    *tensor = export_part(batch, dlpack::BatchPart::kLabels);
    return SLUICE_OK;
  });
}

sluice_status_t sluice_batch_use_on_stream(sluice_batch_t* batch, void* cuda_stream) {
  return guard([&] {
    require_valid(batch, "sluice_batch_use_on_stream");
    dlpack::use_on_stream(batch->batch, cuda_stream);
    return SLUICE_OK;
  });
}

void sluice_batch_release(sluice_batch_t* batch) {
  drop_hold(batch);
}

}  // extern "C"
