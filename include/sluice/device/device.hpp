// Devices: which processor a batch is for (`sluice::host()` or `sluice::cuda(i)`), whether this
// build and this machine can drive it, and what it is. The CUDA backend is chosen at build time
// (SLUICE_WITH_CUDA) and used at run time only for the device the user names; a CUDA device that
// is missing, or a build without CUDA, is a sluice::Error that says so, never a crash. No CUDA
// types appear here or in any public header of this module.
#pragma once

#include <cstdint>
#include <string>

#include "sluice/core/device_id.hpp"

namespace sluice {

// True when this build of sluice contains the CUDA backend.
bool cuda_backend_built();

// CUDA devices usable from this process; 0 on any error (no driver, a driver too old for the
// runtime, no device, a build without CUDA). Never throws. The first call initialises the CUDA
// runtime; the result is computed once per process.
int cuda_device_count() noexcept;

// Why cuda_device_count() is 0 ("CUDA driver version is insufficient for CUDA runtime version
// (cudaErrorInsufficientDriver)", "this build of sluice has no CUDA backend"), or empty.
std::string cuda_unavailable_reason();

// Throws sluice::Error(kInvalidArgument) when `device` cannot be used here, with a message that
// names the device, the cause and what to do ("use sluice::host() ..."). The host always can.
void require_device(DeviceId device);

struct DeviceInfo {
  DeviceId id;
  std::string name;                 // "NVIDIA H200", or "host"
  std::uint64_t total_memory = 0;   // bytes of device memory (physical RAM for the host)
  int compute_major = 0;            // CUDA compute capability; 0 for the host
  int compute_minor = 0;
  int multiprocessors = 0;          // SMs; online CPUs for the host
  int async_engines = 0;            // copy engines: 2 means H2D and D2H can overlap each other
  std::string pci_bus_id;           // "0000:3b:00.0" (sysfs form); empty for the host
  int numa_node = -1;               // the device's NUMA node, -1 when unknown or host
};

// Describes a usable device; throws as require_device() does otherwise.
DeviceInfo describe(DeviceId device);

}  // namespace sluice
