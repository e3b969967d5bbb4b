// cublas_api(): dlopen libcublas once and resolve the entry points (see cublas_api.hpp for why).
#include "train/cuda/cublas_api.hpp"

#include "sluice/detail/core/shared_library.hpp"

namespace sluice::train::cuda_detail {
namespace {

#define SLUICE_STRINGIFY2(x) #x
#define SLUICE_STRINGIFY(x) SLUICE_STRINGIFY2(x)

CublasApi load() {
  const core::SharedLibrary library({
      // The soname the headers were written for first: another major version may differ in ABI.
      .files = {"libcublas.so." SLUICE_STRINGIFY(CUBLAS_VER_MAJOR), "libcublas.so"},
      .name = "cuBLAS",
      .need = "training on CUDA needs cuBLAS " SLUICE_STRINGIFY(CUBLAS_VER_MAJOR),
      .install_hint = "install it (CUDA toolkit or the nvidia-cublas package) or add its folder to LD_LIBRARY_PATH",
      .missing_symbol_hint = "an older or foreign libcublas on the loader's path?",
  });
  CublasApi api{};
  library.resolve(api.create, "cublasCreate_v2");
  library.resolve(api.destroy, "cublasDestroy_v2");
  library.resolve(api.get_version, "cublasGetVersion_v2");
  library.resolve(api.set_stream, "cublasSetStream_v2");
  library.resolve(api.set_math_mode, "cublasSetMathMode");
  library.resolve(api.set_workspace, "cublasSetWorkspace_v2");
  library.resolve(api.gemm_ex, "cublasGemmEx");
  library.resolve(api.gemm_strided_batched_ex, "cublasGemmStridedBatchedEx");
  library.resolve(api.status_name, "cublasGetStatusName");
  library.resolve(api.status_string, "cublasGetStatusString");
  return api;
}

}  // namespace

const CublasApi& cublas_api() {
  static const CublasApi api = load();  // a throw leaves it unset: the next call tries again
  return api;
}

}  // namespace sluice::train::cuda_detail
