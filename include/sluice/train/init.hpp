// Parameter initialisation: He (Kaiming) normal for weights that feed a ReLU, seeded and
// counter-based, so the same seed gives the same weights on any device and at any thread count.
#pragma once

#include <cstdint>

#include "sluice/train/context.hpp"
#include "sluice/train/tensor.hpp"

namespace sluice::train {

// Fills f32 `w` with N(0, 2 / fan_in) draws (torch.nn.init.kaiming_normal_, mode fan_in,
// nonlinearity relu). Element i is a pure function of (key, i). Throws sluice::Error
// (kInvalidArgument) for a non-f32 tensor or fan_in < 1.
void he_normal(Context& ctx, Tensor& w, std::int64_t fan_in, std::uint64_t key);

}  // namespace sluice::train
