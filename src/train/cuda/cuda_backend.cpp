// CudaBackend: construction (stream, cuBLAS handle), the element-wise, pooling, normalisation,
// loss, optimizer and memory ops over sluice's kernels, the cuBLAS GEMM every convolution and
// Dense goes through (cuda_conv.cpp), and make_cuda_backend.
#include "train/cuda/cuda_backend.hpp"

#include <library_types.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include "device/cuda_backend.hpp"
#include "sluice/core/error.hpp"
#include "sluice/detail/core/half.hpp"
#include "sluice/device/device.hpp"
#include "train/cuda/cublas_api.hpp"
#include "train/cuda/cuda_kernels.hpp"

namespace sluice::train::cuda_detail {

void check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  (void)cudaGetLastError();
  throw Error(
      status == cudaErrorMemoryAllocation ? ErrorCode::kOutOfBudget : ErrorCode::kInternal,
      std::string("CUDA: ") + what + " failed: " + cudaGetErrorString(status) + " (" + cudaGetErrorName(status) + ")");
}

void check(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw Error(status == CUBLAS_STATUS_ALLOC_FAILED ? ErrorCode::kOutOfBudget : ErrorCode::kInternal,
              std::string("cuBLAS: ") + what + " failed: " + cublas_api().status_string(status) + " (" +
                  cublas_api().status_name(status) + ")");
}

// cuBLAS takes int sizes; a plane or a column count past 2^31 - 1 is refused rather than wrapped.
int as_int(std::int64_t v) {
  if (v < 0 || v > std::numeric_limits<int>::max()) {
    throw Error(ErrorCode::kInvalidArgument,
                "CUDA backend: a GEMM dimension of " + std::to_string(v) + " is beyond cuBLAS's int sizes");
  }
  return static_cast<int>(v);
}

namespace {

namespace k = ::sluice::train::cuda_detail;

cudaDataType_t blas_type(DType t) {
  switch (t) {
    case DType::kF32:
      return CUDA_R_32F;
    case DType::kF16:
      return CUDA_R_16F;
    case DType::kBF16:
      return CUDA_R_16BF;
    default:
      break;
  }
  throw Error(ErrorCode::kInternal, "CUDA backend: no GEMM for " + std::string(to_string(t)));
}

k::BatchNormLaunch bn_launch(const BatchNormShape& s, const BatchNormParams* p) {
  k::BatchNormLaunch l;
  l.batch = s.batch;
  l.channels = s.channels;
  l.spatial = s.spatial;
  if (p != nullptr) {
    l.epsilon = p->epsilon;
    l.momentum = p->momentum;
    l.update_running_stats = p->update_running_stats;
  }
  return l;
}
}  // namespace

