// Backend: what a device implements for the training core's ops. ops.cpp validates every call
// (shapes, dtypes, devices, aliasing) and then calls the Context's backend, so a backend may
// assume its arguments are consistent: each method has the meaning and the tensor shapes of the
// ops:: function of the same name (sluice/train/ops.hpp), minus the checks.
//
// Backends: CpuBackend (src/train/cpu/), the reference and the fallback, and CudaBackend
// (src/train/cuda/, built with CUDA), created by make_cuda_backend(). A CUDA kernel's test
// compares it against the CPU twin. Adding an op means adding it here, so no backend can miss it.
#pragma once

#include <cstddef>
#include <memory>

#include "sluice/train/context.hpp"
#include "sluice/train/ops.hpp"
#include "sluice/train/tensor.hpp"

namespace sluice::train {

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu (2 threads, OpenBLAS)", "cuda:0 (cuBLAS)".
  virtual std::string describe() const = 0;
  virtual void synchronize() = 0;
  // The device stream every op is queued on (cudaStream_t); nullptr where ops run synchronously.
  virtual void* native_stream() { return nullptr; }
  // Ops queued from now on wait, on the device, for `native_event` (a recorded cudaEvent_t, not
  // null). Backends whose ops run synchronously have nothing to order.
  virtual void wait_event(void* native_event) { (void)native_event; }

