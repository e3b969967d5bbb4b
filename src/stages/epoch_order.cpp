// Epoch order: file shuffle, shard, shuffle buffer.
#include "stages/epoch_order.hpp"

#include <numeric>
#include <utility>

#include "sluice/core/error.hpp"
#include "sluice/core/rng.hpp"

namespace sluice::stages {

namespace {
constexpr std::uint64_t kFileStream = 0x66696c65;     // "file"
constexpr std::uint64_t kBufferStream = 0x62756666;   // "buff"
}  // namespace

EpochOrder::EpochOrder(const EpochOrderOptions& options) : options_(options) {
  if (options.shard_world < 1 || options.shard_rank < 0 || options.shard_rank >= options.shard_world) {
    throw Error(ErrorCode::kInvalidArgument,
                "shard(rank, world) needs world >= 1 and 0 <= rank < world, got shard(" +
                    std::to_string(options.shard_rank) + ", " + std::to_string(options.shard_world) + ")");
  }
  const std::int64_t n = options.items;
  const std::int64_t world = options.shard_world;
  local_ = n / world + (options.shard_rank < n % world ? 1 : 0);
}

void EpochOrder::compute(std::int64_t epoch, std::vector<std::int64_t>& out) {
  const std::int64_t n = options_.items;
  global_.resize(static_cast<std::size_t>(n));
  std::iota(global_.begin(), global_.end(), std::int64_t{0});
  if (options_.file_seed) {
    // Fisher-Yates from a counter-based stream keyed on (seed, epoch).
    CounterRng rng(derive_key(*options_.file_seed, kFileStream), static_cast<std::uint64_t>(epoch), 0);
    for (std::int64_t i = n - 1; i > 0; --i) {
      const auto j = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(i + 1)));
      std::swap(global_[static_cast<std::size_t>(i)], global_[static_cast<std::size_t>(j)]);
    }
  }

  out.resize(static_cast<std::size_t>(local_));
  for (std::int64_t i = 0; i < local_; ++i) {
    out[static_cast<std::size_t>(i)] =
        global_[static_cast<std::size_t>(options_.shard_rank + i * options_.shard_world)];
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
