// The CUDA backend: the CUDA runtime API calls behind the device module, and the translation of
// their errors into sluice::Error. The only C++ file that includes a CUDA header.
#include "device/cuda_backend.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cctype>
#include <mutex>

#include "sluice/core/error.hpp"

namespace sluice::device_detail {
namespace {

std::string describe_error(cudaError_t status) {
  return std::string(cudaGetErrorString(status)) + " (" + cudaGetErrorName(status) + ")";
}

ErrorCode code_of(cudaError_t status) {
  switch (status) {
    case cudaErrorMemoryAllocation: return ErrorCode::kOutOfBudget;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice: return ErrorCode::kInvalidArgument;
    default: return ErrorCode::kInternal;
  }
}

void check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  throw Error(code_of(status), std::string("CUDA: ") + what + " failed: " + describe_error(status));
}

}  // namespace

int enter_device(int device, bool quiet) {
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) {
    (void)cudaGetLastError();
    previous = -1;
  }
  if (previous == device) return -1;
  const cudaError_t status = cudaSetDevice(device);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    if (!quiet) check(status, "cudaSetDevice");
    return -1;
  }
  return previous;
}

void leave_device(int previous) noexcept {
  if (previous >= 0) (void)cudaSetDevice(previous);
}

int current_device() noexcept {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return device;
}

bool cuda_built() { return true; }

int cuda_count(std::string* why) noexcept {
  static std::once_flag once;
  static int count = 0;
  static std::string reason;
  std::call_once(once, [] {
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      count = 0;
      reason = "cudaGetDeviceCount failed: " + describe_error(status);
      (void)cudaGetLastError();  // clear it: later calls must not see a stale error
    } else if (count == 0) {
      reason = "no CUDA device is visible (CUDA_VISIBLE_DEVICES?)";
    }
  });
  if (why != nullptr) *why = reason;
  return count;
}

DeviceInfo cuda_describe(int device) {
  DeviceInfo info;
  info.id = cuda(device);
  cudaDeviceProp props{};
  check(cudaGetDeviceProperties(&props, device), "cudaGetDeviceProperties");
  info.name = props.name;
  info.total_memory = props.totalGlobalMem;
  info.compute_major = props.major;
  info.compute_minor = props.minor;
  info.multiprocessors = props.multiProcessorCount;
  info.async_engines = props.asyncEngineCount;
  char bus_id[32] = {};
  if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device) == cudaSuccess) {
    info.pci_bus_id = bus_id;
  } else {
    (void)cudaGetLastError();
  }
  return info;
}

void* stream_create(int device, bool non_blocking, int priority) {
  ScopedDevice guard(device);
  int least = 0;
  int greatest = 0;
  check(cudaDeviceGetStreamPriorityRange(&least, &greatest), "cudaDeviceGetStreamPriorityRange");
  priority = std::clamp(priority, greatest, least);  // greatest is the smallest number
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithPriority(&stream, non_blocking ? cudaStreamNonBlocking : cudaStreamDefault, priority),
        "cudaStreamCreateWithPriority");
  return stream;
}

void stream_destroy(int device, void* stream) noexcept {
  ScopedDevice guard(device, /*quiet=*/true);
  (void)cudaStreamDestroy(static_cast<cudaStream_t>(stream));
}

void stream_wait_event(int device, void* stream, void* event) {
  ScopedDevice guard(device);
  check(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0),
        "cudaStreamWaitEvent");
}

void stream_synchronize(int device, void* stream) {
  ScopedDevice guard(device);
  check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
}

bool stream_query(int device, void* stream) {
  ScopedDevice guard(device);
  const cudaError_t status = cudaStreamQuery(static_cast<cudaStream_t>(stream));
  if (status == cudaErrorNotReady) return false;
  check(status, "cudaStreamQuery");
  return true;
}