  virtual std::size_t conv2d_workspace(const Conv2dShape& s, DType dtype) const = 0;
  virtual void conv2d_forward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor& w,
                              const Tensor* bias, Tensor& y) = 0;
  virtual void conv2d_backward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor& w,
                               const Tensor& dy, Tensor* dx, Tensor& dw, Tensor* dbias,
                               GradMode mode) = 0;

  virtual std::size_t depthwise_conv2d_workspace(const Conv2dShape& s, DType dtype) const = 0;
  virtual void depthwise_conv2d_forward(Context& ctx, const Conv2dShape& s, const Tensor& x,
                                        const Tensor& w, const Tensor* bias, Tensor& y) = 0;
  virtual void depthwise_conv2d_backward(Context& ctx, const Conv2dShape& s, const Tensor& x,
                                         const Tensor& w, const Tensor& dy, Tensor* dx, Tensor& dw,
                                         Tensor* dbias, GradMode mode) = 0;

  virtual std::size_t separable_conv2d_workspace(const SeparableShape& s, DType dtype) const = 0;
  virtual void separable_conv2d_forward(Context& ctx, const SeparableShape& s, const Tensor& x,
                                        const Tensor& wd, const Tensor& wp, const Tensor* bias,
                                        Tensor& y) = 0;
  virtual void separable_conv2d_backward(Context& ctx, const SeparableShape& s, const Tensor& x,
                                         const Tensor& wd, const Tensor& wp, const Tensor& dy,
                                         Tensor* dx, Tensor& dwd, Tensor& dwp, Tensor* dbias,
                                         GradMode mode) = 0;

  virtual std::size_t dense_workspace(const DenseShape& s, DType dtype) const = 0;
  virtual void dense_forward(Context& ctx, const DenseShape& s, const Tensor& x, const Tensor& w,
                             const Tensor* bias, Tensor& y) = 0;
  virtual void dense_backward(Context& ctx, const DenseShape& s, const Tensor& x, const Tensor& w,
                              const Tensor& dy, Tensor* dx, Tensor& dw, Tensor* dbias,
                              GradMode mode) = 0;

  virtual void relu_forward(Context& ctx, const Tensor& x, Tensor& y) = 0;
  virtual void relu_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx) = 0;
  virtual void maxpool2d_forward(Context& ctx, const Pool2dShape& s, const Tensor& x, Tensor& y) = 0;
  virtual void maxpool2d_backward(Context& ctx, const Pool2dShape& s, const Tensor& x,
                                  const Tensor& dy, Tensor& dx) = 0;
  virtual void global_avg_pool_forward(Context& ctx, const Tensor& x, Tensor& y) = 0;
  virtual void global_avg_pool_backward(Context& ctx, const Tensor& dy, Tensor& dx) = 0;

  virtual void batchnorm_forward_training(Context& ctx, const BatchNormShape& s,
                                          const BatchNormParams& p, const Tensor& x,
                                          const Tensor& gamma, const Tensor& beta,
                                          Tensor& running_mean, Tensor& running_var, Tensor& y,
                                          Tensor& saved_mean, Tensor& saved_invstd) = 0;
  virtual void batchnorm_forward_inference(Context& ctx, const BatchNormShape& s,
                                           const BatchNormParams& p, const Tensor& x,
                                           const Tensor& gamma, const Tensor& beta,
                                           const Tensor& running_mean, const Tensor& running_var,
                                           Tensor& y) = 0;
  virtual void batchnorm_backward(Context& ctx, const BatchNormShape& s, const Tensor& x,
                                  const Tensor& gamma, const Tensor& saved_mean,
                                  const Tensor& saved_invstd, const Tensor& dy, Tensor* dx,
                                  Tensor& dgamma, Tensor& dbeta, GradMode mode) = 0;

  virtual void dropout_forward(Context& ctx, const DropoutMask& m, const Tensor& x, Tensor& y) = 0;
  virtual void dropout_backward(Context& ctx, const DropoutMask& m, const Tensor& dy, Tensor& dx) = 0;
  virtual void scale(Context& ctx, Tensor& t, float alpha) = 0;

  // Labels are validated by the backend (they may live on the device).
  virtual LossResult softmax_cross_entropy(Context& ctx, const Tensor& logits, const Tensor& labels,
                                           Tensor* dlogits) = 0;

  virtual void sgd_update(Context& ctx, const SgdUpdate& u, Tensor& w, const Tensor& g,
                          Tensor* momentum_buf) = 0;
  virtual void adamw_update(Context& ctx, const AdamWUpdate& u, Tensor& w, const Tensor& g,
                            Tensor& m, Tensor& v) = 0;

  virtual void scale_cast(Context& ctx, const Tensor& src, float scale, Tensor& dst) = 0;
  virtual void find_nonfinite(Context& ctx, const Tensor& t, Tensor& flag) = 0;

  virtual void fill(Context& ctx, Tensor& t, float value) = 0;
  virtual void cast(Context& ctx, const Tensor& src, Tensor& dst) = 0;
  virtual void copy_to_host(Context& ctx, const Tensor& src, void* dst) = 0;
  virtual void copy_from_host(Context& ctx, const void* src, Tensor& dst) = 0;
  // Queued copies that may return before they complete (the CUDA backend, from pinned memory);
  // the host memory must stay untouched until Context::synchronize(). By default the
  // synchronous copies.
  virtual void copy_to_host_async(Context& ctx, const Tensor& src, void* dst) { copy_to_host(ctx, src, dst); }
  virtual void copy_from_host_async(Context& ctx, const void* src, Tensor& dst) { copy_from_host(ctx, src, dst); }
};

// The CPU reference backend with `threads` workers (src/train/cpu/cpu_backend.cpp).
std::unique_ptr<Backend> make_cpu_backend(int threads);
// The CUDA backend for device `index` (src/train/cuda/), whose training allocator is `allocator`:
// it takes cuBLAS's workspace from it at once and holds it. In a build without CUDA it throws
// sluice::Error(kInvalidArgument) saying so (src/train/cuda/cuda_backend_stub.cpp).
std::unique_ptr<Backend> make_cuda_backend(int index, Allocator& allocator);
// The planner's backends (src/train/tensor/meta_backend.cpp; ContextOptions::meta): ops compute nothing,
// the loss is 0, and each op requests the workspace the modelled backend's op would. Over a live
// `target` (the CPU backend, whose workspaces depend on its threads):
std::unique_ptr<Backend> make_meta_backend(std::unique_ptr<Backend> target);
// Modelling the CUDA backend of `device` without a GPU (src/train/cuda/cuda_workspace.hpp), for
// a device of compute capability `compute_major`: it also takes cuBLAS's workspace from
// `allocator` at once and holds it, as CudaBackend does.
std::unique_ptr<Backend> make_cuda_meta_backend(DeviceId device, int compute_major, Allocator& allocator);

}  // namespace sluice::train
