// Copies between host and device memory, ordered on a stream. An asynchronous copy from a
// PinnedBuffer returns at once and runs on the device's copy engine while the host and the
// device's compute units do other work; the caller records an Event after it to know when it is
// done (or passes `done`). From pageable memory the same call still works but the driver stages
// it through its own pinned buffer and the host waits: the transfer benchmark measures how much
// that costs (bench/micro/transfer_bench.cpp).
//
// On the host device every copy is a memcpy that has finished when the call returns.
#pragma once

#include <cstddef>

#include "sluice/device/stream.hpp"

namespace sluice {

// Enqueues host `src` -> device `dst` (`bytes`) on `stream`; records `done` after it when given.
// `dst` is memory of stream.device() (from a DevicePool). Throws sluice::Error on a CUDA error.
void copy_to_device_async(void* dst, const void* src, std::size_t bytes, Stream& stream,
                          Event* done = nullptr);

// Enqueues device `src` -> host `dst` on `stream`; records `done` after it when given.
void copy_to_host_async(void* dst, const void* src, std::size_t bytes, Stream& stream,
                        Event* done = nullptr);

// Blocking host -> device copy (cudaMemcpy on the legacy stream): the reference peak the
// transfer benchmark holds the asynchronous path to.
void copy_to_device(DeviceId device, void* dst, const void* src, std::size_t bytes);

// Blocking device -> host copy (cudaMemcpy): for tests and tools, never in the pipeline.
void copy_to_host(DeviceId device, void* dst, const void* src, std::size_t bytes);

}  // namespace sluice
