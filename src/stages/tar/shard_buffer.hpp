// A remote shard's buffer under cache_limit 0 (shard_fetcher.hpp): its own anonymous mapping,
// starting on a 2 MiB boundary and advised to transparent huge pages, so that the stream's first
// writes into it fault 2 MiB pages in rather than 4 KiB ones (2,048 per 8 MiB, each 12-14 us on
// the VMs measured in docs/remote.md, where fresh 4 KiB pages made the in-memory stream cost more
// CPU than the cache folder's page-cache writes). Only the whole 2 MiB pages inside the buffer
// can be huge: the part past the last one (up to 2 MiB) has 4 KiB pages. Advice only: where the
// kernel refuses (THP "never", or no 2 MiB page free) the buffer gets 4 KiB pages.
#pragma once

#include <cstdint>

namespace sluice::stages {

// `size` bytes (rounded up to whole 4 KiB pages), zero, 2 MiB-aligned; throws std::bad_alloc.
std::uint8_t* map_shard_buffer(std::uint64_t size);
// Unmaps what map_shard_buffer(size) returned.
void unmap_shard_buffer(std::uint8_t* data, std::uint64_t size);

}  // namespace sluice::stages
