// openblas_api(): dlopen OpenBLAS once and resolve the entry points (see openblas_api.hpp for why).
#include "train/cpu/openblas_api.hpp"

#include "sluice/detail/core/shared_library.hpp"

namespace sluice::train::cpu_detail {
namespace {

OpenblasApi load() {
  const core::SharedLibrary library({
      // The soname Debian's and upstream's builds carry first; the development link as a fallback.
      .files = {"libopenblas.so.0", "libopenblas.so"},
      .name = "OpenBLAS",
      .need = "training on the CPU needs OpenBLAS",
      .install_hint = "install it (libopenblas0, or libopenblas-dev) or add its folder to LD_LIBRARY_PATH",
      .missing_symbol_hint = "a reference BLAS or another library named libopenblas on the loader's path?",
  });
  OpenblasApi api{};
  library.resolve(api.sgemm, "cblas_sgemm");
  library.resolve(api.set_num_threads, "openblas_set_num_threads");
  return api;
}

}  // namespace

const OpenblasApi& openblas_api() {
  static const OpenblasApi api = load();  // a throw leaves it unset: the next call tries again
  return api;
}

}  // namespace sluice::train::cpu_detail
