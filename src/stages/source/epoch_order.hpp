// EpochOrder: which item each output position of an epoch gets, on this rank. Composes, in order,
//   1. the file shuffle: a permutation of all items, new every epoch (seed, epoch); for tar
//      shards, a permutation of the shards and one of the items within each shard, so an epoch
//      reads one shard after another (each shard's reads stay together: the point of shards);
//   2. the shuffle buffer: tf.data's bounded shuffle (fill K, emit a random one, refill), over
//      the whole epoch's order, so the order is the same at every world size;
//   3. the part already delivered before a resume (EpochSegment) taken out;
//   4. the split among ranks (ShardSplit): kSamples gives rank r positions r, r + world, ... of
//      what is left, so global step s (the union of every rank's s-th batch) holds positions
//      [s * G, (s + 1) * G) of it for a global batch G = batch * world at any world size;
//      kShards gives rank r the r-th contiguous run (a rank reads whole tar shards, and only the
//      ones at its run's ends are shared with a neighbour), which keeps reads local but depends
//      on the world size.
// All of it is index arithmetic, decided before any sample is decoded. Because sources are random
// access, the shuffle buffer holds item indices, not decoded samples: its output order is exactly
// that of a sample buffer of K elements, at 8 bytes a slot instead of a whole image.
//
// Equal batch counts: every rank yields the same number of batches. Without drop_last, each rank
// has ceil(m / world) positions for m items left; a rank with fewer samples fills its last
// positions with repeats of its own samples (padding, as DALI's pad_last_batch), so every rank's
// last batch has the same size. With drop_last, every rank has floor(floor(m / world) / batch)
// full batches and the rest is dropped (fewer than one global batch). This is the one place that
// splits an epoch among ranks: any source (files, tar shards, remote shards) goes through it, a
// sharded source by giving its shards as `groups`.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace sluice::stages {

enum class ShardSplit : std::uint8_t {
  kSamples,  // round robin over the epoch's order: the same global steps at every world size
  kShards,   // a contiguous run of it per rank: whole tar shards per rank
};

// A part of an epoch delivered before a resume: `steps` global steps at `world` ranks (each rank
// took steps * G / world samples of what was left at that segment's start).
struct EpochSegment {
  int world = 1;
  std::int64_t steps = 0;
};

struct EpochOrderOptions {
  std::int64_t items = 0;                       // size of the whole data set
  int shard_rank = 0;
  int shard_world = 1;
  std::optional<std::uint64_t> file_seed;       // file shuffle, if any
  std::int64_t shuffle_buffer = 0;              // 0 or 1: no shuffle buffer
  std::uint64_t shuffle_seed = 0;
  // Tar shards: the first item of each shard, then `items` (ItemTable::shard_starts()); empty
  // for any other source.
  std::vector<std::int64_t> groups;
  std::int64_t batch = 1;                       // per rank; the global batch is batch * world
  bool drop_last = false;
  ShardSplit split = ShardSplit::kSamples;
};

// What compute() laid out for this rank.
struct EpochSlice {
  std::int64_t first_step = 0;  // global steps delivered in earlier segments (batch index offset)
  std::int64_t skip = 0;        // steps of this slice already delivered (a resume at the same world)
  std::int64_t batches = 0;     // this rank's batches in the slice, skipped ones included
  std::int64_t positions = 0;   // out.size(): padding included
  std::int64_t real = 0;        // positions [0, real) are samples, [real, positions) padding
};

// The r-th of `world` contiguous runs of m items (the first m % world one longer).
struct Run {
  std::int64_t first = 0;
  std::int64_t size = 0;
};
inline Run contiguous_run(std::int64_t m, std::int64_t world, std::int64_t rank) {
  return Run{rank * (m / world) + (rank < m % world ? rank : m % world), m / world + (rank < m % world ? 1 : 0)};
}

class EpochOrder {
 public:
  explicit EpochOrder(const EpochOrderOptions& options);

  // Samples (without padding) of this rank in a whole epoch.
  std::int64_t size() const { return fresh_.real; }
  // Batches of every rank in a whole epoch.
  std::int64_t batches() const { return fresh_.batches; }

  // Fills `out` with item indices in output order for `epoch`, less what `done` delivered.
  // Reuses out's storage and the object's scratch: no allocation after the first epoch.
  EpochSlice compute(std::int64_t epoch, std::span<const EpochSegment> done, std::vector<std::int64_t>& out);
  EpochSlice compute(std::int64_t epoch, std::vector<std::int64_t>& out) { return compute(epoch, {}, out); }

  // The bytes compute() holds at most, in its scratch and in `out`: what the runtime reserves.
  static std::uint64_t memory_bytes(const EpochOrderOptions& options);

  // The shard (group) first in `epoch`'s order of `groups` shards, before the shuffle buffer and
  // the split: what compute() starts from, known from the shard count alone.
  static std::uint32_t first_group(std::optional<std::uint64_t> file_seed, std::size_t groups, std::int64_t epoch);

 private:
  void permute(std::int64_t epoch);
  template <class Index>
  void fill_all(std::int64_t epoch, Index* order) const;
  template <class Index>
  void shuffle_buffer(std::int64_t epoch, Index* order, std::int64_t n);
  template <class Index>
  std::int64_t remove_done(Index* order, std::int64_t n, std::span<const EpochSegment> done) const;
  // Positions, samples and batches of this rank for m items left.
  EpochSlice slice_of(std::int64_t m) const;

  EpochOrderOptions options_;
  EpochSlice fresh_;
  std::vector<std::uint32_t> global_;       // scratch: the whole order (world > 1 only)
  std::vector<std::uint32_t> group_order_;  // scratch: the shard permutation
  std::vector<std::int64_t> buffer_;        // scratch: the shuffle buffer's contents
};

}  // namespace sluice::stages
