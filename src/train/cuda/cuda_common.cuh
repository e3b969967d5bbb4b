// Device-side helpers shared by the CUDA backend's kernel files: 16-bit load/store widened to f32
// (round-to-nearest-even on store, as sluice::float_to_f16 / float_to_bf16 on the CPU), dispatch
// on a floating dtype, the launch shape of grid-stride loops, and a deterministic block reduction
// (fixed shapes and order, so a result does not change from run to run). Every kernel is
// launched through device_detail::launch (device/launch.cuh), which launches nothing for empty
// work.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "device/launch.cuh"
#include "sluice/core/dtype.hpp"
#include "sluice/core/error.hpp"

namespace sluice::train::cuda_detail {

constexpr int kThreads = 256;

__device__ __forceinline__ float ld(const float* p, std::int64_t i) { return p[i]; }
__device__ __forceinline__ float ld(const __half* p, std::int64_t i) { return __half2float(p[i]); }
__device__ __forceinline__ float ld(const __nv_bfloat16* p, std::int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void st(float* p, std::int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void st(__half* p, std::int64_t i, float v) { p[i] = __float2half_rn(v); }
__device__ __forceinline__ void st(__nv_bfloat16* p, std::int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }

template <class T>
struct Tag {
  using type = T;
};

// f(Tag<float>{}), f(Tag<__half>{}) or f(Tag<__nv_bfloat16>{}) by `t`.
template <class F>
void with_float_type(DType t, F&& f) {
  switch (t) {
    case DType::kF32: f(Tag<float>{}); return;
    case DType::kF16: f(Tag<__half>{}); return;
    case DType::kBF16: f(Tag<__nv_bfloat16>{}); return;
    default: break;
  }
  throw Error(ErrorCode::kInternal, "CUDA backend: not a floating dtype: " + std::string(to_string(t)));
}

using device_detail::launch;
using device_detail::LaunchShape;

// A grid-stride loop over n items in blocks of kThreads: empty (nothing launched) for n <= 0.
inline LaunchShape grid_for(std::int64_t n) { return LaunchShape::grid_stride(n, kThreads); }

#define SLUICE_GRID_LOOP(i, n)                                                                  \
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)

template <class T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

// The sum of v over the block (blockDim.x a multiple of 32, at most 1024), returned to every
// thread. `shared` holds 32 values; every thread of the block must call it.
template <class T>
__device__ T block_sum(T v, T* shared) {
  v = warp_sum(v);
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  __syncthreads();  // a previous call's readers are done with shared[]
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  v = threadIdx.x < warps ? shared[threadIdx.x] : T(0);
  if (warp == 0) v = warp_sum(v);
  if (threadIdx.x == 0) shared[0] = v;
  __syncthreads();
  return shared[0];
}

}  // namespace sluice::train::cuda_detail
