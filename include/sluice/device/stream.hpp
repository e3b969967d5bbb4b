// Streams and events: the ordering primitives of the device path. A Stream is an ordered queue
// of device work (a cudaStream_t on CUDA); an Event marks a point in a stream that other streams
// can wait for without the host waiting (cudaStreamWaitEvent), and that the host can poll or wait
// for when it must (at slot reuse, not per batch).
//
// On the host device the same API is synchronous: work "submitted" to a host stream has already
// run when the call returns, so events are complete as soon as they are recorded, waits are
// no-ops, and elapsed_ms() measures host time between the two records. Code written against the
// API is therefore correct on both backends.
#pragma once

#include <utility>

#include "sluice/device/device.hpp"

namespace sluice {

struct StreamOptions {
  bool non_blocking = true;  // does not synchronise with the legacy default stream
  int priority = 0;          // CUDA stream priority: lower numbers run first; clamped to the range
};

struct EventOptions {
  bool timing = false;  // needed by elapsed_ms(); timing-free events are cheaper to record and wait
};

class Event;

class Stream {
 public:
  // A host stream: synchronous.
  Stream() = default;
  // Creates a stream on `device`. Throws sluice::Error when the device is unusable.
  explicit Stream(DeviceId device, StreamOptions options = {});
  // Borrows a stream someone else created (the training loop's, e.g. PyTorch's
  // torch.cuda.current_stream().cuda_stream): used, never destroyed. nullptr is CUDA's legacy
  // default stream.
  static Stream wrap(DeviceId device, void* native_stream);

  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  Stream(Stream&& other) noexcept { swap(other); }
  Stream& operator=(Stream&& other) noexcept {
    Stream(std::move(other)).swap(*this);
    return *this;
  }
  ~Stream();

  DeviceId device() const { return device_; }
  // The cudaStream_t, or nullptr (host, or the legacy default stream).
  void* native_handle() const { return handle_; }

  // Work submitted to this stream from now on waits until `event` completes; the host does not
  // wait (a host stream is the host: it waits for a device event there and then). An event that
  // was never recorded is complete.
  void wait(const Event& event);
  // Blocks the host until all work submitted so far has finished.
  void synchronize();
  // True when all work submitted so far has finished.
  bool query() const;

  void swap(Stream& other) noexcept {
    std::swap(device_, other.device_);
    std::swap(handle_, other.handle_);
    std::swap(owned_, other.owned_);
  }

 private:
  DeviceId device_ = host();
  void* handle_ = nullptr;
  bool owned_ = false;
};

class Event {
 public:
  // A host event, not yet recorded.
  Event() = default;
  // Creates an event on `device`. Throws sluice::Error when the device is unusable.
  explicit Event(DeviceId device, EventOptions options = {});

  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& other) noexcept { swap(other); }
  Event& operator=(Event&& other) noexcept {
    Event(std::move(other)).swap(*this);
    return *this;
  }
  ~Event();

  DeviceId device() const { return device_; }
  // The cudaEvent_t, or nullptr on the host.
  void* native_handle() const { return handle_; }
  bool recorded() const { return recorded_; }

  // Marks the point after all work submitted to `stream` so far (a new record replaces the old).
  void record(Stream& stream);
  // True when the recorded work finished, or nothing was recorded. Never blocks.
  bool query() const;
  // Blocks the host until the recorded work finished.
  void synchronize() const;

  // Milliseconds from `start` to `end`: both timing events on the same device, recorded and
  // complete (synchronize() first). Throws sluice::Error(kInvalidArgument) otherwise.
  static float elapsed_ms(const Event& start, const Event& end);

  void swap(Event& other) noexcept {
    std::swap(device_, other.device_);
    std::swap(handle_, other.handle_);
    std::swap(timing_, other.timing_);
    std::swap(recorded_, other.recorded_);
    std::swap(host_time_ns_, other.host_time_ns_);
  }

 private:
  DeviceId device_ = host();
  void* handle_ = nullptr;
  bool timing_ = true;          // host events always time
  bool recorded_ = false;
  long long host_time_ns_ = 0;  // host events: steady_clock at record()
};

}  // namespace sluice
