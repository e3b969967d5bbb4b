// The CUDA backend's workspace, in plain C++ (no CUDA header) so that a machine without a GPU and
// a build without CUDA can plan for it (`sluice plan --device cuda:N`, planner.hpp): how each op
// chunks its images and carves its one Context::workspace request, what each op requests forward
// and backward, and the cuBLAS workspace the backend takes from the training allocator when it is
// set up. CudaBackend requests exactly these sizes (cuda_conv.cpp carves its pointers with the
// same functions) and the meta backend requests them in its place (meta_backend.cpp), so a plan
// for CUDA allocates what a CUDA step allocates. Compiled into every build (src/train/CMakeLists.txt).
#pragma once

#include <cstddef>
#include <cstdint>

#include "sluice/core/dtype.hpp"
#include "sluice/train/ops.hpp"

namespace sluice::train::cuda_detail {

constexpr std::size_t align256(std::size_t n) { return (n + 255) & ~std::size_t{255}; }

// A chunk's im2col columns (and their f32 gradient) aim at this size: large enough that the
// batched GEMMs fill an H200, small enough that the workspace stays a minor line in the plan.
constexpr std::size_t kChunkBytes = std::size_t{64} << 20;
// Weight gradients are summed over images as per-image partials from one strided batched GEMM,
// then folded in order (deterministic, two launches rather than one GEMM an image); this bounds
// the partials of one such group.
constexpr std::size_t kPartialBytes = std::size_t{16} << 20;

// cuBLAS's scratch, given to it with cublasSetWorkspace: the size cuBLAS itself would allocate,
// 32 MiB from compute capability 9 (Hopper) on and 4 MiB before (cuBLAS's documentation).
std::size_t cublas_workspace_bytes(int compute_major);
// The compute capability a plan assumes when no device says otherwise: the H200's.
constexpr int kPlanComputeMajor = 9;

// Carves one workspace block into 256-byte aligned pieces; with a null base it only counts.
class Carver {
 public:
  explicit Carver(void* base = nullptr) : base_(static_cast<std::byte*>(base)) {}
  template <class T = std::byte>
  T* take(std::size_t bytes) {
    std::byte* p = base_ == nullptr || bytes == 0 ? nullptr : base_ + used_;
    used_ += align256(bytes);
    return reinterpret_cast<T*>(p);
  }
  std::size_t bytes() const { return used_; }

 private:
  std::byte* base_;
  std::size_t used_ = 0;
};

// A convolution lowered to GEMMs (row-major): y_i (K, P) = W (K, R) col_i (R, P), R = C kh kw.
struct ConvTiling {
  std::int64_t rows;   // R
  std::int64_t plane;  // P = OH * OW
  bool direct;         // 1x1, stride 1, no padding: col_i is x_i itself
  std::int64_t chunk;  // images per chunk
  std::int64_t group;  // images per weight-gradient GEMM
  std::size_t elem;    // bytes of an activation
};
ConvTiling plan_conv(const Conv2dShape& s, DType t);

// The conv workspace: columns (t) and their gradient (f32) for a chunk, dw in f32 and the
// per-image dw partials of one group.
struct ConvScratch {
  void* col = nullptr;
  float* col_grad = nullptr;
  float* dw = nullptr;
  float* partials = nullptr;
};
ConvScratch carve_conv(Carver& c, const Conv2dShape& s, const ConvTiling& p, DType t);

// SeparableConv2D: mid_i (C, P) = depthwise(x_i), y_i (K, P) = Wp (K, C) mid_i (C, P).
struct SeparableTiling {
  std::int64_t channels;  // C
  std::int64_t plane;     // P
  std::int64_t chunk;
  std::int64_t group;  // images per pointwise weight-gradient GEMM
  std::size_t elem;
};
SeparableTiling plan_separable(const SeparableShape& s, DType t);

struct SeparableScratch {
  void* mid = nullptr;        // (chunk, C, P) of t
  float* mid_grad = nullptr;  // (chunk, C, P)
  float* dwp = nullptr;       // (K, C)
  float* dwd = nullptr;       // (C, kh, kw)
  float* partials = nullptr;  // (group, K, C)
};
SeparableScratch carve_separable(Carver& c, const SeparableShape& s, const SeparableTiling& p);

// What each op asks Context::workspace for. Forward passes take only what their forward uses
// (conv: the columns; separable: the depthwise result; depthwise and dense: nothing); backward
// passes take the whole carve. The *_workspace figures of the Backend interface are the larger
// of the two.
std::size_t conv2d_forward_workspace(const Conv2dShape& s, DType t);
std::size_t conv2d_backward_workspace(const Conv2dShape& s, DType t);
std::size_t depthwise_conv2d_backward_workspace(const Conv2dShape& s);
std::size_t separable_conv2d_forward_workspace(const SeparableShape& s, DType t);
std::size_t separable_conv2d_backward_workspace(const SeparableShape& s, DType t);
// The loss's per-row values and its LossSummary (elementwise_kernels.cu); 0 for no rows.
std::size_t softmax_cross_entropy_workspace(std::int64_t rows);
// Bytes of the device-side summary the loss leaves for the host (LossSummary, cuda_kernels.hpp).
constexpr std::size_t kLossSummaryBytes = 32;

}  // namespace sluice::train::cuda_detail
