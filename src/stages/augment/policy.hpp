// The automatic augmentation policies: torchvision's TrivialAugmentWide, RandAugment and
// AutoAugment (ImageNet and CIFAR-10 policies), with its op tables, magnitude bins and signed
// draws, and its _apply_op on a PIL image: each op runs the kernel of this folder that matches
// torchvision's functional op (color.hpp, point_ops.hpp, affine.hpp). The draws come from the
// sample's counter-based stream, not torch's generator; for a given (op, magnitude) the bytes are
// torchvision's.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "sluice/core/rng.hpp"
#include "stages/augment/affine.hpp"

namespace sluice::stages {

enum class PolicyOp : std::uint8_t {
  kIdentity, kShearX, kShearY, kTranslateX, kTranslateY, kRotate, kBrightness, kColor, kContrast, kSharpness,
  kPosterize, kSolarize, kAutoContrast, kEqualize, kInvert
};

// One op with its magnitude, signed as torchvision hands it to _apply_op.
struct PolicyStep {
  PolicyOp op = PolicyOp::kIdentity;
  double magnitude = 0;
};

// torchvision's magnitude of bin `bin` of `bins` for `op` in each policy's table (float32 values,
// as torch.linspace gives them), unsigned. `size` is the image's (the translations scale with it).
double trivial_augment_magnitude(PolicyOp op, int bin, int bins);
double rand_augment_magnitude(PolicyOp op, int bin, int bins, Size2 size);  // AutoAugment's too (10 bins)

// TrivialAugmentWide.forward's draw: one of its 14 ops, one of `bins` magnitudes, a sign.
PolicyStep trivial_augment_wide_step(int bins, CounterRng& rng);
// One of RandAugment.forward's num_ops draws: one of its 14 ops at bin `magnitude`, a sign.
PolicyStep rand_augment_step(int magnitude, int bins, Size2 size, CounterRng& rng);

enum class AutoAugmentTable : std::uint8_t { kImageNet, kCifar10 };
// AutoAugment.forward's draw: a sub-policy, then each of its two ops with its probability (an op
// not applied is kIdentity).
std::array<PolicyStep, 2> auto_augment_steps(AutoAugmentTable table, Size2 size, CounterRng& rng);

// Scratch apply_policy_step needs for an image of `size` x `channels`: a second image for the
// warps and the sharpness kernel's rows.
std::size_t policy_workspace_bytes(Size2 size, int channels);

// torchvision's _apply_op on a PIL image, in place. workspace: policy_workspace_bytes() at least.
void apply_policy_step(const PolicyStep& step, ImageView image, WarpInterpolation interpolation,
                       std::span<const std::uint8_t> fill, std::span<std::byte> workspace);

}  // namespace sluice::stages
