// SGD and AdamW: per-parameter state by position, the update ops, and the cosine schedule.
#include "sluice/train/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numbers>

#include "sluice/core/error.hpp"
#include "sluice/train/ops.hpp"

namespace sluice::train {

void Optimizer::prepare(Context& ctx, const std::vector<Parameter>& params, int slots) {
  if (bound_.empty() && offload_) {
    std::unique_ptr<Backing> backing = make_pinned_host_backing(ctx.device());
    if (host_budget_) {
      backing = make_budgeted_backing(std::move(backing), host_budget_, BudgetedBackingOptions{.use = MemoryUse::kOffload});
    }
    host_allocator_ = std::make_unique<Allocator>(std::move(backing), AllocatorOptions{.name = "optimizer state (host)"});
    std::int64_t largest = 0;
    for (const Parameter& p : params) {
      std::vector<Tensor> s;
      for (int i = 0; i < slots; ++i) {
        Tensor t(*host_allocator_, p.value->shape(), DType::kF32, TensorCategory::kOptimizerState);
        std::memset(t.data(), 0, t.bytes());
        s.push_back(std::move(t));
      }
      state_.push_back(std::move(s));
      bound_.push_back(p.value);
      largest = std::max(largest, p.value->elements());
    }
    const std::int64_t chunk = std::min(largest, kOffloadChunkElements);
    for (int i = 0; i < slots && chunk > 0; ++i) {
      staging_.push_back(ctx.empty({chunk}, DType::kF32, TensorCategory::kOptimizerState));
    }
    return;
  }
  if (bound_.empty()) {
    for (const Parameter& p : params) {
      std::vector<Tensor> s;
      for (int i = 0; i < slots; ++i) s.push_back(ctx.zeros(p.value->shape(), DType::kF32, TensorCategory::kOptimizerState));
      state_.push_back(std::move(s));
      bound_.push_back(p.value);
    }
    return;
  }
  if (params.size() != bound_.size()) {
    throw Error(ErrorCode::kInvalidArgument, "optimizer: " + std::to_string(params.size()) +
                                                 " parameters, but its state is for " + std::to_string(bound_.size()));
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (params[i].value != bound_[i]) {
      throw Error(ErrorCode::kInvalidArgument, "optimizer: parameter " + params[i].name +
                                                   " is not the one its state was created for");
    }
  }
}

void Optimizer::update_parameter(Context& ctx, const Parameter& p, std::size_t i, const Update& update) {
  if (!offload_) {
    update(*p.value, *p.grad, state_[i]);
    return;
  }
  const std::int64_t n = p.value->elements();
  // Elements [begin, begin + count) of t, in its own dtype (the state is f32; a parameter or
  // gradient of another dtype is for the update op to accept or refuse).
  auto range = [](const Tensor& t, std::int64_t begin, std::int64_t count, DeviceId device) {
    return Tensor::wrap(static_cast<std::uint8_t*>(t.data()) + static_cast<std::size_t>(begin) * size_of(t.dtype()),
                        {count}, t.dtype(), device, t.category());
  };
  std::vector<Tensor> staged(state_[i].size());
  for (std::int64_t begin = 0; begin < n; begin += kOffloadChunkElements) {
    const std::int64_t count = std::min(kOffloadChunkElements, n - begin);
    Tensor w = range(*p.value, begin, count, ctx.device());
    const Tensor g = range(*p.grad, begin, count, ctx.device());
    for (std::size_t s = 0; s < staged.size(); ++s) {
      staged[s] = range(staging_[s], 0, count, ctx.device());
      ops::copy_from_host_async(ctx, state_[i][s].data_as<float>() + begin, staged[s]);
    }
    update(w, g, staged);
    for (std::size_t s = 0; s < staged.size(); ++s) {
      ops::copy_to_host_async(ctx, staged[s], state_[i][s].data_as<float>() + begin);
    }
  }
}

void Optimizer::finish_step(Context& ctx) {
  if (offload_) ctx.synchronize();
}

Sgd::Sgd(SgdOptions options) : options_(options) {
  offload_ = options.offload;
  if (!(options.learning_rate >= 0.0f) || !(options.momentum >= 0.0f) || !(options.weight_decay >= 0.0f)) {
    throw Error(ErrorCode::kInvalidArgument, "Sgd: learning rate, momentum and weight decay must be >= 0");
  }
}

void Sgd::step(Context& ctx, const std::vector<Parameter>& params) {
  const bool momentum = options_.momentum != 0.0f;
  prepare(ctx, params, momentum ? 1 : 0);
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Parameter& p = params[i];
    SgdUpdate u{.learning_rate = options_.learning_rate,
                .momentum = options_.momentum,
                .nesterov = options_.nesterov,
                .weight_decay = p.decay == WeightDecay::kApply ? options_.weight_decay : 0.0f,
                .first_step = steps_ == 0};
    update_parameter(ctx, p, i, [&](Tensor& w, const Tensor& g, std::vector<Tensor>& s) {
      ops::sgd_update(ctx, u, w, g, momentum ? &s[0] : nullptr);
    });
  }
  finish_step(ctx);
  ++steps_;
}

std::string Sgd::describe() const {
  char text[160];
  std::snprintf(text, sizeof text, "SGD lr %g, momentum %g%s, weight decay %g%s", options_.learning_rate,
                options_.momentum, options_.nesterov ? " (Nesterov)" : "", options_.weight_decay,
                options_.offload ? ", momentum offloaded to host" : "");
  return text;
}

AdamW::AdamW(AdamWOptions options) : options_(options) {
  offload_ = options.offload;
  if (!(options.learning_rate >= 0.0f) || !(options.beta1 >= 0.0f && options.beta1 < 1.0f) ||
      !(options.beta2 >= 0.0f && options.beta2 < 1.0f) || !(options.epsilon > 0.0f) || !(options.weight_decay >= 0.0f)) {
    throw Error(ErrorCode::kInvalidArgument, "AdamW: needs lr >= 0, betas in [0, 1), epsilon > 0, weight decay >= 0");
  }
}

void AdamW::step(Context& ctx, const std::vector<Parameter>& params) {
  prepare(ctx, params, 2);
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Parameter& p = params[i];
    AdamWUpdate u{.learning_rate = options_.learning_rate,
                  .beta1 = options_.beta1,
                  .beta2 = options_.beta2,
                  .epsilon = options_.epsilon,
                  .weight_decay = p.decay == WeightDecay::kApply ? options_.weight_decay : 0.0f,
                  .step = steps_ + 1};
    update_parameter(ctx, p, i, [&](Tensor& w, const Tensor& g, std::vector<Tensor>& s) {
      ops::adamw_update(ctx, u, w, g, s[0], s[1]);
    });
  }
  finish_step(ctx);
  ++steps_;
}

std::string AdamW::describe() const {
  char text[160];
  std::snprintf(text, sizeof text, "AdamW lr %g, betas (%g, %g), weight decay %g%s", options_.learning_rate,
                options_.beta1, options_.beta2, options_.weight_decay,
                options_.offload ? ", moments offloaded to host" : "");
  return text;
}

float CosineSchedule::at(std::int64_t step) const {
  if (total_steps <= 0) return base;
  if (step < warmup_steps) return base * static_cast<float>(step + 1) / static_cast<float>(warmup_steps);
  if (step >= total_steps) return 0.0f;
  const double span = static_cast<double>(std::max<std::int64_t>(1, total_steps - warmup_steps));
  const double t = static_cast<double>(step - warmup_steps) / span;
  return static_cast<float>(0.5 * base * (1.0 + std::cos(std::numbers::pi * t)));
}

}  // namespace sluice::train
