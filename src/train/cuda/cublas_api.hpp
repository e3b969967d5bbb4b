// cuBLAS, loaded with dlopen when the first CUDA training backend is made instead of linked into
// libsluice. Loading libcublas (it pulls in libcublasLt) maps about 150 MiB resident at start-up
// (measured: VmRSS 1.1 MiB -> 155 MiB for a process that only dlopens it), which every program
// using sluice as a data loader would pay without ever training on a GPU; the RAM-budget story
// (docs/performance.md) cannot afford that. cuBLAS's C API is stable across a major version, so
// a table of the ten entry points the backend calls is all the indirection costs: one pointer
// load per GEMM, next to a kernel launch.
//
// The header still comes from the toolkit (types and signatures); only the linking is deferred.
#pragma once

#include <cublas_v2.h>

namespace sluice::train::cuda_detail {

struct CublasApi {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasDestroy_v2) destroy;
  decltype(&cublasGetVersion_v2) get_version;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSetMathMode) set_math_mode;
  decltype(&cublasSetWorkspace_v2) set_workspace;
  // Spelled out: C++ builds of the header add inline overloads of these two (a cudaDataType
  // compute type), so decltype(&cublasGemmEx) would be ambiguous. These are the exported ones.
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int m, int n, int k,
                            const void* alpha, const void* a, cudaDataType a_type, int lda, const void* b,
                            cudaDataType b_type, int ldb, const void* beta, void* c, cudaDataType c_type,
                            int ldc, cublasComputeType_t compute, cublasGemmAlgo_t algo);
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int m, int n,
                                            int k, const void* alpha, const void* a, cudaDataType a_type, int lda,
                                            long long stride_a, const void* b, cudaDataType b_type, int ldb,
                                            long long stride_b, const void* beta, void* c, cudaDataType c_type,
                                            int ldc, long long stride_c, int batch, cublasComputeType_t compute,
                                            cublasGemmAlgo_t algo);
  decltype(&cublasGetStatusName) status_name;
  decltype(&cublasGetStatusString) status_string;
};

// The table, loaded on first use (thread-safe; later calls return the same table). Looks for
// libcublas.so.<major of the headers> and then libcublas.so on the loader's path. Throws
// sluice::Error(kInvalidArgument) naming the library and dlerror()'s message when it is missing
// or lacks an entry point, so training on a GPU without cuBLAS installed is a clear error.
const CublasApi& cublas_api();

}  // namespace sluice::train::cuda_detail
