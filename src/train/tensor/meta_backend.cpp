// The planner's meta backends (backend.hpp): every op does nothing but make the Context::workspace
// request the modelled backend's op makes (hence the same allocation), and the loss is 0. A
// training step on one allocates exactly the tensors a real one does and computes nothing, so the
// allocator's statistics after it are the real step's (sluice/train/planner.hpp).
//
// Two models: a live CPU backend (its requests depend on its thread count, so it is asked), and
// the CUDA backend's arithmetic (src/train/cuda/cuda_workspace.hpp), which needs no GPU: per op
// the forward and the backward request differ there, the loss takes workspace, and cuBLAS's
// workspace is taken from the allocator when the backend is set up and held, as CudaBackend does.
#include <algorithm>
#include <cstring>
#include <string>

#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"
#include "sluice/device/device.hpp"
#include "sluice/train/allocator.hpp"
#include "train/tensor/backend.hpp"
#include "train/cuda/cuda_workspace.hpp"

namespace sluice::train {
namespace {

enum class Pass { kForward, kBackward };

// The workspace requests of the backend being modelled, op by op.
class Requests {
 public:
  virtual ~Requests() = default;
  virtual std::string describe() const = 0;
  virtual std::size_t conv2d(const Conv2dShape& s, DType t, Pass pass) const = 0;
  virtual std::size_t depthwise_conv2d(const Conv2dShape& s, DType t, Pass pass) const = 0;
  virtual std::size_t separable_conv2d(const SeparableShape& s, DType t, Pass pass) const = 0;
  virtual std::size_t dense(const DenseShape& s, DType t, Pass pass) const = 0;
  virtual std::size_t softmax_cross_entropy(std::int64_t rows) const = 0;
};

// A live backend whose ops request their *_workspace figure forward and backward (the CPU's).
class BackendRequests final : public Requests {
 public:
  explicit BackendRequests(std::unique_ptr<Backend> target) : target_(std::move(target)) {}
  std::string describe() const override { return target_->describe(); }
  std::size_t conv2d(const Conv2dShape& s, DType t, Pass) const override { return target_->conv2d_workspace(s, t); }
  std::size_t depthwise_conv2d(const Conv2dShape& s, DType t, Pass) const override {
    return target_->depthwise_conv2d_workspace(s, t);
  }
  std::size_t separable_conv2d(const SeparableShape& s, DType t, Pass) const override {
    return target_->separable_conv2d_workspace(s, t);
  }
  std::size_t dense(const DenseShape& s, DType t, Pass) const override { return target_->dense_workspace(s, t); }
  std::size_t softmax_cross_entropy(std::int64_t) const override { return 0; }

 private:
  std::unique_ptr<Backend> target_;
};

// The CUDA backend, from cuda_workspace.hpp: what CudaBackend's ops request, without a device.
class CudaRequests final : public Requests {
 public:
  CudaRequests(DeviceId device, std::string compute) : device_(device), compute_(std::move(compute)) {}
  std::string describe() const override { return to_string(device_) + " (CUDA backend, " + compute_ + ")"; }
  std::size_t conv2d(const Conv2dShape& s, DType t, Pass pass) const override {
    return pass == Pass::kForward ? cuda_detail::conv2d_forward_workspace(s, t)
                                  : cuda_detail::conv2d_backward_workspace(s, t);
  }
  std::size_t depthwise_conv2d(const Conv2dShape& s, DType, Pass pass) const override {
    return pass == Pass::kForward ? 0 : cuda_detail::depthwise_conv2d_backward_workspace(s);
  }
  std::size_t separable_conv2d(const SeparableShape& s, DType t, Pass pass) const override {
    return pass == Pass::kForward ? cuda_detail::separable_conv2d_forward_workspace(s, t)
                                  : cuda_detail::separable_conv2d_backward_workspace(s, t);
  }
  std::size_t dense(const DenseShape&, DType, Pass) const override { return 0; }  // cuBLAS's own workspace
  std::size_t softmax_cross_entropy(std::int64_t rows) const override {
    return cuda_detail::softmax_cross_entropy_workspace(rows);
  }

 private:
  DeviceId device_;
  std::string compute_;
};

class MetaBackend final : public Backend {
 public:
  explicit MetaBackend(std::unique_ptr<Requests> requests) : requests_(std::move(requests)) {}
  // Holds `held` (the modelled backend's setup-time workspace) for the backend's life.
  MetaBackend(std::unique_ptr<Requests> requests, Tensor held)
      : requests_(std::move(requests)), held_(std::move(held)) {}

  std::string describe() const override {
    std::string text = "meta (plans for " + requests_->describe();
    if (held_.defined()) text += "; cuBLAS workspace " + format_bytes(held_.bytes()) + " held";
    return text + ")";
  }
  void synchronize() override {}

