// ConsumerStreams: the streams, besides the one release() is given, that a transfer ring slot's
// batch was read on (TransferRing::record_stream: torch's current stream through DLPack, a C
// consumer's stream). Plain bookkeeping over opaque handles, apart from the ring so a host test
// can check it: each stream once, in the order named, at most kCapacity of them. Private to
// src/device.
#pragma once

#include <array>
#include <cstddef>
#include <string>

#include "sluice/core/error.hpp"

namespace sluice::device_detail {

class ConsumerStreams {
 public:
  // Distinct streams one batch may be read on besides the release stream: a consumer with a
  // compute stream and a copy stream, say, reading data and labels; more is a bug to report.
  static constexpr std::size_t kCapacity = 4;

  // Adds `stream` (a cudaStream_t; nullptr is the legacy default stream) unless it is there.
  // Returns its index. Throws sluice::Error(kInvalidArgument) when kCapacity others are there.
  std::size_t add(void* stream) {
    for (std::size_t i = 0; i < size_; ++i) {
      if (streams_[i] == stream) return i;
    }
    if (size_ == kCapacity) {
      throw Error(ErrorCode::kInvalidArgument,
                  "transfer ring: a batch was recorded on more than " + std::to_string(kCapacity) +
                      " streams besides the loader's; synchronise some of them with one before recording it");
    }
    streams_[size_] = stream;
    return size_++;
  }
  std::size_t size() const { return size_; }
  void* operator[](std::size_t i) const { return streams_[i]; }
  void clear() { size_ = 0; }

 private:
  std::array<void*, kCapacity> streams_{};
  std::size_t size_ = 0;
};

}  // namespace sluice::device_detail
