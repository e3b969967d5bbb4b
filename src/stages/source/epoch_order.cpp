// Epoch order: file shuffle (per item, or per shard and within it), shard, shuffle buffer.
#include "stages/source/epoch_order.hpp"

#include <numeric>
#include <utility>

#include "sluice/core/error.hpp"
#include "sluice/core/rng.hpp"

namespace sluice::stages {

namespace {
constexpr std::uint64_t kFileStream = 0x66696c65;     // "file"
constexpr std::uint64_t kShardStream = 0x73686172;    // "shar"
constexpr std::uint64_t kBufferStream = 0x62756666;   // "buff"

// Fisher-Yates of [first, first + n) from a counter-based stream.
template <class Index>
void shuffle(Index* order, std::int64_t n, CounterRng rng) {
  for (std::int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(i + 1)));
    std::swap(order[i], order[j]);
  }
}
}  // namespace

EpochOrder::EpochOrder(const EpochOrderOptions& options) : options_(options) {
  if (options.shard_world < 1 || options.shard_rank < 0 || options.shard_rank >= options.shard_world) {
    throw Error(ErrorCode::kInvalidArgument,
                "shard(rank, world) needs world >= 1 and 0 <= rank < world, got shard(" +
                    std::to_string(options.shard_rank) + ", " + std::to_string(options.shard_world) + ")");
  }
  const std::int64_t n = options.items;
  if (n > std::int64_t{UINT32_MAX}) throw Error(ErrorCode::kTooLarge, "more than 2^32 - 1 items in a data set");
  if (!options.groups.empty() && (options.groups.front() != 0 || options.groups.back() != n)) {
    throw Error(ErrorCode::kInternal, "epoch order: shard groups do not cover the items");
  }
  const std::int64_t world = options.shard_world;
  const std::int64_t rank = options.shard_rank;
  local_ = n / world + (rank < n % world ? 1 : 0);
  first_ = rank * (n / world) + std::min(rank, n % world);
}

std::uint64_t EpochOrder::memory_bytes(const EpochOrderOptions& options) {
  const auto n = static_cast<std::uint64_t>(options.items);
  const auto world = static_cast<std::uint64_t>(options.shard_world);
  const std::uint64_t local = n / world + 1;
  const std::uint64_t groups = options.groups.size();
  return 8 * local + (world > 1 ? 4 * n : 0) + 8 * static_cast<std::uint64_t>(std::max<std::int64_t>(0, options.shuffle_buffer)) +
         12 * groups;  // the groups themselves, and their permutation
}

// The epoch's order of all items, before the shard takes its part.
template <class Index>
void EpochOrder::fill_all(std::int64_t epoch, Index* order) const {
  const std::int64_t n = options_.items;
  const auto& groups = options_.groups;
  if (!options_.file_seed) {
    std::iota(order, order + n, Index{0});
    return;
  }
  const std::uint64_t key = derive_key(*options_.file_seed, kFileStream);
  if (groups.empty()) {
    // One Fisher-Yates over all items, keyed on (seed, epoch): the order folders always had.
    std::iota(order, order + n, Index{0});
    shuffle(order, n, CounterRng(key, static_cast<std::uint64_t>(epoch), 0));
    return;
  }
  // Shards in a new order, each shard's items in a new order: streams keyed on (seed, epoch)
  // and, within a shard, its index.
  std::int64_t at = 0;
  for (const std::uint32_t g : group_order_) {
    const std::int64_t begin = groups[g];
    const std::int64_t count = groups[g + 1] - begin;
    std::iota(order + at, order + at + count, static_cast<Index>(begin));
    shuffle(order + at, count, CounterRng(key, static_cast<std::uint64_t>(epoch), g + 1));
    at += count;
  }
}

void EpochOrder::permute(std::int64_t epoch) {
  const std::size_t groups = options_.groups.empty() ? 0 : options_.groups.size() - 1;
  group_order_.resize(groups);
  std::iota(group_order_.begin(), group_order_.end(), 0u);
  if (options_.file_seed && groups > 0) {
    shuffle(group_order_.data(), static_cast<std::int64_t>(groups),
            CounterRng(derive_key(*options_.file_seed, kShardStream), static_cast<std::uint64_t>(epoch), 0));
  }
}

void EpochOrder::compute(std::int64_t epoch, std::vector<std::int64_t>& out) {
  const std::int64_t n = options_.items;
  const std::int64_t world = options_.shard_world;
  permute(epoch);
  out.resize(static_cast<std::size_t>(local_));
  if (world == 1) {
    fill_all(epoch, out.data());  // the whole order is this rank's: no second copy
  } else {
    global_.resize(static_cast<std::size_t>(n));
    fill_all(epoch, global_.data());
    for (std::int64_t i = 0; i < local_; ++i) {
      // Tar shards: this rank's contiguous run; other sources: every world-th position.
      const std::int64_t at = options_.groups.empty() ? options_.shard_rank + i * world : first_ + i;
      out[static_cast<std::size_t>(i)] = global_[static_cast<std::size_t>(at)];
    }
  }

  const std::int64_t k = std::min(options_.shuffle_buffer, local_);
  if (k <= 1) return;
  // The buffer starts with the first k inputs; each output draws a slot uniformly, emits it and
  // refills it with the next input, or, once the input is exhausted, with the last slot.
  CounterRng rng(derive_key(options_.shuffle_seed, kBufferStream), static_cast<std::uint64_t>(epoch), 0);
  buffer_.assign(out.begin(), out.begin() + k);
  std::int64_t next_input = k;
  std::int64_t filled = k;
  for (std::int64_t pos = 0; pos < local_; ++pos) {
    const auto slot = static_cast<std::size_t>(rng.below(static_cast<std::uint64_t>(filled)));
    const std::int64_t emitted = buffer_[slot];
    if (next_input < local_) {
      buffer_[slot] = out[static_cast<std::size_t>(next_input++)];
    } else {
      buffer_[slot] = buffer_[static_cast<std::size_t>(--filled)];
    }
    // Writing position pos never clobbers an input not yet read: next_input > pos always.
    out[static_cast<std::size_t>(pos)] = emitted;
  }
}

}  // namespace sluice::stages
