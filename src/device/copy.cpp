// Host <-> device copies on a stream: cudaMemcpyAsync on CUDA, memcpy on the host device (done
// when the call returns, so the event recorded after it is already complete).
#include "sluice/detail/device/copy.hpp"

#include <cstring>

#include "device/cuda_backend.hpp"

namespace sluice {
namespace {

void host_copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes != 0) std::memcpy(dst, src, bytes);
}

}  // namespace

void copy_to_device_async(void* dst, const void* src, std::size_t bytes, Stream& stream, Event* done) {
  const DeviceId device = stream.device();
  if (device.is_host()) {
    host_copy(dst, src, bytes);
  } else if (bytes != 0) {
    device_detail::memcpy_h2d_async(device.index, dst, src, bytes, stream.native_handle());
  }
  if (done != nullptr) done->record(stream);
}

void copy_to_host_async(void* dst, const void* src, std::size_t bytes, Stream& stream, Event* done) {
  const DeviceId device = stream.device();
  if (device.is_host()) {
    host_copy(dst, src, bytes);
  } else if (bytes != 0) {
    device_detail::memcpy_d2h_async(device.index, dst, src, bytes, stream.native_handle());
  }
  if (done != nullptr) done->record(stream);
}

void copy_to_device(DeviceId device, void* dst, const void* src, std::size_t bytes) {
  require_device(device);
  if (device.is_host()) {
    host_copy(dst, src, bytes);
  } else if (bytes != 0) {
    device_detail::memcpy_h2d(device.index, dst, src, bytes);
  }
}

void copy_to_host(DeviceId device, void* dst, const void* src, std::size_t bytes) {
  require_device(device);
  if (device.is_host()) {
    host_copy(dst, src, bytes);
  } else if (bytes != 0) {
    device_detail::memcpy_d2h(device.index, dst, src, bytes);
  }
}

}  // namespace sluice
