// How much of a buffer is in memory now: for the tests that hold set-up to faulting a buffer in
// before the first epoch would (the batch ring's slots, a worker's buffers, prefault_pages).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sluice::test {

// The whole pages inside [data, data + bytes) that are not resident (mincore), or -1 where
// mincore fails. The partial pages at either end are left out: they may belong to a neighbour.
inline long nonresident_pages(const void* data, std::size_t bytes) {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t first = (begin + page - 1) & ~(page - 1);
  const std::uintptr_t last = (begin + bytes) & ~(page - 1);
  if (last <= first) return 0;
  std::vector<unsigned char> resident((last - first) / page);
  if (::mincore(reinterpret_cast<void*>(first), last - first, resident.data()) != 0) return -1;
  long missing = 0;
  for (const unsigned char r : resident) missing += (r & 1) == 0 ? 1 : 0;
  return missing;
}

// The whole pages inside [data, data + bytes): what nonresident_pages counts out of.
inline long whole_pages(const void* data, std::size_t bytes) {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t first = (begin + page - 1) & ~(page - 1);
  const std::uintptr_t last = (begin + bytes) & ~(page - 1);
  return last > first ? static_cast<long>((last - first) / page) : 0;
}

}  // namespace sluice::test
