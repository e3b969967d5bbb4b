// Helpers of the GPU tests: skipping without a device, deterministic bytes, a busy kernel, and
// copying device memory back for comparison.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "device/cuda_backend.hpp"
#include "sluice/detail/device/copy.hpp"
#include "sluice/device/device.hpp"
#include "sluice/device/stream.hpp"

// Skips the calling test, with the reason, when this process has no usable CUDA device.
#define SLUICE_REQUIRE_GPU()                                                              \
  if (::sluice::cuda_device_count() == 0)                                                 \
  GTEST_SKIP() << "no CUDA device: " << ::sluice::cuda_unavailable_reason()

namespace sluice::test {

// splitmix64 bytes: every value appears, no structure a wrong offset could hide behind.
inline void fill_random(std::uint8_t* p, std::size_t n, std::uint64_t seed) {
  std::uint64_t x = seed;
  for (std::size_t i = 0; i < n; ++i) {
    if (i % 8 == 0) {
      x += 0x9e3779b97f4a7c15ull;
      std::uint64_t z = x;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      x ^= z ^ (z >> 31);
    }
    p[i] = static_cast<std::uint8_t>(x >> (8 * (i % 8)));
  }
}

// Keeps `stream` busy for about `nanoseconds` on one SM: a stand-in for a training step.
inline void spin(Stream& stream, std::uint64_t nanoseconds) {
  device_detail::launch_spin(stream.device().index, nanoseconds, stream.native_handle());
}

inline std::vector<std::uint8_t> download(DeviceId device, const void* src, std::size_t bytes) {
  std::vector<std::uint8_t> out(bytes);
  copy_to_host(device, out.data(), src, bytes);
  return out;
}

}  // namespace sluice::test
