// The planner's meta backend (backend.hpp): every op does nothing but take the workspace the
// target backend would (the same Context::workspace request, hence the same allocation), and the
// loss is 0. A training step on it allocates exactly the tensors a real one does and computes
// nothing, so the allocator's statistics after it are the real step's (sluice/train/planner.hpp).
#include <cstring>

#include "train/backend.hpp"

namespace sluice::train {
namespace {

class MetaBackend final : public Backend {
 public:
  explicit MetaBackend(std::unique_ptr<Backend> target) : target_(std::move(target)) {}

  std::string describe() const override { return "meta (plans for " + target_->describe() + ")"; }
  void synchronize() override {}

  std::size_t conv2d_workspace(const Conv2dShape& s, DType dtype) const override {
    return target_->conv2d_workspace(s, dtype);
  }
  void conv2d_forward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor&, const Tensor*,
                      Tensor&) override {
    ctx.workspace(conv2d_workspace(s, x.dtype()));
  }
  void conv2d_backward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor&, const Tensor&, Tensor*,
                       Tensor&, Tensor*, GradMode) override {
    ctx.workspace(conv2d_workspace(s, x.dtype()));
  }

  std::size_t depthwise_conv2d_workspace(const Conv2dShape& s, DType dtype) const override {
    return target_->depthwise_conv2d_workspace(s, dtype);
  }
  void depthwise_conv2d_forward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor&, const Tensor*,
                                Tensor&) override {
    ctx.workspace(depthwise_conv2d_workspace(s, x.dtype()));
  }
  void depthwise_conv2d_backward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor&, const Tensor&,
                                 Tensor*, Tensor&, Tensor*, GradMode) override {
    ctx.workspace(depthwise_conv2d_workspace(s, x.dtype()));
  }

  std::size_t separable_conv2d_workspace(const SeparableShape& s, DType dtype) const override {
    return target_->separable_conv2d_workspace(s, dtype);
  }
  void separable_conv2d_forward(Context& ctx, const SeparableShape& s, const Tensor& x, const Tensor&, const Tensor&,
                                const Tensor*, Tensor&) override {
    ctx.workspace(separable_conv2d_workspace(s, x.dtype()));
  }
  void separable_conv2d_backward(Context& ctx, const SeparableShape& s, const Tensor& x, const Tensor&, const Tensor&,
                                 const Tensor&, Tensor*, Tensor&, Tensor&, Tensor*, GradMode) override {
    ctx.workspace(separable_conv2d_workspace(s, x.dtype()));
  }

  std::size_t dense_workspace(const DenseShape& s, DType dtype) const override {
    return target_->dense_workspace(s, dtype);
  }
  void dense_forward(Context& ctx, const DenseShape& s, const Tensor& x, const Tensor&, const Tensor*, Tensor&) override {
    ctx.workspace(dense_workspace(s, x.dtype()));
  }
  void dense_backward(Context& ctx, const DenseShape& s, const Tensor& x, const Tensor&, const Tensor&, Tensor*,
                      Tensor&, Tensor*, GradMode) override {
    ctx.workspace(dense_workspace(s, x.dtype()));
  }

  void relu_forward(Context&, const Tensor&, Tensor&) override {}
  void relu_backward(Context&, const Tensor&, const Tensor&, Tensor&) override {}
  void maxpool2d_forward(Context&, const Pool2dShape&, const Tensor&, Tensor&) override {}
  void maxpool2d_backward(Context&, const Pool2dShape&, const Tensor&, const Tensor&, Tensor&) override {}
  void global_avg_pool_forward(Context&, const Tensor&, Tensor&) override {}
  void global_avg_pool_backward(Context&, const Tensor&, Tensor&) override {}
  void batchnorm_forward_training(Context&, const BatchNormShape&, const BatchNormParams&, const Tensor&, const Tensor&,
                                  const Tensor&, Tensor&, Tensor&, Tensor&, Tensor&, Tensor&) override {}
  void batchnorm_forward_inference(Context&, const BatchNormShape&, const BatchNormParams&, const Tensor&,
                                   const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&) override {}
  void batchnorm_backward(Context&, const BatchNormShape&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                          const Tensor&, Tensor*, Tensor&, Tensor&, GradMode) override {}
  void dropout_forward(Context&, const DropoutMask&, const Tensor&, Tensor&) override {}
  void dropout_backward(Context&, const DropoutMask&, const Tensor&, Tensor&) override {}
  LossResult softmax_cross_entropy(Context&, const Tensor&, const Tensor&, Tensor*) override { return {}; }
  void sgd_update(Context&, const SgdUpdate&, Tensor&, const Tensor&, Tensor*) override {}
  void adamw_update(Context&, const AdamWUpdate&, Tensor&, const Tensor&, Tensor&, Tensor&) override {}
  void scale(Context&, Tensor&, float) override {}
  void scale_cast(Context&, const Tensor&, float, Tensor&) override {}
  void find_nonfinite(Context&, const Tensor&, Tensor&) override {}  // the flag stays clear: every step applies
  void fill(Context&, Tensor&, float) override {}
  void cast(Context&, const Tensor&, Tensor&) override {}
  // Host memory the caller owns: zeros, so code that reads it back (a checkpoint) sees values.
  void copy_to_host(Context&, const Tensor& src, void* dst) override { std::memset(dst, 0, src.bytes()); }
  void copy_from_host(Context&, const void*, Tensor&) override {}

 private:
  std::unique_ptr<Backend> target_;
};

}  // namespace

std::unique_ptr<Backend> make_meta_backend(std::unique_ptr<Backend> target) {
  return std::make_unique<MetaBackend>(std::move(target));
}

}  // namespace sluice::train
