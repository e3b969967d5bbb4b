// Buffers 2 MiB-aligned and advised to transparent huge pages, and pages faulted in ahead of use
// (huge_mapping.hpp).
#include "sluice/detail/memory/huge_mapping.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <new>

// Linux 5.14's MADV_POPULATE_WRITE, for headers older than the kernel.
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace sluice {

namespace {

constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kHugePage = kHugePageBytes;

std::uint64_t mapped_bytes(std::uint64_t size) { return std::max(kPage, (size + kPage - 1) & ~(kPage - 1)); }

}  // namespace

std::uint8_t* map_huge_aligned(std::uint64_t size) {
  const std::uint64_t bytes = mapped_bytes(size);
  // One huge page more than needed, then the unaligned head and the tail beyond the buffer go.
  void* whole = ::mmap(nullptr, bytes + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (whole == MAP_FAILED) throw std::bad_alloc();
  const auto begin = reinterpret_cast<std::uintptr_t>(whole);
  const std::uintptr_t aligned = (begin + kHugePage - 1) & ~(kHugePage - 1);
  if (aligned > begin) ::munmap(whole, aligned - begin);
  const std::uintptr_t tail = begin + bytes + kHugePage - (aligned + bytes);
  if (tail > 0) ::munmap(reinterpret_cast<void*>(aligned + bytes), tail);
  (void)::madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);
  return reinterpret_cast<std::uint8_t*>(aligned);
}

void unmap_huge_aligned(std::uint8_t* data, std::uint64_t size) { ::munmap(data, mapped_bytes(size)); }

void prefault_pages(std::uint8_t* data, std::uint64_t bytes) {
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  // Only the buffer's own whole pages: the allocator's header and a neighbour's bytes share the
  // partial pages at either end, and the fallback below writes.
  const std::uintptr_t first = (begin + kPage - 1) & ~(kPage - 1);
  const std::uintptr_t last = (begin + bytes) & ~(kPage - 1);
  if (data == nullptr || last <= first) return;
  if (::madvise(reinterpret_cast<void*>(first), last - first, MADV_POPULATE_WRITE) == 0) return;
  for (std::uintptr_t p = first; p < last; p += kPage) *reinterpret_cast<volatile std::uint8_t*>(p) = 0;
}

}  // namespace sluice
