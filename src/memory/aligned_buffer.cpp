// AlignedBuffer's allocation: operator new with alignment, so a replaced global operator new (the
// allocation-counting test) sees every byte sluice allocates.
#include "sluice/detail/memory/aligned_buffer.hpp"
#include "sluice/detail/memory/huge_mapping.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <new>
#include <string>

#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"

namespace sluice {

namespace {

constexpr std::size_t kHugePage = kHugePageBytes;

}  // namespace

AlignedBuffer::~AlignedBuffer() { reset(); }

std::size_t AlignedBuffer::rounded_capacity(std::size_t bytes) {
  // Powers of two from one page: requests that creep upwards (random crops, files of varied
  // sizes) reallocate a handful of times, then never; the cost is at most 2x the largest request.
  return std::bit_ceil(std::max<std::size_t>(bytes, 4096));
}

void AlignedBuffer::attach(MemoryBudget& budget, MemoryUse use, std::chrono::milliseconds wait) {
  reservation_ = budget.empty(use);
  budget_ = &budget;
  wait_ = wait;
  growth_ = Growth::kDeadline;
  if (capacity_ > 0 && !budget.try_grow(reservation_, capacity_, Reclaim::kYes)) {
    throw Error(ErrorCode::kOutOfBudget, "a buffer of " + format_bytes(capacity_) + " does not fit the memory budget");
  }
}

void AlignedBuffer::attach_share(MemoryBudget& budget, MemoryUse use, std::size_t share) {
  attach(budget, use, std::chrono::milliseconds(0));
  growth_ = Growth::kShare;
  if (share > reservation_.bytes() && !budget.try_grow(reservation_, share - reservation_.bytes(), Reclaim::kYes)) {
    throw Error(ErrorCode::kOutOfBudget, "a worker's " + std::string(to_string(use)) + " share of " +
                                             format_bytes(share) + " does not fit the memory budget");
  }
}

void AlignedBuffer::reserve(std::size_t bytes) {
  if (bytes > capacity_) grow_to(rounded_capacity(bytes));
}

void AlignedBuffer::reserve_exact(std::size_t bytes) {
  if (bytes > capacity_) grow_to(page_capacity(bytes));
}

bool AlignedBuffer::try_reserve(std::size_t bytes) {
  if (bytes <= capacity_) return true;
  const std::size_t rounded = rounded_capacity(bytes);
  if (budget_ != nullptr && rounded > reservation_.bytes() &&
      !budget_->try_grow(reservation_, rounded - reservation_.bytes(), Reclaim::kYes)) {
    return false;
  }
  allocate(rounded);
  return true;
}

void AlignedBuffer::grow_to(std::size_t rounded) {
  if (budget_ != nullptr && rounded > reservation_.bytes()) {
    const std::uint64_t more = rounded - reservation_.bytes();
    const std::string use(to_string(reservation_.use()));
    if (growth_ == Growth::kShare) {
      if (!budget_->grow_while_releases_pending(reservation_, more)) {
        throw Error(ErrorCode::kTooLarge,
                    "needs a " + use + " buffer of " + format_bytes(rounded) + ", " + format_bytes(more) +
                        " more than this worker holds, and the memory budget of " + format_bytes(budget_->limit()) +
                        " has " + format_bytes(budget_->available()) + " free: raise the budget by at least " +
                        format_bytes(more));
      }
    } else if (!budget_->grow(reservation_, more, MemoryBudget::Clock::now() + wait_)) {
      throw Error(ErrorCode::kOutOfBudget,
                  "needs " + format_bytes(more) + " more for a " + use + " buffer, and the memory budget of " +
                      format_bytes(budget_->limit()) + " has " + format_bytes(budget_->available()) +
                      " free: raise the budget or lower the batch size");
    }
  }
  allocate(rounded);
}

void AlignedBuffer::allocate(std::size_t rounded) {
  // From 2 MiB on: one huge page more, so the buffer can start on a 2 MiB boundary (the head below
  // it and the tail past the buffer are never touched, so they take address space, not memory).
  const bool huge = rounded >= kHugePage;
  auto* p = static_cast<std::uint8_t*>(::operator new(huge ? rounded + kHugePage : rounded, std::align_val_t{kAlignment}));
  if (base_ != nullptr) ::operator delete(base_, std::align_val_t{kAlignment});
  base_ = p;
  data_ = p;
  if (huge) {
    data_ = reinterpret_cast<std::uint8_t*>((reinterpret_cast<std::uintptr_t>(p) + kHugePage - 1) & ~(kHugePage - 1));
    // Advice only: where the kernel refuses (THP "never", no 2 MiB page free) the pages are 4 KiB.
    (void)::madvise(data_, rounded & ~(kHugePage - 1), MADV_HUGEPAGE);
  }
  capacity_ = rounded;
}

void AlignedBuffer::prefault(std::size_t most) { prefault_pages(data_, std::min(capacity_, most)); }

void AlignedBuffer::reset() {
  if (base_ != nullptr) ::operator delete(base_, std::align_val_t{kAlignment});
  base_ = nullptr;
  data_ = nullptr;
  capacity_ = 0;
  reservation_.shrink(reservation_.bytes());
}

}  // namespace sluice
