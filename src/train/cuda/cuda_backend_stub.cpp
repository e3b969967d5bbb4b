// make_cuda_backend for builds without CUDA: a Context on a CUDA device is a clear error. The
// CUDA backend (src/train/cuda/, same Backend interface as the CPU one) replaces this file in
// builds with the toolkit.
#include <string>

#include "sluice/core/error.hpp"
#include "train/tensor/backend.hpp"

namespace sluice::train {

std::unique_ptr<Backend> make_cuda_backend(int index, Allocator&) {
  throw Error(ErrorCode::kInvalidArgument,
              "training on cuda:" + std::to_string(index) +
                  ": this build of sluice has no CUDA training backend; use the CPU (sluice::host())");
}

}  // namespace sluice::train
