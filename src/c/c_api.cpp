// The C API's loader side (include/sluice/c/sluice.h): status codes and the per-thread message,
// creating a loader from a JSON spec with the caller's overrides, describing it, and iterating
// epochs through the C++ Loader's iterator. Batches and their DLPack tensors are c_batch.cpp.
#include <span>
#include <string>
#include <utility>

#include "c/c_api_internal.hpp"
#include "c/dlpack_export.hpp"
#include "sluice/pipeline/json_spec.hpp"

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "unknown"
#endif

namespace sluice::c_api {

namespace {
// One message per thread: a consumer thread and a thread that builds loaders do not overwrite
// each other's errors.
thread_local std::string last_error;
thread_local bool last_error_lost = false;  // recording the message itself ran out of memory
}  // namespace

void set_last_error(const char* message) noexcept {
  try {
    last_error.assign(message);
    last_error_lost = false;
  } catch (...) {
    last_error_lost = true;
  }
}

sluice_status_t status_of(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kInvalidArgument: return SLUICE_INVALID_ARGUMENT;
    case ErrorCode::kNotFound: return SLUICE_NOT_FOUND;
    case ErrorCode::kPermissionDenied: return SLUICE_PERMISSION_DENIED;
    case ErrorCode::kIo: return SLUICE_IO;
    case ErrorCode::kCorruptData: return SLUICE_CORRUPT_DATA;
    case ErrorCode::kUnsupportedFormat: return SLUICE_UNSUPPORTED_FORMAT;
    case ErrorCode::kTooLarge: return SLUICE_TOO_LARGE;
    case ErrorCode::kOutOfBudget: return SLUICE_OUT_OF_BUDGET;
    case ErrorCode::kCancelled: return SLUICE_CANCELLED;
    case ErrorCode::kInternal: return SLUICE_INTERNAL;
  }
  return SLUICE_INTERNAL;
}

namespace {

// What a batch will look like: the Loader's description of its data output, as the consumer
// receives it (after normalisation on the device, when the pipeline asks for it).
sluice_loader_info_t describe(const Loader& loader) {
  sluice_loader_info_t info = SLUICE_LOADER_INFO_INIT;
  info.samples_per_epoch = loader.samples_per_epoch();
  info.batches_per_epoch = loader.batches_per_epoch();
  const OutputDescription data = loader.outputs()[0];
  info.ndim = data.shape.rank();
  for (int i = 0; i < data.shape.rank(); ++i) info.shape[i] = data.shape[i];
  info.dtype = dlpack::dl_dtype(data.dtype);
  info.device = dlpack::dl_device(data.device);
  return info;
}

sluice_status_t create(PipelineDocument doc, const sluice_loader_options_t& options, sluice_loader_t** out) {
  DocumentOverrides overrides;
  if (options.threads != SLUICE_THREADS_FROM_SPEC) {
    overrides.threads = options.threads == SLUICE_THREADS_AUTO ? autotune : options.threads;
  }
  if (options.memory_budget != 0) overrides.memory_budget = options.memory_budget;
  overrides.cuda_stream = options.cuda_stream;
  apply_overrides(doc, overrides);
  if (options.stop != nullptr) {
    doc.build.stop = [stop = options.stop, user = options.stop_user] { return stop(user) != 0; };
  }
  Pipeline pipeline(std::move(doc.spec));
  auto handle = std::make_unique<sluice_loader>();
  handle->core = std::make_shared<LoaderCore>(pipeline.build(doc.build));
  handle->info = describe(handle->core->loader);
  *out = handle.release();
  return SLUICE_OK;
}

const sluice_loader_options_t kDefaultOptions = SLUICE_LOADER_OPTIONS_INIT;

}  // namespace
}  // namespace sluice::c_api

using namespace sluice;
using namespace sluice::c_api;

