// The CUDA backend behind the device module's public classes, as plain functions over opaque
// handles (void* for cudaStream_t and cudaEvent_t), so no file outside cuda_backend.cpp and
// device_kernels.cu includes a CUDA header. A build without CUDA links cuda_backend_stub.cpp,
// where cuda_count() is 0 and everything else throws "no CUDA backend".
//
// Every function that takes a device index makes it current for the call (ScopedDevice). Errors
// are sluice::Error with the CUDA call, the error's name and its text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "sluice/device/device.hpp"

namespace sluice::device_detail {

bool cuda_built();
// Devices visible to this process; 0 with `why` set on any error. Computed once.
int cuda_count(std::string* why) noexcept;
// Fills what cudaGetDeviceProperties and cudaDeviceGetPCIBusId say (not numa_node).
DeviceInfo cuda_describe(int device);

// Makes `device` current on this thread and returns the device to restore (-1: none). These
// calls run on threads sluice does not own (the training loop's, a Batch's destructor), whose
// current device is theirs to choose, so every call restores it. Quiet: ignore failures
// (teardown, when the driver may already be gone).
int enter_device(int device, bool quiet = false);
void leave_device(int previous) noexcept;
// The calling thread's current device (cudaGetDevice), -1 when it cannot be had. For tests.
int current_device() noexcept;

class ScopedDevice {
 public:
  explicit ScopedDevice(int device, bool quiet = false) : previous_(enter_device(device, quiet)) {}
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;
  ~ScopedDevice() { leave_device(previous_); }

 private:
  int previous_;
};

// Streams and events.
void* stream_create(int device, bool non_blocking, int priority);
void stream_destroy(int device, void* stream) noexcept;
void stream_wait_event(int device, void* stream, void* event);
void stream_synchronize(int device, void* stream);
bool stream_query(int device, void* stream);
void* event_create(int device, bool timing);
void event_destroy(int device, void* event) noexcept;
void event_record(int device, void* event, void* stream);
bool event_query(int device, void* event);
void event_synchronize(int device, void* event);
float event_elapsed_ms(int device, void* start, void* end);

// Memory. host_alloc: cudaHostAlloc (portable, optionally write-combined); host_register: lock
// existing pages (cudaHostRegister, portable). Both throw kOutOfBudget when the memory is not
// available. Page-locked memory is usable from every device, but the call runs in the current
// device's context, which it would create on device 0 for a thread that never chose one (a
// context and its hundreds of MiB on a GPU the process does not use): each takes the device the
// memory is for and makes it current for the call, as every call here does.
void* host_alloc(int device, std::size_t bytes, bool write_combined);
void host_free(int device, void* ptr) noexcept;
void host_register(int device, void* ptr, std::size_t bytes);
void host_unregister(int device, void* ptr) noexcept;
void* device_malloc(int device, std::size_t bytes);   // nullptr when the device is full
void device_free(int device, void* ptr) noexcept;

// Copies (cudaMemcpyAsync / cudaMemcpy).
void memcpy_h2d_async(int device, void* dst, const void* src, std::size_t bytes, void* stream);
void memcpy_d2h_async(int device, void* dst, const void* src, std::size_t bytes, void* stream);
void memcpy_h2d(int device, void* dst, const void* src, std::size_t bytes);
void memcpy_d2h(int device, void* dst, const void* src, std::size_t bytes);

// Throws the pending error of the last kernel launch on this thread, if any.
void check_launch(const char* what);

// Kernels (device_kernels.cu).
struct NormalizeLaunch {
  const std::uint8_t* src = nullptr;  // (batch, pixels, channels) u8
  void* dst = nullptr;                // (batch, channels, pixels) or (batch, pixels, channels)
  std::int64_t batch = 0;
  std::int64_t pixels = 0;            // height * width
  int channels = 3;
  int dtype = 0;                      // 0 f32, 1 f16, 2 bf16
  bool nchw = true;
  float mean[4] = {0, 0, 0, 0};
  float std[4] = {1, 1, 1, 1};
};
void launch_normalize(int device, const NormalizeLaunch& launch, void* stream);
// Occupies one SM for about `nanoseconds` (the overlap test's stand-in for a training step).
void launch_spin(int device, std::uint64_t nanoseconds, void* stream);

}  // namespace sluice::device_detail
