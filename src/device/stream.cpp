// Stream and Event on both backends. Host: work is done when it is submitted, so an event is
// complete once recorded and only its timestamp matters; CUDA: the runtime's streams and events,
// through the backend's opaque handles.
#include "sluice/device/stream.hpp"

#include <chrono>

#include "device/cuda_backend.hpp"
#include "sluice/core/error.hpp"

namespace sluice {
namespace {

long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void check_same_device(DeviceId a, DeviceId b, const char* what) {
  if (a != b) {
    throw Error(ErrorCode::kInvalidArgument, std::string(what) + ": the stream is on " + to_string(a) +
                                                 " and the event on " + to_string(b));
  }
}

}  // namespace

Stream::Stream(DeviceId device, StreamOptions options) : device_(device) {
  require_device(device);
  if (device.is_cuda()) {
    handle_ = device_detail::stream_create(device.index, options.non_blocking, options.priority);
    owned_ = true;
  }
}

Stream Stream::wrap(DeviceId device, void* native_stream) {
  require_device(device);
  Stream stream;
  stream.device_ = device;
  stream.handle_ = device.is_cuda() ? native_stream : nullptr;
  stream.owned_ = false;
  return stream;
}

Stream::~Stream() {
  if (owned_ && handle_ != nullptr) device_detail::stream_destroy(device_.index, handle_);
}

void Stream::wait(const Event& event) {
  if (!event.recorded()) return;
  if (device_.is_host()) {
    event.synchronize();  // a host stream's later work is the host's: it waits for a device event
    return;
  }
  check_same_device(device_, event.device(), "Stream::wait");
  device_detail::stream_wait_event(device_.index, handle_, event.native_handle());
}

void Stream::synchronize() {
  if (device_.is_cuda()) device_detail::stream_synchronize(device_.index, handle_);
}

bool Stream::query() const { return device_.is_host() || device_detail::stream_query(device_.index, handle_); }

Event::Event(DeviceId device, EventOptions options) : device_(device), timing_(options.timing || device.is_host()) {
  require_device(device);
  if (device.is_cuda()) handle_ = device_detail::event_create(device.index, options.timing);
}

Event::~Event() {
  if (handle_ != nullptr) device_detail::event_destroy(device_.index, handle_);
}

void Event::record(Stream& stream) {
  check_same_device(stream.device(), device_, "Event::record");
  if (device_.is_cuda()) device_detail::event_record(device_.index, handle_, stream.native_handle());
  host_time_ns_ = now_ns();
  recorded_ = true;
}

bool Event::query() const {
  return !recorded_ || device_.is_host() || device_detail::event_query(device_.index, handle_);
}

void Event::synchronize() const {
  if (recorded_ && device_.is_cuda()) device_detail::event_synchronize(device_.index, handle_);
}

float Event::elapsed_ms(const Event& start, const Event& end) {
  if (start.device_ != end.device_) {
    throw Error(ErrorCode::kInvalidArgument, "Event::elapsed_ms: the events are on " + to_string(start.device_) +
                                                 " and " + to_string(end.device_));
  }
  if (!start.recorded_ || !end.recorded_) {
    throw Error(ErrorCode::kInvalidArgument, "Event::elapsed_ms: both events must be recorded");
  }
  if (!start.timing_ || !end.timing_) {
    throw Error(ErrorCode::kInvalidArgument, "Event::elapsed_ms: both events need EventOptions{.timing = true}");
  }
  if (start.device_.is_host()) return static_cast<float>(end.host_time_ns_ - start.host_time_ns_) / 1e6f;
  return device_detail::event_elapsed_ms(start.device_.index, start.handle_, end.handle_);
}

}  // namespace sluice