extern "C" {

const char* sluice_version(void) { return SLUICE_VERSION; }

const char* sluice_status_string(sluice_status_t status) {
  switch (status) {
    case SLUICE_OK: return "ok";
    case SLUICE_END: return "end of epoch";
    case SLUICE_INVALID_ARGUMENT: return "invalid argument";
    case SLUICE_NOT_FOUND: return "not found";
    case SLUICE_PERMISSION_DENIED: return "permission denied";
    case SLUICE_IO: return "I/O error";
    case SLUICE_CORRUPT_DATA: return "corrupt data";
    case SLUICE_UNSUPPORTED_FORMAT: return "unsupported format";
    case SLUICE_TOO_LARGE: return "too large";
    case SLUICE_OUT_OF_BUDGET: return "out of budget";
    case SLUICE_CANCELLED: return "cancelled";
    case SLUICE_INTERNAL: return "internal error";
    case SLUICE_OUT_OF_MEMORY: return "out of memory";
  }
  return "unknown status";
}

const char* sluice_last_error(void) {
  return last_error_lost ? "out of memory (while recording an error message)" : last_error.c_str();
}

void sluice_loader_options_init(sluice_loader_options_t* options) {
  if (options != nullptr) *options = kDefaultOptions;
}

sluice_status_t sluice_loader_create_from_json(const char* json_text, const sluice_loader_options_t* options,
                                               sluice_loader_t** loader) {
  return guard([&] {
    require(loader, "sluice_loader_create_from_json: loader");
    *loader = nullptr;
    require(json_text, "sluice_loader_create_from_json: json_text");
    const sluice_loader_options_t o = read_sized(options, kDefaultOptions, "options");
    return create(parse_pipeline_json(json_text, o.base_dir != nullptr ? o.base_dir : ""), o, loader);
  });
}

sluice_status_t sluice_loader_create_from_file(const char* spec_path, const sluice_loader_options_t* options,
                                               sluice_loader_t** loader) {
  return guard([&] {
    require(loader, "sluice_loader_create_from_file: loader");
    *loader = nullptr;
    require(spec_path, "sluice_loader_create_from_file: spec_path");
    const sluice_loader_options_t o = read_sized(options, kDefaultOptions, "options");
    return create(load_pipeline_json(spec_path), o, loader);
  });
}

void sluice_loader_destroy(sluice_loader_t* loader) {
  // Only drops this handle's share: batches still held keep the pipeline until released.
  guard([&] {
    delete loader;
    return SLUICE_OK;
  });
}

sluice_status_t sluice_loader_info(const sluice_loader_t* loader, sluice_loader_info_t* info) {
  return guard([&] {
    require(loader, "sluice_loader_info: loader");
    write_sized(info, loader->info, "sluice_loader_info: info");
    return SLUICE_OK;
  });
}

sluice_status_t sluice_loader_start_epoch(sluice_loader_t* loader, std::int64_t epoch) {
  return guard([&] {
    require(loader, "sluice_loader_start_epoch: loader");
    if (epoch < 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  "sluice_loader_start_epoch: epoch must be >= 0, got " + std::to_string(epoch));
    }
    loader->it.reset();
    loader->epoch = epoch;
    loader->phase = sluice_loader::Phase::kPending;
    return SLUICE_OK;
  });
}

sluice_status_t sluice_loader_next(sluice_loader_t* loader, sluice_batch_t** batch) {
  return guard([&] {
    require(loader, "sluice_loader_next: loader");
    require(batch, "sluice_loader_next: batch");
    *batch = nullptr;
    using Phase = sluice_loader::Phase;
    switch (loader->phase) {
      case Phase::kIdle:
        throw Error(ErrorCode::kInvalidArgument, "sluice_loader_next: call sluice_loader_start_epoch first");
      case Phase::kEnded:
        return SLUICE_END;
      case Phase::kPending:
        loader->phase = Phase::kEnded;  // stays so if the first batch fails: the epoch is over
        loader->it.emplace(loader->core->loader.epoch(loader->epoch).begin());
        break;
      case Phase::kRunning:
        loader->phase = Phase::kEnded;
        ++*loader->it;
        break;
    }
    if (*loader->it == Loader::Sentinel{}) {
      loader->it.reset();
      return SLUICE_END;
    }
    auto handle = std::make_unique<sluice_batch>();
    handle->core = loader->core;
    handle->batch = std::move(**loader->it);
    loader->phase = Phase::kRunning;
    *batch = handle.release();
    return SLUICE_OK;
  });
}

sluice_status_t sluice_loader_stats_json(sluice_loader_t* loader, const char** json) {
  return guard([&] {
    require(loader, "sluice_loader_stats_json: loader");
    require(json, "sluice_loader_stats_json: json");
    loader->stats_json = stats_to_json(loader->core->loader.stats());
    *json = loader->stats_json.c_str();
    return SLUICE_OK;
  });
}

sluice_status_t sluice_loader_state(sluice_loader_t* loader, const std::uint8_t** bytes, std::size_t* size) {
  return guard([&] {
    require(loader, "sluice_loader_state: loader");
    require(bytes, "sluice_loader_state: bytes");
    require(size, "sluice_loader_state: size");
    loader->state = loader->core->loader.state();
    *bytes = loader->state.data();
    *size = loader->state.size();
    return SLUICE_OK;
  });
}

sluice_status_t sluice_loader_restore(sluice_loader_t* loader, const std::uint8_t* bytes, std::size_t size,
                                      std::int64_t* epoch) {
  return guard([&] {
    require(loader, "sluice_loader_restore: loader");
    require(bytes, "sluice_loader_restore: bytes");
    loader->it.reset();  // before the runtime abandons the epoch its batches belong to
    loader->phase = sluice_loader::Phase::kIdle;
    loader->core->loader.restore(std::span<const std::uint8_t>(bytes, size));
    if (epoch != nullptr) *epoch = loader->core->loader.resume_epoch();
    return SLUICE_OK;
  });
}

}  // extern "C"
