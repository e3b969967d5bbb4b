// cublas_api(): dlopen libcublas once and resolve the entry points (see cublas_api.hpp for why).
#include "train/cuda/cublas_api.hpp"

#include <dlfcn.h>

#include <string>
#include <type_traits>

#include "sluice/core/error.hpp"

namespace sluice::train::cuda_detail {
namespace {

#define SLUICE_STRINGIFY2(x) #x
#define SLUICE_STRINGIFY(x) SLUICE_STRINGIFY2(x)

CublasApi load() {
  // The soname the headers were written for first: another major version may differ in ABI.
  const char* const names[] = {"libcublas.so." SLUICE_STRINGIFY(CUBLAS_VER_MAJOR), "libcublas.so"};
  void* library = nullptr;
  std::string errors;
  for (const char* name : names) {
    library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (library != nullptr) break;
    const char* why = dlerror();
    errors += std::string(errors.empty() ? "" : "; ") + (why != nullptr ? why : name);
  }
  if (library == nullptr) {
    throw Error(ErrorCode::kInvalidArgument,
                "training on CUDA needs cuBLAS " SLUICE_STRINGIFY(CUBLAS_VER_MAJOR) ", which could not be loaded (" +
                    errors + "); install it (CUDA toolkit or the nvidia-cublas package) or add its folder to LD_LIBRARY_PATH");
  }
  // Never dlclose'd: handles created from it may live until exit.
  const auto resolve = [&](auto& slot, const char* symbol) {
    void* p = dlsym(library, symbol);
    if (p == nullptr) {
      throw Error(ErrorCode::kInvalidArgument, std::string("cuBLAS has no entry point ") + symbol +
                                                   " (an older or foreign libcublas on the loader's path?)");
    }
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(p);
  };
  CublasApi api{};
  resolve(api.create, "cublasCreate_v2");
  resolve(api.destroy, "cublasDestroy_v2");
  resolve(api.get_version, "cublasGetVersion_v2");
  resolve(api.set_stream, "cublasSetStream_v2");
  resolve(api.set_math_mode, "cublasSetMathMode");
  resolve(api.set_workspace, "cublasSetWorkspace_v2");
  resolve(api.gemm_ex, "cublasGemmEx");
  resolve(api.gemm_strided_batched_ex, "cublasGemmStridedBatchedEx");
  resolve(api.status_name, "cublasGetStatusName");
  resolve(api.status_string, "cublasGetStatusString");
  return api;
}

}  // namespace

const CublasApi& cublas_api() {
  static const CublasApi api = load();  // a throw leaves it unset: the next call tries again
  return api;
}

}  // namespace sluice::train::cuda_detail
