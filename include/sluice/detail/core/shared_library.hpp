// A shared library opened with dlopen on first use instead of linked: what the training core does
// for its BLAS libraries (OpenBLAS for the CPU backend, cuBLAS for the CUDA one), so a process that
// only loads data never maps them. The library is never closed: what was made from it may live
// until exit.
#pragma once

#include <string>
#include <vector>

namespace sluice::core {

struct SharedLibrarySpec {
  std::vector<std::string> files;   // tried in order, as dlopen() looks them up
  std::string name;                 // in messages: "OpenBLAS"
  std::string need;                 // "training on the CPU needs OpenBLAS"
  std::string install_hint;         // what to do when no file loads
  std::string missing_symbol_hint;  // what a missing entry point suggests
};

class SharedLibrary {
 public:
  // Opens the first of spec.files that loads (RTLD_NOW | RTLD_LOCAL). Throws
  // sluice::Error(kInvalidArgument): "<need>, which could not be loaded (<each dlerror()>); <install_hint>".
  explicit SharedLibrary(SharedLibrarySpec spec);

  // Points `slot` at `symbol`. Throws sluice::Error(kInvalidArgument):
  // "<name> has no entry point <symbol> (<missing_symbol_hint>)".
  template <class Function>
  void resolve(Function*& slot, const char* symbol) const {
    slot = reinterpret_cast<Function*>(find(symbol));
  }

 private:
  void* find(const char* symbol) const;

  SharedLibrarySpec spec_;
  void* handle_ = nullptr;
};

}  // namespace sluice::core
