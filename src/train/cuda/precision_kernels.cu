// The CUDA backend's mixed-precision kernels: scale_cast (loss scaling and unscaling) and
// find_nonfinite (the check before an optimizer step). CPU twins: src/train/cpu/cpu_precision.cpp.
#include "train/cuda/cuda_common.cuh"
#include "train/cuda/cuda_kernels.hpp"

namespace sluice::train::cuda_detail {
namespace {

template <class S, class D>
__global__ void scale_cast_kernel(const S* src, float scale, D* dst, std::int64_t n) {
  // src may be dst (in place, one type): each element is read and written by the same thread.
  SLUICE_GRID_LOOP(i, n) { st(dst, i, ld(src, i) * scale); }
}

// An element whose exponent bits are all set is an infinity or a NaN. Every thread that finds
// one writes the same 1 into the flag, so the result does not depend on which does.
template <class Bits>
__global__ void find_nonfinite_kernel(const Bits* p, Bits exponent, std::int64_t n, float* flag) {
  bool found = false;
  SLUICE_GRID_LOOP(i, n) { found |= (p[i] & exponent) == exponent; }
  if (__syncthreads_or(found) && threadIdx.x == 0) *flag = 1.0f;
}

}  // namespace

void scale_cast(DType src_t, const void* src, float scale, DType dst_t, void* dst, std::int64_t n,
                cudaStream_t stream) {
  if (n == 0) return;
  with_float_type(src_t, [&](auto src_tag) {
    using S = typename decltype(src_tag)::type;
    with_float_type(dst_t, [&](auto dst_tag) {
      using D = typename decltype(dst_tag)::type;
      launch("scale_cast", &scale_cast_kernel<S, D>, grid_for(n), stream, static_cast<const S*>(src), scale,
             static_cast<D*>(dst), n);
    });
  });
}

void find_nonfinite(DType t, const void* data, std::int64_t n, float* flag, cudaStream_t stream) {
  if (n == 0) return;
  if (t == DType::kF32) {
    launch("find_nonfinite", &find_nonfinite_kernel<std::uint32_t>, grid_for(n), stream,
           static_cast<const std::uint32_t*>(data), 0x7f800000u, n, flag);
  } else {
    const auto exponent = static_cast<std::uint16_t>(t == DType::kF16 ? 0x7c00u : 0x7f80u);
    launch("find_nonfinite", &find_nonfinite_kernel<std::uint16_t>, grid_for(n), stream,
           static_cast<const std::uint16_t*>(data), exponent, n, flag);
  }
}

}  // namespace sluice::train::cuda_detail
