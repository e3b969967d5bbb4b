// The per-sample augmentations that are not geometry (docs/design.md, "The life of a sample"):
// the pixel ops (color_jitter, grayscale, random_grayscale, random_rotation, random_affine,
// gaussian_blur, the random point ops, trivial_augment_wide, rand_augment, auto_augment) run on
// the u8 sample at the output size after the resampling, in the chain's order; the slot ops (random_erasing) run on the
// normalised sample in its batch slot. Each op draws its parameters from its own stream for the
// sample (its key, the sample's item, epoch and attempt), as the geometry ops do, so the same
// seed gives the same samples at any thread count. The kernels are in stages/augment/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "sluice/pipeline/spec.hpp"
#include "stages/augment/erase.hpp"
#include "stages/image/geometry.hpp"

namespace sluice::stages {

struct AugmentStep {
  spec::Stage op;
  std::uint64_t key = 0;  // random stream of this op (its seed and its place among these ops)
};

// The channels the sample has after the pixel ops, from `channels` decoded (grayscale with one
// output channel narrows it).
int channels_after(const std::vector<AugmentStep>& pixel_ops, int channels);

// The scratch the pixel ops need for a sample of `size` x `channels`: the most any one needs (a
// warp's second image, the blur's and the sharpness filter's rows); 0 for the colour ops.
std::size_t pixel_ops_workspace_bytes(const std::vector<AugmentStep>& pixel_ops, Size2 size, int channels);

// Runs the pixel ops on `image` in place; returns the image as they leave it (one channel after
// grayscale(1)). workspace: pixel_ops_workspace_bytes() at least.
ImageView run_pixel_ops(const std::vector<AugmentStep>& pixel_ops, ImageView image, std::span<std::byte> workspace,
                        const SampleKey& key);

// Runs the slot ops on the sample in its slot.
void run_slot_ops(const std::vector<AugmentStep>& slot_ops, const SlotSample& slot, const SampleKey& key);

}  // namespace sluice::stages