CudaBackend::CudaBackend(int index, Allocator& allocator) : index_(index) {
  require_device(cuda(index));
  device_detail::ScopedDevice guard(index_);
  const DeviceInfo info = sluice::describe(cuda(index));
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamDefault), "cudaStreamCreateWithFlags");
  const cublasStatus_t created = cublas_api().create(&blas_);
  if (created != CUBLAS_STATUS_SUCCESS) {
    (void)cudaStreamDestroy(stream_);
    check(created, "cublasCreate");
  }
  int version = 0;
  (void)cublas_api().get_version(blas_, &version);
  try {
    check(cublas_api().set_stream(blas_, stream_), "cublasSetStream");
    // Plain f32 for f32 GEMMs (no TF32: results stay within 1e-4 of the CPU); f16/bf16 GEMMs
    // take tensor cores under the default math mode.
    check(cublas_api().set_math_mode(blas_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    // After cublasSetStream, which resets the handle to cuBLAS's own workspace pool. The
    // allocator's blocks are 256-byte aligned, as cublasSetWorkspace requires.
    blas_workspace_ = Tensor(allocator, {static_cast<std::int64_t>(cublas_workspace_bytes(info.compute_major))},
                             DType::kU8, TensorCategory::kWorkspace);
    check(cublas_api().set_workspace(blas_, blas_workspace_.data(), blas_workspace_.bytes()), "cublasSetWorkspace");
  } catch (...) {
    (void)cublas_api().destroy(blas_);
    (void)cudaStreamDestroy(stream_);
    throw;
  }
  description_ = to_string(cuda(index)) + " (" + info.name + ", cuBLAS " + std::to_string(version / 10000) + "." +
                 std::to_string(version / 100 % 100) + "." + std::to_string(version % 100) + ")";
}

CudaBackend::~CudaBackend() {
  device_detail::ScopedDevice guard(index_, /*quiet=*/true);
  (void)cudaStreamSynchronize(stream_);
  (void)cublas_api().destroy(blas_);
  (void)cudaStreamDestroy(stream_);
}

void CudaBackend::synchronize() {
  device_detail::ScopedDevice guard(index_);
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

void CudaBackend::wait_event(void* native_event) {
  device_detail::ScopedDevice guard(index_);
  check(cudaStreamWaitEvent(stream_, static_cast<cudaEvent_t>(native_event), 0), "cudaStreamWaitEvent");
}

void CudaBackend::relu_forward(Context&, const Tensor& x, Tensor& y) {
  device_detail::ScopedDevice guard(index_);
  k::relu_forward(x.dtype(), x.data(), y.data(), x.elements(), stream_);
}

void CudaBackend::relu_backward(Context&, const Tensor& y, const Tensor& dy, Tensor& dx) {
  device_detail::ScopedDevice guard(index_);
  k::relu_backward(y.dtype(), y.data(), dy.data(), dx.data(), y.elements(), stream_);
}

void CudaBackend::maxpool2d_forward(Context&, const Pool2dShape& s, const Tensor& x, Tensor& y) {
  device_detail::ScopedDevice guard(index_);
  k::maxpool_forward(x.dtype(), x.data(), s, y.data(), stream_);
}

void CudaBackend::maxpool2d_backward(Context&, const Pool2dShape& s, const Tensor& x, const Tensor& dy, Tensor& dx) {
  device_detail::ScopedDevice guard(index_);
  k::maxpool_backward(x.dtype(), x.data(), dy.data(), s, dx.data(), stream_);
}

void CudaBackend::global_avg_pool_forward(Context&, const Tensor& x, Tensor& y) {
  device_detail::ScopedDevice guard(index_);
  k::global_avg_pool_forward(x.dtype(), x.data(), x.dim(0) * x.dim(1), x.dim(2) * x.dim(3), y.data(), stream_);
}

void CudaBackend::global_avg_pool_backward(Context&, const Tensor& dy, Tensor& dx) {
  device_detail::ScopedDevice guard(index_);
  k::global_avg_pool_backward(dy.dtype(), dy.data(), dx.dim(0) * dx.dim(1), dx.dim(2) * dx.dim(3), dx.data(), stream_);
}

void CudaBackend::batchnorm_forward_training(Context&, const BatchNormShape& s, const BatchNormParams& p,
                                             const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                             Tensor& running_mean, Tensor& running_var, Tensor& y, Tensor& saved_mean,
                                             Tensor& saved_invstd) {
  device_detail::ScopedDevice guard(index_);
  k::batchnorm_training(x.dtype(), bn_launch(s, &p), x.data(), gamma.data_as<const float>(),
                        beta.data_as<const float>(), running_mean.data_as<float>(), running_var.data_as<float>(),
                        y.data(), saved_mean.data_as<float>(), saved_invstd.data_as<float>(), stream_);
}

void CudaBackend::batchnorm_forward_inference(Context&, const BatchNormShape& s, const BatchNormParams& p,
                                              const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                              const Tensor& running_mean, const Tensor& running_var, Tensor& y) {
  device_detail::ScopedDevice guard(index_);
  k::batchnorm_inference(x.dtype(), bn_launch(s, &p), x.data(), gamma.data_as<const float>(),
                         beta.data_as<const float>(), running_mean.data_as<const float>(),
                         running_var.data_as<const float>(), y.data(), stream_);
}

void CudaBackend::batchnorm_backward(Context&, const BatchNormShape& s, const Tensor& x, const Tensor& gamma,
                                     const Tensor& saved_mean, const Tensor& saved_invstd, const Tensor& dy, Tensor* dx,
                                     Tensor& dgamma, Tensor& dbeta, GradMode mode) {
  device_detail::ScopedDevice guard(index_);
  k::batchnorm_backward(x.dtype(), bn_launch(s, nullptr), x.data(), gamma.data_as<const float>(),
                        saved_mean.data_as<const float>(), saved_invstd.data_as<const float>(), dy.data(),
                        dx != nullptr ? dx->data() : nullptr, dgamma.data_as<float>(), dbeta.data_as<float>(),
                        mode == GradMode::kAccumulate, stream_);
}

void CudaBackend::dropout_forward(Context&, const DropoutMask& m, const Tensor& x, Tensor& y) {
  device_detail::ScopedDevice guard(index_);
  k::dropout_apply(x.dtype(), m, x.data(), y.data(), x.elements(), stream_);
}

void CudaBackend::dropout_backward(Context&, const DropoutMask& m, const Tensor& dy, Tensor& dx) {
  device_detail::ScopedDevice guard(index_);
  k::dropout_apply(dy.dtype(), m, dy.data(), dx.data(), dy.elements(), stream_);
}

void CudaBackend::scale(Context&, Tensor& t, float alpha) {
  device_detail::ScopedDevice guard(index_);
  k::scale(t.dtype(), t.data(), alpha, t.elements(), stream_);
}

LossResult CudaBackend::softmax_cross_entropy(Context& ctx, const Tensor& logits, const Tensor& labels,
                                              Tensor* dlogits) {
  device_detail::ScopedDevice guard(index_);
  const std::int64_t rows = logits.dim(0);
  const std::int64_t classes = logits.dim(1);
  if (rows == 0 || classes == 0) return {};  // no rows: no loss, nothing correct (ops.cpp refuses it)
  void* ws = ctx.workspace(k::softmax_cross_entropy_workspace(rows));
  const k::LossSummary* summary_dev =
      k::softmax_cross_entropy(logits.dtype(), logits.data(), labels.data_as<const std::int32_t>(), rows, classes,
                               dlogits != nullptr ? dlogits->data() : nullptr, ws, stream_);
  k::LossSummary summary;
  check(cudaMemcpyAsync(&summary, summary_dev, sizeof summary, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync");
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  if (summary.bad_row >= 0) {
    throw Error(ErrorCode::kInvalidArgument, "softmax_cross_entropy: label " + std::to_string(summary.bad_label) +
                                                 " of row " + std::to_string(summary.bad_row) +
                                                 " is out of range [0, " + std::to_string(classes) + ")");
  }
  LossResult r;
  r.loss = summary.loss_sum / static_cast<double>(rows);
  r.correct = summary.correct;
  return r;
}

void CudaBackend::sgd_update(Context&, const SgdUpdate& u, Tensor& w, const Tensor& g, Tensor* momentum_buf) {
  device_detail::ScopedDevice guard(index_);
  k::sgd_update(u, w.data_as<float>(), g.data_as<const float>(),
                momentum_buf != nullptr ? momentum_buf->data_as<float>() : nullptr, w.elements(), stream_);
}

void CudaBackend::adamw_update(Context&, const AdamWUpdate& u, Tensor& w, const Tensor& g, Tensor& m, Tensor& v) {
  device_detail::ScopedDevice guard(index_);
  k::adamw_update(u, w.data_as<float>(), g.data_as<const float>(), m.data_as<float>(), v.data_as<float>(), w.elements(),
                  stream_);
}

void CudaBackend::scale_cast(Context&, const Tensor& src, float scale, Tensor& dst) {
  device_detail::ScopedDevice guard(index_);
  k::scale_cast(src.dtype(), src.data(), scale, dst.dtype(), dst.data(), src.elements(), stream_);
}

void CudaBackend::find_nonfinite(Context&, const Tensor& t, Tensor& flag) {
  device_detail::ScopedDevice guard(index_);
  k::find_nonfinite(t.dtype(), t.data(), t.elements(), flag.data_as<float>(), stream_);
}

void CudaBackend::fill(Context&, Tensor& t, float value) {
  device_detail::ScopedDevice guard(index_);
  std::uint32_t bits = 0;
  switch (t.dtype()) {
    case DType::kF32:
      bits = std::bit_cast<std::uint32_t>(value);
      break;
    case DType::kF16:
      bits = float_to_f16(value);
      break;
    case DType::kBF16:
      bits = float_to_bf16(value);
      break;
    // Integers as the CPU backend: truncated towards zero, saturating, NaN as 0.
    case DType::kI32: {
      const double v = std::trunc(std::isnan(value) ? 0.0 : static_cast<double>(value));
      bits = static_cast<std::uint32_t>(static_cast<std::int32_t>(std::clamp(v, -2147483648.0, 2147483647.0)));
      break;
    }
    case DType::kU8: {
      const double v = std::trunc(std::isnan(value) ? 0.0 : static_cast<double>(value));
      bits = static_cast<std::uint8_t>(std::clamp(v, 0.0, 255.0));
      break;
    }
  }
  const int size = static_cast<int>(size_of(t.dtype()));
  if (bits == 0 || size == 1) {
    check(cudaMemsetAsync(t.data(), static_cast<int>(bits & 0xffu), t.bytes(), stream_), "cudaMemsetAsync");
    return;
  }
  k::fill_bits(size, bits, t.data(), t.elements(), stream_);
}

void CudaBackend::cast(Context&, const Tensor& src, Tensor& dst) {
  device_detail::ScopedDevice guard(index_);
  // The same memory: a no-op, as on the CPU (ops.cpp lets it through; between dtypes of
  // different sizes converting in place would race).
  if (src.data() == dst.data()) return;
  if (src.dtype() == dst.dtype()) {
    if (src.bytes() > 0) {
      check(cudaMemcpyAsync(dst.data(), src.data(), src.bytes(), cudaMemcpyDeviceToDevice, stream_), "cudaMemcpyAsync");
    }
    return;
  }
  k::cast(src.dtype(), src.data(), dst.dtype(), dst.data(), src.elements(), stream_);
}

void CudaBackend::copy_to_host(Context&, const Tensor& src, void* dst) {
  device_detail::ScopedDevice guard(index_);
  if (src.bytes() == 0) return;
  check(cudaMemcpyAsync(dst, src.data(), src.bytes(), cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync");
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

void CudaBackend::copy_from_host(Context&, const void* src, Tensor& dst) {
  device_detail::ScopedDevice guard(index_);
  if (dst.bytes() == 0) return;
  check(cudaMemcpyAsync(dst.data(), src, dst.bytes(), cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync");
  // The caller may reuse or free `src` as soon as this returns.
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

// Queued only: with pinned host memory the DMA engine runs them while the host goes on.
void CudaBackend::copy_to_host_async(Context&, const Tensor& src, void* dst) {
  device_detail::ScopedDevice guard(index_);
  if (src.bytes() == 0) return;
  check(cudaMemcpyAsync(dst, src.data(), src.bytes(), cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync");
}

void CudaBackend::copy_from_host_async(Context&, const void* src, Tensor& dst) {
  device_detail::ScopedDevice guard(index_);
  if (dst.bytes() == 0) return;
  check(cudaMemcpyAsync(dst.data(), src, dst.bytes(), cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync");
}

void CudaBackend::gemm(Context&, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t kk,
                       const Operand& a, const Operand& b, float beta, void* c, DType c_type, int ldc,
                       long long stride_c, std::int64_t batch) {
  const float alpha = 1.0f;
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (batch == 1) {
    check(cublas_api().gemm_ex(blas_, op_a, op_b, as_int(m), as_int(n), as_int(kk), &alpha, a.data, blas_type(a.type), a.ld,
                       b.data, blas_type(b.type), b.ld, &beta, c, blas_type(c_type), ldc, CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
  } else {
    check(cublas_api().gemm_strided_batched_ex(blas_, op_a, op_b, as_int(m), as_int(n), as_int(kk), &alpha, a.data,
                                     blas_type(a.type), a.ld, a.stride, b.data, blas_type(b.type), b.ld, b.stride,
                                     &beta, c, blas_type(c_type), ldc, stride_c, as_int(batch), CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx");
  }
}

}  // namespace sluice::train::cuda_detail

namespace sluice::train {

std::unique_ptr<Backend> make_cuda_backend(int index, Allocator& allocator) {
  return std::make_unique<cuda_detail::CudaBackend>(index, allocator);
}

}  // namespace sluice::train
