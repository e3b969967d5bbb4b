// AlignedBuffer's allocation: operator new with alignment, so a replaced global operator new (the
// allocation-counting test) sees every byte sluice allocates.
#include "sluice/memory/aligned_buffer.hpp"

#include <algorithm>
#include <bit>
#include <new>

namespace sluice {

AlignedBuffer::~AlignedBuffer() { reset(); }

void AlignedBuffer::reserve(std::size_t bytes) {
  if (bytes <= capacity_) return;
  // Powers of two from one page: requests that creep upwards (random crops, files of varied
  // sizes) reallocate a handful of times, then never; the cost is at most 2x the largest request.
  const std::size_t rounded = std::bit_ceil(std::max<std::size_t>(bytes, 4096));
  auto* p = static_cast<std::uint8_t*>(::operator new(rounded, std::align_val_t{kAlignment}));
  reset();
  data_ = p;
  capacity_ = rounded;
}

void AlignedBuffer::reset() {
  if (data_ != nullptr) ::operator delete(data_, std::align_val_t{kAlignment});
  data_ = nullptr;
  capacity_ = 0;
}

}  // namespace sluice
