// launch(): the one place where sluice's kernels are launched (src/device and src/train/cuda). It
// launches nothing for empty work (LaunchShape::empty(): a zero-sized grid is a CUDA launch error,
// not a no-op) and turns a failed launch into sluice::Error naming the kernel. A test
// (tests/unit/device/launch_shape_test.cpp) checks that no .cu file launches any other way.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "device/cuda_backend.hpp"
#include "device/launch_shape.hpp"

namespace sluice::device_detail {

// kernel<<<shape, stream>>>(args...) unless shape is empty. Returns whether it launched; throws
// sluice::Error (the call named `what`) when the launch failed.
template <class... Params, class... Args>
bool launch(const char* what, void (*kernel)(Params...), const LaunchShape& shape, cudaStream_t stream,
            Args&&... args) {
  if (shape.empty()) return false;
  const dim3 grid(shape.grid_x, shape.grid_y, shape.grid_z);
  kernel<<<grid, shape.threads, shape.shared_bytes, stream>>>(std::forward<Args>(args)...);
  check_launch(what);
  return true;
}

}  // namespace sluice::device_detail
