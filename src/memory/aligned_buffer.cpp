// AlignedBuffer's allocation: operator new with alignment, so a replaced global operator new (the
// allocation-counting test) sees every byte sluice allocates.
#include "sluice/memory/aligned_buffer.hpp"

#include <new>

namespace sluice {

AlignedBuffer::~AlignedBuffer() { reset(); }

void AlignedBuffer::reserve(std::size_t bytes) {
  if (bytes <= capacity_) return;
  // Round up to a page-friendly size so slowly growing requests do not reallocate each time.
  std::size_t rounded = 4096;
  while (rounded < bytes) rounded += rounded / 2;
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
