// What the C API's handles are behind their opaque typedefs, and guard(), the try/catch every
// entry point runs its body in so that no exception crosses `extern "C"`: sluice::Error becomes
// its status, std::bad_alloc SLUICE_OUT_OF_MEMORY, anything else SLUICE_INTERNAL, and the message
// is kept per thread for sluice_last_error().
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "sluice/c/sluice.h"
#include "sluice/core/error.hpp"
#include "sluice/runtime/loader.hpp"

namespace sluice::c_api {

// The built pipeline, shared by the loader handle and every batch it handed out, so that, as
// sluice.h promises, batches still held keep the whole pipeline, whichever of them the caller
// releases last. (A C++ Batch alone keeps only its loader's slots: runtime/shared_slots.hpp.)
struct LoaderCore {
  explicit LoaderCore(Loader built) : loader(std::move(built)) {}
  Loader loader;
};

void set_last_error(const char* message) noexcept;
sluice_status_t status_of(ErrorCode code) noexcept;

// Throws kInvalidArgument naming the function when a required pointer is NULL.
inline void require(const void* pointer, const char* what) {
  if (pointer == nullptr) throw Error(ErrorCode::kInvalidArgument, std::string(what) + " is NULL");
}

template <class Body>
sluice_status_t guard(Body&& body) noexcept {
  try {
    return body();
  } catch (const Error& e) {
    set_last_error(e.what());
    return status_of(e.code());
  } catch (const std::bad_alloc&) {
    set_last_error("out of memory");
    return SLUICE_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_last_error(e.what());
    return SLUICE_INTERNAL;
  } catch (...) {
    set_last_error("unknown exception inside sluice");
    return SLUICE_INTERNAL;
  }
}

// Copies the first `caller_size` bytes of a caller's struct over our defaults (fields added after
// the caller was compiled keep their defaults), or our struct into the caller's (fields it does
// not know are not written). Both sides start with size_t struct_size.
template <class Struct>
Struct read_sized(const Struct* in, const Struct& defaults, const char* what) {
  Struct out = defaults;
  if (in == nullptr) return out;
  if (in->struct_size < sizeof(std::size_t)) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string(what) + ".struct_size is " + std::to_string(in->struct_size) +
                    ": set it with the _INIT macro or the _init function");
  }
  std::memcpy(&out, in, std::min(in->struct_size, sizeof(Struct)));
  out.struct_size = sizeof(Struct);
  return out;
}
template <class Struct>
void write_sized(Struct* out, const Struct& value, const char* what) {
  require(out, what);
  const std::size_t size = out->struct_size;
  if (size < sizeof(std::size_t)) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string(what) + "->struct_size is " + std::to_string(size) + ": set it to sizeof the struct");
  }
  std::memcpy(out, &value, std::min(size, sizeof(Struct)));
  out->struct_size = size;
}

}  // namespace sluice::c_api

struct sluice_loader {
  std::shared_ptr<sluice::c_api::LoaderCore> core;
  // Where the consumer is: no epoch yet, an epoch started and not begun, iterating, finished.
  enum class Phase { kIdle, kPending, kRunning, kEnded } phase = Phase::kIdle;
  std::int64_t epoch = 0;
  std::optional<sluice::Loader::Iterator> it;  // destroyed before `core` (declared after it)
  std::string stats_json;
  std::vector<std::uint8_t> state;  // sluice_loader_state's bytes
  sluice_loader_info_t info{};  // computed once at creation
};

// A batch handed out by sluice_loader_next. `holds` counts the handle and each DLManagedTensor
// taken from it; the last release deletes it, and deleting it returns the slot to the ring.
struct sluice_batch {
  std::atomic<int> holds{1};
  std::shared_ptr<sluice::c_api::LoaderCore> core;  // declared before `batch`: outlives it
  sluice::Batch batch;
};

namespace sluice::c_api {
// Drops one hold; the last one returns the slot.
void drop_hold(sluice_batch* batch) noexcept;
}  // namespace sluice::c_api
