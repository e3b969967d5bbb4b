// Devices: naming them, checking that this build and machine can drive them, describing them.
// An unusable device is reported here, once, with what to do about it, so every later call can
// assume a working backend.
#include "sluice/device/device.hpp"

#include <unistd.h>

#include <thread>

#include "device/cuda_backend.hpp"
#include "sluice/core/error.hpp"
#include "sluice/detail/device/numa.hpp"

namespace sluice {

bool cuda_backend_built() { return device_detail::cuda_built(); }

int cuda_device_count() noexcept { return device_detail::cuda_count(nullptr); }

std::string cuda_unavailable_reason() {
  std::string why;
  device_detail::cuda_count(&why);
  return why;
}

void require_device(DeviceId device) {
  if (device.is_host()) return;
  const std::string name = "sluice::cuda(" + std::to_string(device.index) + ")";
  if (!device_detail::cuda_built()) {
    throw Error(ErrorCode::kInvalidArgument,
                name + ": this build of sluice has no CUDA backend (configure with "
                       "-DSLUICE_WITH_CUDA=ON where a CUDA toolkit is installed); use sluice::host()");
  }
  std::string why;
  const int count = device_detail::cuda_count(&why);
  if (count == 0) {
    throw Error(ErrorCode::kInvalidArgument,
                name + ": no usable CUDA device: " + why +
                    "; use sluice::host(), or run on a machine with a GPU and a driver recent enough "
                    "for this CUDA runtime");
  }
  if (device.index < 0 || device.index >= count) {
    throw Error(ErrorCode::kInvalidArgument,
                name + ": no such device, this process sees " + std::to_string(count) + " CUDA device" +
                    (count == 1 ? "" : "s") + " (cuda(0) to cuda(" + std::to_string(count - 1) + "))");
  }
}

DeviceInfo describe(DeviceId device) {
  require_device(device);
  if (device.is_host()) {
    DeviceInfo info;
    info.id = device;
    info.name = "host";
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) info.total_memory = static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
    info.multiprocessors = static_cast<int>(std::thread::hardware_concurrency());
    return info;
  }
  DeviceInfo info = device_detail::cuda_describe(device.index);
  const std::string sysfs = sysfs_pci_address(info.pci_bus_id);
  if (!sysfs.empty()) info.pci_bus_id = sysfs;
  info.numa_node = numa_node_of_pci(info.pci_bus_id);
  return info;
}

}  // namespace sluice
