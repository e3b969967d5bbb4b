// CudaBackend: the training core's ops on one CUDA device (src/train/tensor/backend.hpp). GEMMs (Conv2D
// through im2col, the pointwise half of SeparableConv2D, Dense) go to cuBLAS with f32
// accumulation, tensor cores for f16/bf16 (cublasGemmEx, CUBLAS_COMPUTE_32F); everything else is
// sluice's kernels (conv_kernels.cu, elementwise_kernels.cu). One stream and one cuBLAS handle per
// backend; every op is queued on that stream and only the loss and the host copies wait for it.
// The convolutions and Dense are in cuda_conv.cpp, the rest in cuda_backend.cpp. Private to
// src/train/cuda.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "sluice/core/dtype.hpp"
#include "sluice/train/allocator.hpp"
#include "train/tensor/backend.hpp"
#include "train/cuda/cuda_workspace.hpp"

namespace sluice::train::cuda_detail {

// Throw sluice::Error (kOutOfBudget for a lack of memory, kInternal otherwise) naming the call.
void check(cudaError_t status, const char* what);
void check(cublasStatus_t status, const char* what);

// One operand of a GEMM in cuBLAS's column-major terms: a row-major (r, c) matrix is a
// column-major (c, r) one with leading dimension c.
struct Operand {
  const void* data;
  DType type;
  int ld;
  long long stride;  // between batch items (0: shared by all)
};

// cuBLAS takes int sizes; a plane or a column count past 2^31 - 1 is refused rather than wrapped.
int as_int(std::int64_t v);

class CudaBackend final : public Backend {
 public:
  // On device `index`, whose training allocator is `allocator` (it must outlive the backend): the
  // cuBLAS workspace is taken from it here, once, and held until the backend goes.
  CudaBackend(int index, Allocator& allocator);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string describe() const override { return description_; }
  void synchronize() override;
  void* native_stream() override { return stream_; }
  void wait_event(void* native_event) override;

