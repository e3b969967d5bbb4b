// openblas_api(): dlopen OpenBLAS once and resolve the entry points (see openblas_api.hpp for why).
#include "train/cpu/openblas_api.hpp"

#include <dlfcn.h>

#include <string>
#include <type_traits>

#include "sluice/core/error.hpp"

namespace sluice::train::cpu_detail {
namespace {

OpenblasApi load() {
  // The soname Debian's and upstream's builds carry first; the development link as a fallback.
  const char* const names[] = {"libopenblas.so.0", "libopenblas.so"};
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
                "training on the CPU needs OpenBLAS, which could not be loaded (" + errors +
                    "); install it (libopenblas0, or libopenblas-dev) or add its folder to LD_LIBRARY_PATH");
  }
  // Never dlclose'd: its threads and the backends' calls may live until exit.
  const auto resolve = [&](auto& slot, const char* symbol) {
    void* p = dlsym(library, symbol);
    if (p == nullptr) {
      throw Error(ErrorCode::kInvalidArgument, std::string("OpenBLAS has no entry point ") + symbol +
                                                   " (a reference BLAS or another library named libopenblas on the loader's path?)");
    }
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(p);
  };
  OpenblasApi api{};
  resolve(api.sgemm, "cblas_sgemm");
  resolve(api.set_num_threads, "openblas_set_num_threads");
  return api;
}

}  // namespace

const OpenblasApi& openblas_api() {
  static const OpenblasApi api = load();  // a throw leaves it unset: the next call tries again
  return api;
}

}  // namespace sluice::train::cpu_detail
