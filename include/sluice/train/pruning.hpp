// Magnitude pruning: a sparsity schedule, per-tensor masks that zero the smallest weights, applied
// after every optimizer step, and the measurement of the sparsity reached.
//
// The schedule is TensorFlow Model Optimization's PolynomialDecay (tfmot.sparsity.keras,
// python/core/sparsity/keras/pruning_schedule.py), to the letter:
//   p        = clamp((step - begin_step) / (end_step - begin_step), 0, 1)
//   sparsity = final_sparsity + (initial_sparsity - final_sparsity) * (1 - p)^power
// and the masks are recomputed only at steps in [begin_step, end_step] with
// (step - begin_step) % frequency == 0 (its _should_prune_in_step). Between those steps the last
// masks keep being applied, so a pruned weight stays zero to the end of training.
//
// What is pruned: the weights of convolutions, depthwise and pointwise convolutions and dense
// layers (the parameters of rank >= 2); never biases nor BatchNorm's gamma and beta (rank 1).
// A mask keeps exactly k = max(1, round(n * (1 - sparsity))) of a tensor's n elements: those of
// largest |w|, ties broken by the lower index (TF keeps every element >= the k-th largest |w|,
// which keeps more than k on ties; ours is exact and deterministic).
//
// Masks are bitmaps on the host (one bit an element). Applying them sets the pruned elements to
// +0.0 (not w * 0, which would leave -0.0): in place for host tensors, through a host copy for
// device tensors. Applying them after every step is what keeps pruned weights at zero although
// the optimizer's momentum keeps moving them: the step may make them nonzero, the mask puts them
// back before the next forward.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sluice/train/context.hpp"
#include "sluice/train/layer.hpp"

namespace sluice::train {

struct PolynomialDecay {
  double initial_sparsity = 0.0;
  double final_sparsity = 0.8;
  std::int64_t begin_step = 0;
  std::int64_t end_step = 1000;
  double power = 3.0;
  std::int64_t frequency = 100;

  // TF's checks: sparsities in [0, 1), 0 <= begin_step <= end_step, frequency > 0. Throws
  // sluice::Error(kInvalidArgument) naming the offending field.
  void validate() const;
  // The target sparsity at `step` (clamped outside [begin_step, end_step]).
  double sparsity(std::int64_t step) const;
  // True when the masks are recomputed at `step`.
  bool should_prune(std::int64_t step) const;
};

// True for the parameters pruning applies to: rank >= 2 (convolution, depthwise, pointwise and
// dense weights).
bool is_prunable(const Parameter& p);

// One tensor's mask: bit i of bits[i / 64] set when element i is kept.
struct PruneMask {
  std::string name;
  std::int64_t elements = 0;
  std::int64_t kept = 0;
  std::vector<std::uint64_t> bits;

  bool keeps(std::int64_t i) const { return (bits[static_cast<std::size_t>(i >> 6)] >> (i & 63)) & 1u; }
  std::int64_t pruned() const { return elements - kept; }
};

// The bitmap of the elements a mask at `sparsity` keeps for `values`: the k of largest |v|.
PruneMask magnitude_mask(const float* values, std::int64_t n, double sparsity);

class MagnitudePruner {
 public:
  // Masks for the prunable ones of `params`, all keeping everything until the first update. The
  // parameters must outlive the pruner. Throws as PolynomialDecay::validate().
  MagnitudePruner(const std::vector<Parameter>& params, PolynomialDecay schedule);

  // After the optimizer's step number `step` (0 for the first): recomputes the masks at
  // schedule.sparsity(step) when schedule.should_prune(step), then applies them. Returns true
  // when the masks were recomputed.
  bool after_step(Context& ctx, std::int64_t step);
  // Recomputes every mask at `sparsity` from the current weights (and applies them).
  void update_masks(Context& ctx, double sparsity);
  // Zeroes the pruned elements of every prunable weight.
  void apply(Context& ctx);

  // The pruned fraction of the prunable elements by the masks, and the last target it was set to.
  double sparsity() const;
  double target() const { return target_; }
  const std::vector<PruneMask>& masks() const { return masks_; }
  const PolynomialDecay& schedule() const { return schedule_; }

 private:
  std::vector<float> host_values(Context& ctx, const Tensor& t) const;

  PolynomialDecay schedule_;
  std::vector<Tensor*> tensors_;  // the prunable parameters' values, by position in masks_
  std::vector<PruneMask> masks_;
  double target_ = 0.0;
};

// The fraction of exact zeros in the model's prunable parameters: what the masks achieved, as
// the weights show it.
double measured_sparsity(Context& ctx, const std::vector<Parameter>& params);

}  // namespace sluice::train
