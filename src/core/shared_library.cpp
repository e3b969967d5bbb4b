// SharedLibrary: dlopen the first file that loads, dlsym its entry points, with messages that say
// what to install (see shared_library.hpp).
#include "sluice/detail/core/shared_library.hpp"

#include <dlfcn.h>

#include <utility>

#include "sluice/core/error.hpp"

namespace sluice::core {

SharedLibrary::SharedLibrary(SharedLibrarySpec spec) : spec_(std::move(spec)) {
  std::string errors;
  for (const std::string& file : spec_.files) {
    handle_ = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ != nullptr) return;
    const char* why = dlerror();
    errors += (errors.empty() ? "" : "; ") + (why != nullptr ? std::string(why) : file);
  }
  throw Error(ErrorCode::kInvalidArgument,
              spec_.need + ", which could not be loaded (" + errors + "); " + spec_.install_hint);
}

void* SharedLibrary::find(const char* symbol) const {
  void* p = dlsym(handle_, symbol);
  if (p == nullptr) {
    throw Error(ErrorCode::kInvalidArgument,
                spec_.name + " has no entry point " + symbol + " (" + spec_.missing_symbol_hint + ")");
  }
  return p;
}

}  // namespace sluice::core
