// SGD and AdamW: per-parameter state by position, the update ops, and the cosine schedule.
#include "sluice/train/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>

#include "sluice/core/error.hpp"
#include "sluice/train/ops.hpp"

namespace sluice::train {

void Optimizer::prepare(Context& ctx, const std::vector<Parameter>& params, int slots) {
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

Sgd::Sgd(SgdOptions options) : options_(options) {
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
                .weight_decay = p.decay ? options_.weight_decay : 0.0f,
                .first_step = steps_ == 0};
    ops::sgd_update(ctx, u, *p.value, *p.grad, momentum ? &state_[i][0] : nullptr);
  }
  ++steps_;
}

std::string Sgd::describe() const {
  char text[160];
  std::snprintf(text, sizeof text, "SGD lr %g, momentum %g%s, weight decay %g", options_.learning_rate,
                options_.momentum, options_.nesterov ? " (Nesterov)" : "", options_.weight_decay);
  return text;
}

AdamW::AdamW(AdamWOptions options) : options_(options) {
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
                  .weight_decay = p.decay ? options_.weight_decay : 0.0f,
                  .step = steps_ + 1};
    ops::adamw_update(ctx, u, *p.value, *p.grad, state_[i][0], state_[i][1]);
  }
  ++steps_;
}

std::string AdamW::describe() const {
  char text[160];
  std::snprintf(text, sizeof text, "AdamW lr %g, betas (%g, %g), weight decay %g", options_.learning_rate,
                options_.beta1, options_.beta2, options_.weight_decay);
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
