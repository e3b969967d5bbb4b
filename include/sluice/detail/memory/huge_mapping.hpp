// A buffer of its own anonymous mapping, starting on a 2 MiB boundary and advised to transparent
// huge pages, so that its first writes fault 2 MiB pages in rather than 4 KiB ones (512 faults per
// 2 MiB, each 11-14 us on the VMs measured in docs/performance.md and docs/remote.md). For buffers
// that are written whole soon after they are made and live a while: a remote shard's bytes under
// cache_limit 0 (stages/tar/shard_fetcher.cpp), the progressive JPEG coefficient arrays a decoder
// keeps between images (stages/decode/jpeg_coefficient_pool.cpp). Only the whole 2 MiB pages inside
// the buffer can be huge: the part past the last one has 4 KiB pages. Advice only: where the
// kernel refuses (THP "never", or no 2 MiB page free) the buffer gets 4 KiB pages. Not counted
// against any budget here: the caller reserves `bytes` first.
#pragma once

#include <cstdint>

namespace sluice {

// The transparent huge page's size on x86-64 and arm64 with 4 KiB pages: what the buffers that
// want huge pages (this mapping, AlignedBuffer from 2 MiB on, the decoder's kept buffers) align to.
inline constexpr std::uint64_t kHugePageBytes = std::uint64_t{2} << 20;

// `bytes` rounded up to whole huge pages: what a buffer kept for huge pages reserves.
constexpr std::uint64_t whole_huge_pages(std::uint64_t bytes) {
  return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
}

// `bytes` (rounded up to whole 4 KiB pages, at least one), zero, 2 MiB-aligned, not touched;
// throws std::bad_alloc when the mapping fails.
std::uint8_t* map_huge_aligned(std::uint64_t bytes);
// Unmaps what map_huge_aligned(bytes) returned, with the same `bytes`.
void unmap_huge_aligned(std::uint8_t* data, std::uint64_t bytes);

// Faults the whole 4 KiB pages inside [data, data + bytes) in now (MADV_POPULATE_WRITE, Linux
// 5.14; before it, a zero written to each page), so that set-up pays a buffer's first touch rather
// than the first epoch's workers: on the VMs measured a fresh 2 MiB page took about 3 ms to clear
// where the host had to back it (docs/performance.md). For buffers whose contents do not matter
// yet (they are written before they are read). Advice only: where it fails, pages fault on use.
void prefault_pages(std::uint8_t* data, std::uint64_t bytes);

}  // namespace sluice
