// Optimizers over a model's parameters: SGD with momentum (Nesterov optional) and AdamW, on top
// of ops::sgd_update and ops::adamw_update, with their state (momentum buffers, Adam moments) in
// the allocator under the optimizer-state category, created on the first step. And the learning
// rate schedule the trainer applies: linear warmup, then cosine decay to zero.
//
// Host offload (the `offload` option): the state lives instead in a host allocator of its own,
// whose memory is page-locked (cudaHostAlloc) when the context is a CUDA device and ordinary on
// the CPU. Each step streams every parameter's state through one device staging buffer per slot
// of kOffloadChunkElements (256 KiB; less when the largest parameter is smaller), category
// optimizer state: chunk by chunk, copy in, the same update op on that range of the parameter,
// copy back, queued on the device's stream without waiting (asynchronous from pinned memory), and
// one wait at the end of the step. The updates are elementwise, so a chunk's elements get the
// same arithmetic as in one call: the results equal the on-device optimizer's bit for bit, and
// the device holds only the staging.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sluice/train/allocator.hpp"
#include "sluice/train/context.hpp"
#include "sluice/train/layer.hpp"

namespace sluice::train {

// Elements of one offload chunk (a multiple of 64, so every chunk starts 256-byte aligned).
inline constexpr std::int64_t kOffloadChunkElements = 65536;

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
  // True when the state is offloaded to host memory.
  bool offloaded() const { return offload_; }
  // The host allocator of the offloaded state: null without offload and before the first step.
  const Allocator* host_state_allocator() const { return host_allocator_.get(); }
  // With offload: the host state's regions are reserved in `budget` (a training job's host side,
  // sluice/train/job_plan.hpp) as MemoryUse::kOffload. Set it before the first step.
  void set_host_state_budget(std::shared_ptr<MemoryBudget> budget) { host_budget_ = std::move(budget); }

 protected:
  // Checks `params` against the state's list and creates `slots` zero tensors per parameter on
  // the first call (on the host with offload, plus the device staging buffers).
  void prepare(Context& ctx, const std::vector<Parameter>& params, int slots);
  // Runs `update(w, g, state)` for parameter i: once on its own tensors, or with offload once a
  // chunk, on views of that range of the parameter and gradient and of the staging buffers, the
  // state copied in before and back after (queued).
  using Update = std::function<void(Tensor& w, const Tensor& g, std::vector<Tensor>& state)>;
  void update_parameter(Context& ctx, const Parameter& p, std::size_t i, const Update& update);
  // With offload, waits for the step's copies: the host state is current when step() returns.
  void finish_step(Context& ctx);

  bool offload_ = false;
  std::shared_ptr<MemoryBudget> host_budget_;  // declared before the allocator: outlives it
  std::unique_ptr<Allocator> host_allocator_;  // offload: the state's home (outlives state_)
  std::vector<std::vector<Tensor>> state_;  // per parameter: its slots (category optimizer state)
  std::vector<const Tensor*> bound_;        // the parameter each state entry belongs to
  std::vector<Tensor> staging_;             // offload: one device buffer per slot
  std::int64_t steps_ = 0;
};

struct SgdOptions {
  float learning_rate = 0.05f;
  float momentum = 0.9f;
  bool nesterov = true;
  float weight_decay = 5e-4f;  // L2 on parameters with Parameter::decay
  bool offload = false;        // momentum buffers in host memory (see the top of this file)
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
  bool offload = false;        // moments in host memory (see the top of this file)
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
