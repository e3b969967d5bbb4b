// LaunchShape: the grid and block of one kernel launch, sized here in plain C++ (no CUDA header) so
// that the host tests can check the sizing, and the rule every launch of src/device and
// src/train/cuda follows through launch() (device/launch.cuh): empty work launches nothing. A grid
// with a zero dimension is not a no-op to CUDA but a launch error (cudaErrorInvalidConfiguration),
// and a batch, a tensor or a channel count can legitimately be zero.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace sluice::device_detail {

struct LaunchShape {
  // CUDA's limits: gridDim.x < 2^31, gridDim.y and z <= 65535. Grid-stride loops are capped far
  // below (kMaxStrideBlocks): past a few thousand blocks per SM more blocks only add scheduling.
  static constexpr std::int64_t kMaxGridX = (std::int64_t{1} << 31) - 1;
  static constexpr std::int64_t kMaxGridYZ = 65535;
  static constexpr std::int64_t kMaxStrideBlocks = std::int64_t{1} << 20;

  std::uint32_t grid_x = 0;
  std::uint32_t grid_y = 1;
  std::uint32_t grid_z = 1;
  std::uint32_t threads = 0;  // per block, a multiple of 32 for the kernels' warp reductions
  std::size_t shared_bytes = 0;

  // No work: launch() returns without launching.
  constexpr bool empty() const { return grid_x == 0 || grid_y == 0 || grid_z == 0 || threads == 0; }
  constexpr std::int64_t blocks() const { return std::int64_t{grid_x} * grid_y * grid_z; }

  // A grid-stride loop over `items` (each thread strides by the grid): enough blocks to give every
  // item a thread, at most kMaxStrideBlocks; empty when items <= 0.
  static constexpr LaunchShape grid_stride(std::int64_t items, int threads) {
    if (items <= 0 || threads <= 0) return {};
    const std::int64_t blocks = std::min((items + threads - 1) / threads, kMaxStrideBlocks);
    return {static_cast<std::uint32_t>(blocks), 1, 1, static_cast<std::uint32_t>(threads), 0};
  }

  // One block per unit of work (a channel, a (channel, tap) pair): `count` blocks; empty when
  // count <= 0. A count past CUDA's gridDim.x limit is a caller's bug: empty too, and the
  // caller's range check (ops.cpp limits every dimension to 2^30) keeps it from happening.
  static constexpr LaunchShape per_block(std::int64_t count, int threads) {
    if (count <= 0 || count > kMaxGridX || threads <= 0) return {};
    return {static_cast<std::uint32_t>(count), 1, 1, static_cast<std::uint32_t>(threads), 0};
  }

  // `items` units of `per_block_items` each per block (a warp per row: threads / 32 rows a
  // block): ceil(items / per_block_items) blocks; empty when items <= 0.
  static constexpr LaunchShape grouped(std::int64_t items, std::int64_t per_block_items, int threads) {
    if (items <= 0 || per_block_items <= 0) return {};
    return per_block((items + per_block_items - 1) / per_block_items, threads);
  }
};

}  // namespace sluice::device_detail
