// The training step and evaluation over batches given as core views.
#include "sluice/train/trainer.hpp"

#include <string>

#include "sluice/core/error.hpp"
#include "sluice/train/ops.hpp"
#include "sluice/train/profiler.hpp"

namespace sluice::train {
namespace {

// A profiler slice over a scope; nothing without a profiler.
class Phase {
 public:
  Phase(Profiler* p, const char* name) : p_(p) {
    if (p_ != nullptr) p_->begin(name);
  }
  ~Phase() {
    if (p_ != nullptr) p_->end();
  }
  Phase(const Phase&) = delete;
  Phase& operator=(const Phase&) = delete;

 private:
  Profiler* p_;
};

}  // namespace

Trainer::Trainer(Context& ctx, Sequential& model, Optimizer& optimizer, TrainerOptions options)
    : ctx_(ctx), model_(model), optimizer_(optimizer), options_(options), params_(model.parameters()),
      mixed_(std::make_unique<MixedPrecision>(ctx, model, options.precision, options.loss_scaling)) {
  if (options_.accumulate < 1) {
    throw Error(ErrorCode::kInvalidArgument, "Trainer: accumulate must be >= 1 micro-batches per step, got " +
                                                 std::to_string(options_.accumulate));
  }
}

Trainer::Input Trainer::input(const TensorView& data, std::span<const std::int32_t> labels, DeviceId where,
                              void* ready_event) {
  const Shape& s = data.shape;
  const Shape& in = model_.input_shape();
  bool fits = data.dtype == DType::kF32 && s.rank() == in.rank() + 1 && s[0] >= 1;
  for (int i = 0; fits && i < in.rank(); ++i) fits = s[i + 1] == in[i];
  if (!fits) {
    throw Error(ErrorCode::kInvalidArgument, "Trainer: the batch is " + std::string(to_string(data.dtype)) + " " +
                                                 s.to_string() + "; the model takes f32 (N, " +
                                                 in.to_string().substr(1));
  }
  if (static_cast<std::int64_t>(labels.size()) != s[0]) {
    throw Error(ErrorCode::kInvalidArgument, "Trainer: " + std::to_string(labels.size()) + " labels for a batch of " +
                                                 std::to_string(s[0]));
  }
  auto* label_data = const_cast<std::int32_t*>(labels.data());  // read only: the ops take labels as const
  if (where == ctx_.device()) {
    // A device batch may still be in flight (the loader's copy stream): every op reading it is
    // queued after its event, whatever stream produced it.
    if (!where.is_host()) ctx_.wait_event(ready_event);
    return {Tensor::wrap(data, where, TensorCategory::kInputHost),
            Tensor::wrap(label_data, {s[0]}, DType::kI32, where, TensorCategory::kInputHost)};
  }
  if (!where.is_host()) {
    throw Error(ErrorCode::kInvalidArgument, "Trainer: the batch is on " + to_string(where) + ", the model on " +
                                                 to_string(ctx_.device()));
  }
  // A host batch for a device context: one device buffer, reused while the batch size holds.
  if (!staged_x_.defined() || staged_x_.shape() != s) {
    staged_x_ = ctx_.empty(s, DType::kF32, TensorCategory::kActivations);
    staged_labels_ = ctx_.empty({s[0]}, DType::kI32, TensorCategory::kActivations);
  }
  ops::copy_from_host(ctx_, data.data, staged_x_);
  ops::copy_from_host(ctx_, label_data, staged_labels_);
  return {staged_x_, staged_labels_};
}

BatchResult Trainer::step(const TensorView& data, std::span<const std::int32_t> labels, DeviceId where,
                          void* ready_event) {
  const std::int64_t k = options_.accumulate;
  if (data.shape.rank() >= 1 && data.shape[0] % k != 0) {
    throw Error(ErrorCode::kInvalidArgument, "Trainer: a batch of " + std::to_string(data.shape[0]) +
                                                 " does not split into " + std::to_string(k) +
                                                 " equal micro-batches (accumulate must divide the batch size)");
  }
  Input in = input(data, labels, where, ready_event);
  if (options_.schedule) optimizer_.set_learning_rate(options_.schedule->at(steps_));
  const std::int64_t micro = data.shape[0] / k;
  BatchResult result;
  try {
    mixed_->begin_step(StepKind::kTraining);  // 16-bit weight copies (and f16's restore point), once a step
    for (std::int64_t j = 0; j < k; ++j) {
      const Tensor x = mixed_->cast_input(k == 1 ? in.x : in.x.slice(j * micro, (j + 1) * micro));
      const Tensor y = k == 1 ? in.labels : in.labels.slice(j * micro, (j + 1) * micro);
      Tensor logits;
      Tensor dlogits;
      LossResult loss;
      {
        const Phase phase(options_.profiler, "forward");
        logits = model_.forward(ctx_, x, ForwardMode{.training = true, .step = static_cast<std::uint64_t>(steps_),
                                                     .sample_offset = static_cast<std::uint64_t>(j * micro)});
        logits = mixed_->logits_f32(std::move(logits));  // loss and softmax in f32
        dlogits = ctx_.empty(logits.shape(), logits.dtype(), TensorCategory::kActivations);
        loss = ops::softmax_cross_entropy(ctx_, logits, y, &dlogits);
        logits.reset();
      }
      // The micro-batch's mean gradient over N / K images, times 1 / K: the K of them add up to
      // the full batch's mean (bit for bit the full batch's dlogits when K is a power of two).
      if (k > 1) ops::scale(ctx_, dlogits, 1.0f / static_cast<float>(k));
      {
        const Phase phase(options_.profiler, "backward");
        model_.backward(ctx_, mixed_->scale_loss_gradient(std::move(dlogits)),
                        j == 0 ? GradMode::kOverwrite : GradMode::kAccumulate);
      }
      result += BatchResult{loss.loss * static_cast<double>(micro), loss.correct, micro};
    }
  } catch (...) {
    model_.release_saved();
    throw;
  }
  {
    const Phase phase(options_.profiler, "optimizer");
    if (mixed_->finish_backward()) optimizer_.step(ctx_, params_);  // false: an f16 step skipped
  }
  ++steps_;
  return result;
}

BatchResult Trainer::evaluate(const TensorView& data, std::span<const std::int32_t> labels, DeviceId where,
                              void* ready_event) {
  Input in = input(data, labels, where, ready_event);
  mixed_->begin_step(StepKind::kEvaluation);
  const Tensor x = mixed_->cast_input(in.x);
  const Tensor logits = mixed_->logits_f32(model_.forward(ctx_, x, ForwardMode{.training = false}));
  const LossResult loss = ops::softmax_cross_entropy(ctx_, logits, in.labels, nullptr);
  return {loss.loss * static_cast<double>(data.shape[0]), loss.correct, data.shape[0]};
}

}  // namespace sluice::train
