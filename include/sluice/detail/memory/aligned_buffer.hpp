// AlignedBuffer: an owning, growable, 64-byte aligned byte buffer. It only grows, so a buffer that
// has seen the largest sample of a data set never allocates again: the basis of "no allocation
// per sample in steady state". A buffer of 2 MiB or more starts on a 2 MiB boundary and its whole
// 2 MiB pages are advised to transparent huge pages, so its first writes fault 2 MiB pages in
// rather than 4 KiB ones (a worker's read and splice buffers meet a data set's largest files in
// its first epoch); the 2 MiB more it allocates to get there are address space, never touched.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>

#include "sluice/memory/budget.hpp"

namespace sluice {

class AlignedBuffer {
 public:
  static constexpr std::size_t kAlignment = 64;

  // The capacity a request of `bytes` gets: a power of two, at least one page.
  static std::size_t rounded_capacity(std::size_t bytes);
  // The capacity reserve_exact(bytes) gets: whole pages.
  static std::size_t page_capacity(std::size_t bytes) { return (bytes + 4095) / 4096 * 4096; }

  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t bytes) { reserve(bytes); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& other) noexcept { swap(other); }
  // Accounts this buffer's capacity against `budget` from now on: growth reserves the difference
  // first (waiting up to `wait` for room, then throwing sluice::Error kOutOfBudget).
  void attach(MemoryBudget& budget, MemoryUse use, std::chrono::milliseconds wait);
  // The same for a worker's working memory: reserves `share` bytes at once (what the memory plan
  // gave this buffer: growth up to it never waits, and nothing else can take it first; throws
  // kOutOfBudget if the budget cannot hold it). Growth past the share takes free budget, waiting
  // only while transient reservations are held (MemoryBudget::grow_while_releases_pending);
  // failing that it throws kTooLarge: this sample needs more than the budget can ever give.
  void attach_share(MemoryBudget& budget, MemoryUse use, std::size_t share);
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
    AlignedBuffer(std::move(other)).swap(*this);
    return *this;
  }
  ~AlignedBuffer();

  // Ensures capacity() >= bytes; contents are not preserved when it grows. With a budget
  // attached, the new capacity is reserved before it is allocated.
  void reserve(std::size_t bytes);
  // reserve() only if the budget has room now (caches asked first): false, unchanged, if not.
  bool try_reserve(std::size_t bytes);
  // The same for a buffer whose size is known and fixed (a batch slot): capacity is `bytes`
  // rounded up to a page, not to a power of two.
  void reserve_exact(std::size_t bytes);
  // Faults the first `most` bytes of the capacity (all of it by default) in now (prefault_pages,
  // huge_mapping.hpp): for a buffer made in set-up whose first use would otherwise fault it in
  // during the first epoch.
  void prefault(std::size_t most = SIZE_MAX);
  // Frees the memory (and its reservation).
  void reset();

  std::uint8_t* data() { return data_; }
  const std::uint8_t* data() const { return data_; }
  std::size_t capacity() const { return capacity_; }
  std::span<std::uint8_t> span(std::size_t bytes) { return {data_, bytes}; }

  void swap(AlignedBuffer& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(base_, other.base_);
    std::swap(capacity_, other.capacity_);
    std::swap(reservation_, other.reservation_);
    std::swap(budget_, other.budget_);
    std::swap(wait_, other.wait_);
    std::swap(growth_, other.growth_);
  }

 private:
  // How growth past the reservation waits for budget: up to wait_, or while releases are pending.
  enum class Growth : std::uint8_t { kDeadline, kShare };
  void grow_to(std::size_t capacity);
  void allocate(std::size_t capacity);

  std::uint8_t* data_ = nullptr;
  std::uint8_t* base_ = nullptr;  // what operator new returned: data_, or below it for a huge buffer
  std::size_t capacity_ = 0;
  MemoryBudget* budget_ = nullptr;
  Reservation reservation_;
  std::chrono::milliseconds wait_{0};
  Growth growth_ = Growth::kDeadline;
};

}  // namespace sluice
