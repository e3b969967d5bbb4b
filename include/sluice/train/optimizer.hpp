// Optimizers over a model's parameters: SGD with momentum (Nesterov optional) and AdamW, on top
// of ops::sgd_update and ops::adamw_update, with their state (momentum buffers, Adam moments) in
// the allocator under the optimizer-state category, created on the first step. And the learning
// rate schedule the trainer applies: linear warmup, then cosine decay to zero.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sluice/train/context.hpp"
#include "sluice/train/layer.hpp"

namespace sluice::train {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update of every parameter from its gradient. The list must be the same (same tensors,
  // same order) at every step: the state is kept by position. Throws sluice::Error
  // (kInvalidArgument) when it changed.
  virtual void step(Context& ctx, const std::vector<Parameter>& params) = 0;
  virtual float learning_rate() const = 0;
  virtual void set_learning_rate(float lr) = 0;
  virtual std::string describe() const = 0;
  // Steps taken so far.
  std::int64_t steps() const { return steps_; }

 protected:
  // Checks `params` against the state's list and creates `slots` zero tensors per parameter on
  // the first call.
  void prepare(Context& ctx, const std::vector<Parameter>& params, int slots);
  std::vector<std::vector<Tensor>> state_;  // per parameter: its slots (category optimizer state)
  std::vector<const Tensor*> bound_;        // the parameter each state entry belongs to
  std::int64_t steps_ = 0;
};

struct SgdOptions {
  float learning_rate = 0.05f;
  float momentum = 0.9f;
  bool nesterov = true;
  float weight_decay = 5e-4f;  // L2 on parameters with Parameter::decay
};

// torch.optim.SGD.
class Sgd : public Optimizer {
 public:
  explicit Sgd(SgdOptions options = {});
  void step(Context& ctx, const std::vector<Parameter>& params) override;
  float learning_rate() const override { return options_.learning_rate; }
  void set_learning_rate(float lr) override { options_.learning_rate = lr; }
  std::string describe() const override;

 private:
  SgdOptions options_;
};

struct AdamWOptions {
  float learning_rate = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
  float weight_decay = 0.01f;  // decoupled, on parameters with Parameter::decay
};

// torch.optim.AdamW.
class AdamW : public Optimizer {
 public:
  explicit AdamW(AdamWOptions options = {});
  void step(Context& ctx, const std::vector<Parameter>& params) override;
  float learning_rate() const override { return options_.learning_rate; }
  void set_learning_rate(float lr) override { options_.learning_rate = lr; }
  std::string describe() const override;

 private:
  AdamWOptions options_;
};

// The learning rate at a step: linear warmup from base/warmup to base over `warmup_steps`, then
// cosine decay to zero at `total_steps` (and zero after it). total_steps 0: constant `base`.
struct CosineSchedule {
  float base = 0.05f;
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 0;

  float at(std::int64_t step) const;
};

}  // namespace sluice::train
