// EpochOrder: which item each output position of an epoch gets. Composes, in this order,
//   1. the file shuffle: a permutation of all items, new every epoch (seed, epoch); for tar
//      shards, a permutation of the shards and one of the items within each shard, so an epoch
//      reads one shard after another (each shard's reads stay together: the point of shards);
//   2. the shard: positions rank, rank + world, ... of that permutation; for tar shards, the
//      rank-th contiguous run of it (a rank reads whole shards, and only the ones at its run's
//      ends are shared with a neighbour);
//   3. the shuffle buffer: tf.data's bounded shuffle (fill K, emit a random one, refill).
// All three are index arithmetic, decided before any sample is decoded. Because sources are
// random access, the shuffle buffer holds item indices, not decoded samples: its output order is
// exactly that of a sample buffer of K elements, at 8 bytes a slot instead of a whole image.
// Every rank gets n / world items, one more for the first n % world: equal epochs, whatever the
// shards' sizes, so data-parallel ranks step together.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace sluice::stages {

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
};

class EpochOrder {
 public:
  explicit EpochOrder(const EpochOrderOptions& options);

  // Items in this shard, per epoch.
  std::int64_t size() const { return local_; }

  // Fills `out` (resized to size()) with item indices in output order for `epoch`. Reuses out's
  // storage and the object's scratch: no allocation after the first epoch.
  void compute(std::int64_t epoch, std::vector<std::int64_t>& out);

  // The bytes compute() holds at most, in its scratch and in `out`: what the runtime reserves.
  static std::uint64_t memory_bytes(const EpochOrderOptions& options);

 private:
  void permute(std::int64_t epoch);
  template <class Index>
  void fill_all(std::int64_t epoch, Index* order) const;

  EpochOrderOptions options_;
  std::int64_t local_ = 0;
  std::int64_t first_ = 0;                  // tar shards: where this rank's run starts
  std::vector<std::uint32_t> global_;       // scratch: the whole permutation (world > 1 only)
  std::vector<std::uint32_t> group_order_;  // scratch: the shard permutation
  std::vector<std::int64_t> buffer_;        // scratch: the shuffle buffer's contents
};

}  // namespace sluice::stages
