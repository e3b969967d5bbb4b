// Device names for messages and the CLI.
#include "sluice/core/device_id.hpp"

namespace sluice {

std::string to_string(DeviceId device) {
  return device.is_host() ? std::string("host") : "cuda:" + std::to_string(device.index);
}

}  // namespace sluice
