// Epoch order: file shuffle (per item, or per shard and within it), shuffle buffer, resume, split.
#include "stages/source/epoch_order.hpp"

#include <algorithm>
#include <numeric>
#include <string>
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

// The shards' order in `epoch`: a permutation keyed on (seed, epoch), or theirs without a seed.
void permute_groups(std::vector<std::uint32_t>& order, std::size_t groups, std::optional<std::uint64_t> file_seed,
                    std::int64_t epoch) {
  order.resize(groups);
  std::iota(order.begin(), order.end(), 0u);
  if (file_seed && groups > 0) {
    shuffle(order.data(), static_cast<std::int64_t>(groups),
            CounterRng(derive_key(*file_seed, kShardStream), static_cast<std::uint64_t>(epoch), 0));
  }
}

}  // namespace

EpochOrder::EpochOrder(const EpochOrderOptions& options) : options_(options) {
  if (options.shard_world < 1 || options.shard_rank < 0 || options.shard_rank >= options.shard_world) {
    throw Error(ErrorCode::kInvalidArgument,
                "shard(rank, world) needs world >= 1 and 0 <= rank < world, got shard(" +
                    std::to_string(options.shard_rank) + ", " + std::to_string(options.shard_world) + ")");
  }
  if (options.batch < 1) throw Error(ErrorCode::kInternal, "epoch order: batch below 1");
  const std::int64_t n = options.items;
  if (n > std::int64_t{UINT32_MAX}) throw Error(ErrorCode::kTooLarge, "more than 2^32 - 1 items in a data set");
  if (!options.groups.empty() && (options.groups.front() != 0 || options.groups.back() != n)) {
    throw Error(ErrorCode::kInternal, "epoch order: shard groups do not cover the items");
  }
  fresh_ = slice_of(n);
}

std::uint64_t EpochOrder::memory_bytes(const EpochOrderOptions& options) {
  const auto n = static_cast<std::uint64_t>(options.items);
  const auto world = static_cast<std::uint64_t>(options.shard_world);
  const std::uint64_t local = n / world + 1;
  const std::uint64_t groups = options.groups.size();
  return 8 * local + (world > 1 ? 4 * n : 0) + 8 * static_cast<std::uint64_t>(std::max<std::int64_t>(0, options.shuffle_buffer)) +
         12 * groups;  // the groups themselves, and their permutation
}

EpochSlice EpochOrder::slice_of(std::int64_t m) const {
  const std::int64_t world = options_.shard_world;
  const std::int64_t rank = options_.shard_rank;
  const std::int64_t b = options_.batch;
  EpochSlice s;
  s.positions = options_.drop_last ? (m / world) / b * b : (m + world - 1) / world;
  const std::int64_t samples = options_.split == ShardSplit::kSamples ? (m > rank ? (m - rank + world - 1) / world : 0)
                                                                      : contiguous_run(m, world, rank).size;
  s.real = std::min(samples, s.positions);
  s.batches = (s.positions + b - 1) / b;
  return s;
}

// The epoch's order of all items, before the resume and the split take their parts.
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

std::uint32_t EpochOrder::first_group(std::optional<std::uint64_t> file_seed, std::size_t groups, std::int64_t epoch) {
  std::vector<std::uint32_t> order;
  permute_groups(order, groups, file_seed, epoch);
  return order.empty() ? 0 : order.front();
}

void EpochOrder::permute(std::int64_t epoch) {
  permute_groups(group_order_, options_.groups.empty() ? 0 : options_.groups.size() - 1, options_.file_seed, epoch);
}

// tf.data's bounded shuffle over the whole order: the buffer starts with the first k inputs; each
// output draws a slot uniformly, emits it and refills it with the next input, or, once the input
// is exhausted, with the last slot.
template <class Index>
void EpochOrder::shuffle_buffer(std::int64_t epoch, Index* order, std::int64_t n) {
  const std::int64_t k = std::min(options_.shuffle_buffer, n);
  if (k <= 1) return;
  CounterRng rng(derive_key(options_.shuffle_seed, kBufferStream), static_cast<std::uint64_t>(epoch), 0);
  buffer_.assign(order, order + k);
  std::int64_t next_input = k;
  std::int64_t filled = k;
  for (std::int64_t pos = 0; pos < n; ++pos) {
    const auto slot = static_cast<std::size_t>(rng.below(static_cast<std::uint64_t>(filled)));
    const std::int64_t emitted = buffer_[slot];
    if (next_input < n) {
      buffer_[slot] = static_cast<std::int64_t>(order[next_input++]);
    } else {
      buffer_[slot] = buffer_[static_cast<std::size_t>(--filled)];
    }
    // Writing position pos never clobbers an input not yet read: next_input > pos always.
    order[pos] = static_cast<Index>(emitted);
  }
}

