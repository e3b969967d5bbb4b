// TensorCategory: what a block of training memory is for. Every allocation of the training core's
// allocator carries one, so the allocator can keep in-use bytes and peaks per category and the
// profiler can attribute every byte to weights, gradients, optimizer state, activations,
// workspace or the input pipeline (docs/design.md, the training core).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sluice {

enum class TensorCategory : std::uint8_t {
  kWeights,         // parameters
  kGradients,       // their gradients
  kOptimizerState,  // momentum, Adam moments, master copies
  kActivations,     // layer outputs kept for backward
  kWorkspace,       // scratch of one op (im2col buffers, cuBLAS workspace)
  kInputHost,       // input batches in pageable host memory
  kInputPinned,     // input batches in page-locked host memory
};

inline constexpr std::size_t kTensorCategoryCount = 7;

// "weights", "gradients", "optimizer state", "activations", "workspace", "input (host)",
// "input (pinned)".
std::string_view to_string(TensorCategory category);

// One character per category for the allocator's occupancy map: W G O A w I P. Workspace is
// the lowercase 'w' because weights already took 'W'.
char category_initial(TensorCategory category);

constexpr std::size_t index_of(TensorCategory category) { return static_cast<std::size_t>(category); }

}  // namespace sluice