  // ---- Conv2D ----------------------------------------------------------------------------------
  std::size_t conv2d_workspace(const Conv2dShape& s, DType dtype) const override;
  void conv2d_forward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor& w, const Tensor* bias,
                      Tensor& y) override;
  void conv2d_backward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor& w, const Tensor& dy,
                       Tensor* dx, Tensor& dw, Tensor* dbias, GradMode mode) override;

  // ---- DepthwiseConv2D -------------------------------------------------------------------------
  std::size_t depthwise_conv2d_workspace(const Conv2dShape& s, DType) const override;
  void depthwise_conv2d_forward(Context&, const Conv2dShape& s, const Tensor& x, const Tensor& w, const Tensor* bias,
                                Tensor& y) override;
  void depthwise_conv2d_backward(Context& ctx, const Conv2dShape& s, const Tensor& x, const Tensor& w, const Tensor& dy,
                                 Tensor* dx, Tensor& dw, Tensor* dbias, GradMode mode) override;

  // ---- SeparableConv2D -------------------------------------------------------------------------
  std::size_t separable_conv2d_workspace(const SeparableShape& s, DType dtype) const override;
  void separable_conv2d_forward(Context& ctx, const SeparableShape& s, const Tensor& x, const Tensor& wd,
                                const Tensor& wp, const Tensor* bias, Tensor& y) override;
  void separable_conv2d_backward(Context& ctx, const SeparableShape& s, const Tensor& x, const Tensor& wd,
                                 const Tensor& wp, const Tensor& dy, Tensor* dx, Tensor& dwd, Tensor& dwp,
                                 Tensor* dbias, GradMode mode) override;

  // ---- Dense -----------------------------------------------------------------------------------
  std::size_t dense_workspace(const DenseShape&, DType) const override { return 0; }
  void dense_forward(Context& ctx, const DenseShape& s, const Tensor& x, const Tensor& w, const Tensor* bias,
                     Tensor& y) override;
  void dense_backward(Context& ctx, const DenseShape& s, const Tensor& x, const Tensor& w, const Tensor& dy, Tensor* dx,
                      Tensor& dw, Tensor* dbias, GradMode mode) override;

  // ---- activations and pooling -----------------------------------------------------------------
  void relu_forward(Context&, const Tensor& x, Tensor& y) override;
  void relu_backward(Context&, const Tensor& y, const Tensor& dy, Tensor& dx) override;
  void maxpool2d_forward(Context&, const Pool2dShape& s, const Tensor& x, Tensor& y) override;
  void maxpool2d_backward(Context&, const Pool2dShape& s, const Tensor& x, const Tensor& dy, Tensor& dx) override;
  void global_avg_pool_forward(Context&, const Tensor& x, Tensor& y) override;
  void global_avg_pool_backward(Context&, const Tensor& dy, Tensor& dx) override;

  // ---- batch norm ------------------------------------------------------------------------------
  void batchnorm_forward_training(Context&, const BatchNormShape& s, const BatchNormParams& p, const Tensor& x,
                                  const Tensor& gamma, const Tensor& beta, Tensor& running_mean, Tensor& running_var,
                                  Tensor& y, Tensor& saved_mean, Tensor& saved_invstd) override;
  void batchnorm_forward_inference(Context&, const BatchNormShape& s, const BatchNormParams& p, const Tensor& x,
                                   const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                                   const Tensor& running_var, Tensor& y) override;
  void batchnorm_backward(Context&, const BatchNormShape& s, const Tensor& x, const Tensor& gamma,
                          const Tensor& saved_mean, const Tensor& saved_invstd, const Tensor& dy, Tensor* dx,
                          Tensor& dgamma, Tensor& dbeta, GradMode mode) override;

  // ---- dropout ---------------------------------------------------------------------------------
  void dropout_forward(Context&, const DropoutMask& m, const Tensor& x, Tensor& y) override;
  void dropout_backward(Context&, const DropoutMask& m, const Tensor& dy, Tensor& dx) override;
  void scale(Context&, Tensor& t, float alpha) override;

  // ---- loss ------------------------------------------------------------------------------------
  LossResult softmax_cross_entropy(Context& ctx, const Tensor& logits, const Tensor& labels, Tensor* dlogits) override;

  // ---- optimizers ------------------------------------------------------------------------------
  void sgd_update(Context&, const SgdUpdate& u, Tensor& w, const Tensor& g, Tensor* momentum_buf) override;
  void adamw_update(Context&, const AdamWUpdate& u, Tensor& w, const Tensor& g, Tensor& m, Tensor& v) override;

  // ---- memory ----------------------------------------------------------------------------------
  void scale_cast(Context& ctx, const Tensor& src, float scale, Tensor& dst) override;
  void find_nonfinite(Context& ctx, const Tensor& t, Tensor& flag) override;
  void fill(Context&, Tensor& t, float value) override;
  void cast(Context&, const Tensor& src, Tensor& dst) override;
  void copy_to_host(Context&, const Tensor& src, void* dst) override;
  void copy_from_host(Context&, const void* src, Tensor& dst) override;
  void copy_to_host_async(Context&, const Tensor& src, void* dst) override;
  void copy_from_host_async(Context&, const void* src, Tensor& dst) override;

 private:
  // C (m, n) = op(A) op(B) [+ C], column-major, f32 accumulation; `batch` > 1 strides each
  // operand by its stride.
  void gemm(Context& ctx, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t kk, const Operand& a,
            const Operand& b, float beta, void* c, DType c_type, int ldc, long long stride_c, std::int64_t batch);

  int index_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  // cuBLAS's scratch, from the training allocator (category workspace, so the profiler, the OOM
  // report and the planner see it) instead of cuBLAS's own cudaMalloc: taken at construction and
  // kept for the backend's life, so no op and no batch-size trial ever allocates or leaves it
  // (cublas_workspace_bytes: 32 MiB on Hopper, 4 MiB before). (bytes,) u8; released after blas_
  // (members go after the destructor body).
  Tensor blas_workspace_;
  std::string description_;
};

}  // namespace sluice::train::cuda_detail