// Takes out, in place and keeping the order of the rest, what each earlier segment delivered:
// under kSamples a segment's ranks took the first steps * G items left (round robin over them),
// under kShards each rank the first steps * G / world items of its contiguous run.
template <class Index>
std::int64_t EpochOrder::remove_done(Index* order, std::int64_t n, std::span<const EpochSegment> done) const {
  const std::int64_t global_batch = options_.batch * options_.shard_world;
  std::int64_t m = n;
  for (const EpochSegment& segment : done) {
    if (segment.steps <= 0 || m == 0) continue;
    const std::int64_t world = segment.world;
    const std::int64_t per_rank = segment.steps * (global_batch / world);
    if (options_.split == ShardSplit::kSamples) {
      const std::int64_t taken = std::min(m, segment.steps * global_batch);
      std::copy(order + taken, order + m, order);
      m -= taken;
      continue;
    }
    std::int64_t write = 0;
    for (std::int64_t r = 0; r < world; ++r) {
      const Run run = contiguous_run(m, world, r);
      const std::int64_t from = run.first + std::min(per_rank, run.size);
      std::copy(order + from, order + run.first + run.size, order + write);
      write += run.first + run.size - from;
    }
    m = write;
  }
  return m;
}

EpochSlice EpochOrder::compute(std::int64_t epoch, std::span<const EpochSegment> done, std::vector<std::int64_t>& out) {
  const std::int64_t n = options_.items;
  const std::int64_t world = options_.shard_world;
  const std::int64_t rank = options_.shard_rank;
  // A last segment at this world size continues where it stopped (the uninterrupted run's
  // order, in either split), rather than splitting what it left anew.
  std::int64_t skip = 0;
  if (!done.empty() && done.back().world == world) {
    skip = done.back().steps;
    done = done.first(done.size() - 1);
  }
  std::int64_t first_step = 0;
  for (const EpochSegment& segment : done) first_step += segment.steps;
  permute(epoch);
  std::int64_t m = 0;
  if (world == 1) {
    out.resize(static_cast<std::size_t>(n));  // the whole order is this rank's: no second copy
    fill_all(epoch, out.data());
    shuffle_buffer(epoch, out.data(), n);
    m = remove_done(out.data(), n, done);
  } else {
    global_.resize(static_cast<std::size_t>(n));
    fill_all(epoch, global_.data());
    shuffle_buffer(epoch, global_.data(), n);
    m = remove_done(global_.data(), n, done);
  }
  EpochSlice slice = slice_of(m);
  slice.first_step = first_step;
  slice.skip = std::min(skip, slice.batches);
  out.resize(static_cast<std::size_t>(slice.positions));
  if (world > 1) {
    const Run run = contiguous_run(m, world, rank);
    for (std::int64_t i = 0; i < slice.real; ++i) {
      const std::int64_t at = options_.split == ShardSplit::kSamples ? rank + i * world : run.first + i;
      out[static_cast<std::size_t>(i)] = global_[static_cast<std::size_t>(at)];
    }
  }
  // Padding repeats this rank's own samples from its start (a rank with none repeats the epoch's).
  for (std::int64_t i = slice.real; i < slice.positions; ++i) {
    out[static_cast<std::size_t>(i)] = slice.real > 0 ? out[static_cast<std::size_t>((i - slice.real) % slice.real)]
                                       : world > 1   ? static_cast<std::int64_t>(global_[static_cast<std::size_t>(i % m)])
                                                     : out[static_cast<std::size_t>(i % m)];
  }
  return slice;
}

}  // namespace sluice::stages
