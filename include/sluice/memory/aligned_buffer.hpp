// AlignedBuffer: an owning, growable, 64-byte aligned byte buffer. It only grows, so a buffer that
// has seen the largest sample of a data set never allocates again: the basis of "no allocation
// per sample in steady state".
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace sluice {

class AlignedBuffer {
 public:
  static constexpr std::size_t kAlignment = 64;

  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t bytes) { reserve(bytes); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& other) noexcept { swap(other); }
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
    AlignedBuffer(std::move(other)).swap(*this);
    return *this;
  }
  ~AlignedBuffer();

  // Ensures capacity() >= bytes; contents are not preserved when it grows.
  void reserve(std::size_t bytes);
  // Frees the memory.
  void reset();

  std::uint8_t* data() { return data_; }
  const std::uint8_t* data() const { return data_; }
  std::size_t capacity() const { return capacity_; }
  std::span<std::uint8_t> span(std::size_t bytes) { return {data_, bytes}; }

  void swap(AlignedBuffer& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(capacity_, other.capacity_);
  }

 private:
  std::uint8_t* data_ = nullptr;
  std::size_t capacity_ = 0;
};

}  // namespace sluice
