// OpenBLAS, loaded with dlopen when the first CPU training backend is made instead of linked into
// libsluice. OpenBLAS's library constructor starts its thread pool, which spins in sched_yield
// for about 0.1 s at the start of every process that maps it, so every program using sluice only
// as a data loader (the CLI's bench, the Python module, C API users) paid that system time and a
// spinning thread during build() and epoch 0 for a backend it never used (docs/remote.md has the
// figures). The table costs one pointer load per GEMM.
//
// The header still comes from libopenblas-dev (types and signatures); only the linking is deferred.
#pragma once

#include <cblas.h>

namespace sluice::train::cpu_detail {

struct OpenblasApi {
  decltype(&cblas_sgemm) sgemm;
  decltype(&openblas_set_num_threads) set_num_threads;
};

// The table, loaded on first use (thread-safe; later calls return the same table). Looks for
// libopenblas.so.0 and then libopenblas.so on the loader's path. Throws
// sluice::Error(kInvalidArgument) naming the library and dlerror()'s message when it is missing
// or lacks an entry point, so training on the CPU without OpenBLAS installed is a clear error.
const OpenblasApi& openblas_api();

}  // namespace sluice::train::cpu_detail
