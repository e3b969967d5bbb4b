// The one DLPack export of a batch, shared by the C API (c_batch.cpp) and the Python module
// (src/python/batch_binding.cpp), so both hand consumers the same description of the same memory:
// which buffer a batch's data or labels are (after to_device(), the device copy; data() is then
// the transfer ring's staging buffer), sluice's dtypes and devices in DLPack's terms, and a
// DLManagedTensor whose deleter drops the caller's hold on the batch; and, for a consumer that
// reads a device batch on a CUDA stream of its own, the wait and record that stream needs.
//
// The deleter touches nothing but that hold: consumers (torch) may call it from any thread,
// without the GIL, after the batch handle itself is gone.
#pragma once

#include <dlpack/dlpack.h>

#include <memory>

#include "sluice/core/device_id.hpp"
#include "sluice/core/dtype.hpp"
#include "sluice/core/shape.hpp"
#include "sluice/pipeline/batch.hpp"

namespace sluice::dlpack {

enum class BatchPart : std::uint8_t { kData, kLabels };

// A batch's data or labels as a consumer sees them.
struct TensorDesc {
  void* data = nullptr;
  DType dtype = DType::kU8;
  Shape shape;
  DeviceId device = host();
};

TensorDesc describe(const Batch& batch, BatchPart part);

DLDataType dl_dtype(DType dtype) noexcept;
DLDevice dl_device(DeviceId device) noexcept;

// A DLManagedTensor for `tensor` (row-major strides, in elements), which owns `hold` until the
// consumer calls its deleter. Throws std::bad_alloc; `hold` is then released at once.
DLManagedTensor* export_tensor(const TensorDesc& tensor, std::shared_ptr<const void> hold);

// The consumer reads `batch` on `native_stream` (a cudaStream_t of the batch's device; nullptr is
// the legacy default stream), not on the loader's stream: that stream waits, on the device, for
// the batch's copy, and the batch's slot is refilled only after the work queued there by the
// batch's release (Batch::record_stream). Nothing for a batch that is not on a CUDA device.
// Throws sluice::Error (a fifth stream, a CUDA error).
void use_on_stream(Batch& batch, void* native_stream);

}  // namespace sluice::dlpack
