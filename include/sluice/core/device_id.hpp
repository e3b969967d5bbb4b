// DeviceId: which processor a batch is for, `sluice::host()` or `sluice::cuda(i)`. A plain value
// in core, so the pipeline can name a device without depending on the device module (which says
// whether the device is usable: sluice/device/device.hpp).
#pragma once

#include <cstdint>
#include <string>

namespace sluice {

enum class DeviceKind : std::uint8_t { kHost, kCuda };

struct DeviceId {
  DeviceKind kind = DeviceKind::kHost;
  int index = 0;  // the CUDA device ordinal; 0 for the host

  bool is_host() const { return kind == DeviceKind::kHost; }
  bool is_cuda() const { return kind == DeviceKind::kCuda; }
  friend bool operator==(const DeviceId&, const DeviceId&) = default;
};

constexpr DeviceId host() { return {DeviceKind::kHost, 0}; }
constexpr DeviceId cuda(int index = 0) { return {DeviceKind::kCuda, index}; }

// "host", "cuda:0".
std::string to_string(DeviceId device);

}  // namespace sluice