void* event_create(int device, bool timing) {
  ScopedDevice guard(device);
  cudaEvent_t event = nullptr;
  check(cudaEventCreateWithFlags(&event, timing ? cudaEventDefault : cudaEventDisableTiming),
        "cudaEventCreateWithFlags");
  return event;
}

void event_destroy(int device, void* event) noexcept {
  ScopedDevice guard(device, /*quiet=*/true);
  (void)cudaEventDestroy(static_cast<cudaEvent_t>(event));
}

void event_record(int device, void* event, void* stream) {
  ScopedDevice guard(device);
  check(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)), "cudaEventRecord");
}

bool event_query(int device, void* event) {
  ScopedDevice guard(device);
  const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(event));
  if (status == cudaErrorNotReady) return false;
  check(status, "cudaEventQuery");
  return true;
}

void event_synchronize(int device, void* event) {
  ScopedDevice guard(device);
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(event)), "cudaEventSynchronize");
}

float event_elapsed_ms(int device, void* start, void* end) {
  ScopedDevice guard(device);
  float ms = 0;
  check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)),
        "cudaEventElapsedTime");
  return ms;
}

void* host_alloc(int device, std::size_t bytes, bool write_combined) {
  ScopedDevice guard(device);
  void* ptr = nullptr;
  const unsigned flags = cudaHostAllocPortable | (write_combined ? cudaHostAllocWriteCombined : 0u);
  const cudaError_t status = cudaHostAlloc(&ptr, bytes, flags);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    throw Error(ErrorCode::kOutOfBudget, "CUDA: cudaHostAlloc of " + std::to_string(bytes) +
                                             " bytes of page-locked memory failed: " + describe_error(status));
  }
  return ptr;
}

void host_free(int device, void* ptr) noexcept {
  ScopedDevice guard(device, /*quiet=*/true);
  (void)cudaFreeHost(ptr);
}

void host_register(int device, void* ptr, std::size_t bytes) {
  ScopedDevice guard(device);
  const cudaError_t status = cudaHostRegister(ptr, bytes, cudaHostRegisterPortable);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    throw Error(ErrorCode::kOutOfBudget, "CUDA: cudaHostRegister of " + std::to_string(bytes) +
                                             " bytes failed (RLIMIT_MEMLOCK?): " + describe_error(status));
  }
}

void host_unregister(int device, void* ptr) noexcept {
  ScopedDevice guard(device, /*quiet=*/true);
  (void)cudaHostUnregister(ptr);
}

void* device_malloc(int device, std::size_t bytes) {
  ScopedDevice guard(device);
  void* ptr = nullptr;
  const cudaError_t status = cudaMalloc(&ptr, bytes);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    return nullptr;
  }
  check(status, "cudaMalloc");
  return ptr;
}

void device_free(int device, void* ptr) noexcept {
  ScopedDevice guard(device, /*quiet=*/true);
  (void)cudaFree(ptr);
}

void memcpy_h2d_async(int device, void* dst, const void* src, std::size_t bytes, void* stream) {
  ScopedDevice guard(device);
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream)),
        "cudaMemcpyAsync (host to device)");
}

void memcpy_d2h_async(int device, void* dst, const void* src, std::size_t bytes, void* stream) {
  ScopedDevice guard(device);
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(stream)),
        "cudaMemcpyAsync (device to host)");
}

void memcpy_h2d(int device, void* dst, const void* src, std::size_t bytes) {
  ScopedDevice guard(device);
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (host to device)");
  // From pageable memory cudaMemcpy may return once the bytes are staged, before the DMA lands;
  // work on non-blocking streams is not ordered after it, so wait for the legacy stream.
  check(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize (after cudaMemcpy)");
}

void memcpy_d2h(int device, void* dst, const void* src, std::size_t bytes) {
  ScopedDevice guard(device);
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (device to host)");
}

void check_launch(const char* what) {
  const cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess) return;
  throw Error(code_of(status), std::string("CUDA: launching ") + what + " failed: " + describe_error(status));
}

}  // namespace sluice::device_detail
