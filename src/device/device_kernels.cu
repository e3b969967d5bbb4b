// The device module's CUDA kernels: the batch normalize kernel (u8 HWC in, f32/f16/bf16 NCHW or
// NHWC out; the CPU twin is GpuNormalizer::run_reference) and a spin kernel that stands in for a
// training step in the overlap test.
//
// Bit-identity with the CPU: (x / 255 - mean) / std with the round-to-nearest IEEE intrinsics
// (__fdiv_rn, __fsub_rn), which also keep nvcc from contracting or approximating anything
// whatever the flags; f16 and bf16 with the _rn conversions, round-to-nearest-even like
// sluice::float_to_f16 / float_to_bf16 (the values are finite, so their NaN handling never
// matters).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "device/cuda_backend.hpp"
#include "device/launch.cuh"

namespace sluice::device_detail {
namespace {

constexpr int kThreads = 256;
// Pixels a block covers per image before its threads stride on: enough blocks to fill an H200's
// 132 SMs several times over for a 224x224 batch of 64, few enough that each thread does work.
constexpr int kPixelsPerThread = 4;

struct ToF32 {
  using T = float;
  __device__ static float convert(float v) { return v; }
};
struct ToF16 {
  using T = unsigned short;
  __device__ static unsigned short convert(float v) { return __half_as_ushort(__float2half_rn(v)); }
};
struct ToBF16 {
  using T = unsigned short;
  __device__ static unsigned short convert(float v) { return __bfloat16_as_ushort(__float2bfloat16_rn(v)); }
};

// grid: (pixel blocks, batch). Thread t of block b handles pixels b * kThreads + t, then + stride.
// Reads: a warp's 32 consecutive pixels are 32 * channels consecutive bytes. Writes: NCHW, each
// channel plane gets 32 consecutive elements per warp; NHWC, 32 * channels consecutive ones.
template <class Out, bool kNchw>
__global__ void __launch_bounds__(kThreads) normalize_kernel(NormalizeLaunch p) {
  using T = typename Out::T;
  const std::int64_t n = blockIdx.y;
  const int channels = p.channels;
  const std::uint8_t* src = p.src + n * p.pixels * channels;
  T* dst = static_cast<T*>(p.dst) + n * p.pixels * channels;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.pixels; i += stride) {
    const std::uint8_t* px = src + i * channels;
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      if (c < channels) {
        const float x = static_cast<float>(px[c]);
        const float v = __fdiv_rn(__fsub_rn(__fdiv_rn(x, 255.0f), p.mean[c]), p.std[c]);
        dst[kNchw ? c * p.pixels + i : i * channels + c] = Out::convert(v);
      }
    }
  }
}

__device__ std::uint64_t global_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(std::uint64_t nanoseconds) {
  const std::uint64_t start = global_ns();
  while (global_ns() - start < nanoseconds) __nanosleep(1000);
}

template <class Out>
void launch_typed(const NormalizeLaunch& p, const LaunchShape& shape, cudaStream_t stream) {
  launch("the normalize kernel", p.nchw ? &normalize_kernel<Out, true> : &normalize_kernel<Out, false>, shape, stream,
         p);
}

}  // namespace

void launch_normalize(int device, const NormalizeLaunch& p, void* native_stream) {
  if (p.batch <= 0 || p.pixels <= 0) return;
  ScopedDevice guard(device);
  // About kPixelsPerThread pixels a thread: a grid-stride shape over pixels / kPixelsPerThread.
  const LaunchShape per_image =
      LaunchShape::grid_stride((p.pixels + kPixelsPerThread - 1) / kPixelsPerThread, kThreads);
  auto* stream = static_cast<cudaStream_t>(native_stream);
  const std::int64_t image_elements = p.pixels * p.channels;
  const std::int64_t out_size = p.dtype == 0 ? 4 : 2;
  // gridDim.y is at most 65535: larger batches go in chunks of images.
  for (std::int64_t first = 0; first < p.batch; first += LaunchShape::kMaxGridYZ) {
    NormalizeLaunch chunk = p;
    chunk.batch = std::min<std::int64_t>(LaunchShape::kMaxGridYZ, p.batch - first);
    chunk.src = p.src + first * image_elements;
    chunk.dst = static_cast<char*>(p.dst) + first * image_elements * out_size;
    LaunchShape shape = per_image;
    shape.grid_y = static_cast<std::uint32_t>(chunk.batch);
    switch (p.dtype) {
      case 0: launch_typed<ToF32>(chunk, shape, stream); break;
      case 1: launch_typed<ToF16>(chunk, shape, stream); break;
      default: launch_typed<ToBF16>(chunk, shape, stream); break;
    }
  }
}

void launch_spin(int device, std::uint64_t nanoseconds, void* native_stream) {
  ScopedDevice guard(device);
  launch("the spin kernel", &spin_kernel, LaunchShape::per_block(1, 1), static_cast<cudaStream_t>(native_stream),
         nanoseconds);
}

}  // namespace sluice::device_detail