  // The ops:: figures: the larger of the two passes' requests.
  std::size_t conv2d_workspace(const Conv2dShape& s, DType t) const override {
    return std::max(requests_->conv2d(s, t, Pass::kForward), requests_->conv2d(s, t, Pass::kBackward));
  }
  std::size_t depthwise_conv2d_workspace(const Conv2dShape& s, DType t) const override {
    return std::max(requests_->depthwise_conv2d(s, t, Pass::kForward),
                    requests_->depthwise_conv2d(s, t, Pass::kBackward));
  }
  std::size_t separable_conv2d_workspace(const SeparableShape& s, DType t) const override {
    return std::max(requests_->separable_conv2d(s, t, Pass::kForward),
                    requests_->separable_conv2d(s, t, Pass::kBackward));
  }
  std::size_t dense_workspace(const DenseShape& s, DType t) const override {
    return std::max(requests_->dense(s, t, Pass::kForward), requests_->dense(s, t, Pass::kBackward));
  }

  void conv2d_forward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor&, const Tensor*,
                      Tensor&) override {
    ctx.workspace(requests_->conv2d(s, x.dtype(), Pass::kForward));
  }
  void conv2d_backward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor&, const Tensor&, Tensor*,
                       Tensor&, Tensor*, GradMode) override {
    ctx.workspace(requests_->conv2d(s, x.dtype(), Pass::kBackward));
  }
  void depthwise_conv2d_forward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor&, const Tensor*,
                                Tensor&) override {
    ctx.workspace(requests_->depthwise_conv2d(s, x.dtype(), Pass::kForward));
  }
  void depthwise_conv2d_backward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor&, const Tensor&,
                                 Tensor*, Tensor&, Tensor*, GradMode) override {
    ctx.workspace(requests_->depthwise_conv2d(s, x.dtype(), Pass::kBackward));
  }
  void separable_conv2d_forward(Context& ctx, const SeparableShape& s, const Tensor& x, const Tensor&, const Tensor&,
                                const Tensor*, Tensor&) override {
    ctx.workspace(requests_->separable_conv2d(s, x.dtype(), Pass::kForward));
  }
  void separable_conv2d_backward(Context& ctx, const SeparableShape& s, const Tensor& x, const Tensor&, const Tensor&,
                                 const Tensor&, Tensor*, Tensor&, Tensor&, Tensor*, GradMode) override {
    ctx.workspace(requests_->separable_conv2d(s, x.dtype(), Pass::kBackward));
  }
  void dense_forward(Context& ctx, const DenseShape& s, const Tensor& x, const Tensor&, const Tensor*, Tensor&) override {
    ctx.workspace(requests_->dense(s, x.dtype(), Pass::kForward));
  }
  void dense_backward(Context& ctx, const DenseShape& s, const Tensor& x, const Tensor&, const Tensor&, Tensor*,
                      Tensor&, Tensor*, GradMode) override {
    ctx.workspace(requests_->dense(s, x.dtype(), Pass::kBackward));
  }
  LossResult softmax_cross_entropy(Context& ctx, const Tensor& logits, const Tensor&, Tensor*) override {
    ctx.workspace(requests_->softmax_cross_entropy(logits.dim(0)));
    return {};
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
  std::unique_ptr<Requests> requests_;
  Tensor held_;  // (bytes,) u8, category workspace: cuBLAS's, when modelling CUDA
};

}  // namespace

std::unique_ptr<Backend> make_meta_backend(std::unique_ptr<Backend> target) {
  return std::make_unique<MetaBackend>(std::make_unique<BackendRequests>(std::move(target)));
}

std::unique_ptr<Backend> make_cuda_meta_backend(DeviceId device, int compute_major, Allocator& allocator) {
  if (!device.is_cuda()) {
    throw Error(ErrorCode::kInvalidArgument, "make_cuda_meta_backend: " + to_string(device) + " is not a CUDA device");
  }
  std::string compute;
  if (compute_major > 0) {
    compute = "compute capability " + std::to_string(compute_major) + ".x as asked";
  } else if (device.index >= 0 && device.index < cuda_device_count()) {
    const DeviceInfo info = describe(device);
    compute_major = info.compute_major;
    compute = "compute capability " + std::to_string(info.compute_major) + "." + std::to_string(info.compute_minor) +
              " of " + info.name;
  } else {
    compute_major = cuda_detail::kPlanComputeMajor;
    compute =
        "compute capability " + std::to_string(compute_major) + ".x assumed: no usable " + to_string(device) + " here";
  }
  Tensor held(allocator, {static_cast<std::int64_t>(cuda_detail::cublas_workspace_bytes(compute_major))}, DType::kU8,
              TensorCategory::kWorkspace);
  return std::make_unique<MetaBackend>(std::make_unique<CudaRequests>(device, std::move(compute)), std::move(held));
}

}  // namespace sluice::train
