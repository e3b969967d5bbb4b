// The erase kernel: torchvision's F.erase on the normalised sample where it lies in its batch
// slot (any of the batch's dtypes and layouts), after normalize(), as torchvision's RandomErasing
// follows Normalize. A rectangle takes a constant per channel, or a standard normal value per
// element ("random") drawn from the sample's stream. It writes the slot in place: no workspace.
#pragma once

#include <span>

#include "sluice/core/dtype.hpp"
#include "sluice/core/rng.hpp"
#include "sluice/detail/core/image.hpp"

namespace sluice::stages {

// One sample in its slot: size x channels values of `dtype` in `layout` (CHW for kNCHW).
struct SlotSample {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Layout layout = Layout::kNCHW;
  int channels = 3;
  Size2 size;
};

// Writes values[c] (values.size() == 1: values[0] in every channel) into `rect`, converted to the
// slot's dtype as torch's assignment converts (rounded to nearest even for f16 and bf16, truncated
// for u8).
void erase_constant(const SlotSample& slot, Rect rect, std::span<const float> values);
// Writes a standard normal value per element of `rect`, drawn from `rng` channel by channel, row
// by row (torchvision's v of shape (C, h, w)).
void erase_random(const SlotSample& slot, Rect rect, CounterRng& rng);

}  // namespace sluice::stages
