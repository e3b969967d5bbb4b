// The CUDA backend of a build without CUDA (SLUICE_WITH_CUDA=OFF or no toolkit): no devices,
// and every operation fails with a message that says how to get a build that has them. The
// public classes check require_device() first, so these throws are a second line of defence.
#include "device/cuda_backend.hpp"

#include "sluice/core/error.hpp"

namespace sluice::device_detail {
namespace {

[[noreturn]] void no_backend() {
  throw Error(ErrorCode::kInvalidArgument,
              "this build of sluice has no CUDA backend (configure with -DSLUICE_WITH_CUDA=ON and a "
              "CUDA toolkit); use sluice::host()");
}

}  // namespace

int enter_device(int, bool quiet) {
  if (!quiet) no_backend();
  return -1;
}
void leave_device(int) noexcept {}
int current_device() noexcept { return -1; }

bool cuda_built() { return false; }

int cuda_count(std::string* why) noexcept {
  if (why != nullptr) *why = "this build of sluice has no CUDA backend (configure with -DSLUICE_WITH_CUDA=ON)";
  return 0;
}

DeviceInfo cuda_describe(int) { no_backend(); }
void* stream_create(int, bool, int) { no_backend(); }
void stream_destroy(int, void*) noexcept {}
void stream_wait_event(int, void*, void*) { no_backend(); }
void stream_synchronize(int, void*) { no_backend(); }
bool stream_query(int, void*) { no_backend(); }
void* event_create(int, bool) { no_backend(); }
void event_destroy(int, void*) noexcept {}
void event_record(int, void*, void*) { no_backend(); }
bool event_query(int, void*) { no_backend(); }
void event_synchronize(int, void*) { no_backend(); }
float event_elapsed_ms(int, void*, void*) { no_backend(); }
void* host_alloc(int, std::size_t, bool) { no_backend(); }
void host_free(int, void*) noexcept {}
void host_register(int, void*, std::size_t) { no_backend(); }
void host_unregister(int, void*) noexcept {}
void* device_malloc(int, std::size_t) { no_backend(); }
void device_free(int, void*) noexcept {}
void memcpy_h2d_async(int, void*, const void*, std::size_t, void*) { no_backend(); }
void memcpy_d2h_async(int, void*, const void*, std::size_t, void*) { no_backend(); }
void memcpy_h2d(int, void*, const void*, std::size_t) { no_backend(); }
void memcpy_d2h(int, void*, const void*, std::size_t) { no_backend(); }
void check_launch(const char*) {}
void launch_normalize(int, const NormalizeLaunch&, void*) { no_backend(); }
void launch_spin(int, std::uint64_t, void*) { no_backend(); }

}  // namespace sluice::device_detail
