// Remote shards fetched when an epoch reads them, for a rank of several that splits tar shards
// by shards (docs/distributed.md): the rank reads a contiguous run of each epoch's shard-ordered
// samples, about 1 / world of the shards, so it fetches those and not the whole set. build()
// learns every shard's samples from the index file beside it on the server ("<url>.sluice-idx",
// what sluice writes beside a shard it indexes); each epoch's start (and build()'s size probe)
// hands this the rank's items, and the shards they live in that are not yet current in the shard
// cache are fetched at once (up to eight transfers in flight), revalidated with If-None-Match
// the first time this loader uses a cached copy. Copies the epoch needs are never evicted; others
// may be, least recently used first, when the cache is over its limit.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sluice/pipeline/options.hpp"
#include "stages/source/source.hpp"

namespace sluice::stages {

namespace remote {
class SourceCounters;
}  // namespace remote

class OnDemandShards final : public ShardFetcher {
 public:
  struct Shard {
    std::string url;
    std::string copy;                        // the cache's path for it (ItemTable::Shard::path)
    std::uint64_t size = 0;                  // what its index says
    std::int64_t first = 0;                  // its items: [first, end) of the item table
    std::int64_t end = 0;
    std::shared_ptr<FetchFailure> failure;   // shared with the item table's shard
    bool validated = false;                  // revalidated (or fetched) by this loader
  };

  // `shards` in item order.
  OnDemandShards(RemoteOptions options, std::vector<Shard> shards);

  void fetch(std::span<const std::int64_t> items, const std::function<bool()>& stop) override;

 private:
  // The shard whose items hold `item`, or -1 (an item of a local shard or one fetched in build()).
  std::int64_t shard_of(std::int64_t item) const;

  RemoteOptions options_;
  std::vector<Shard> shards_;
  // The loader's per-source counters (stages/remote/remote_stats.hpp), taken from the scope
  // build() runs in: an epoch's fetch counts where build()'s did.
  std::shared_ptr<remote::SourceCounters> counters_;
  std::vector<std::uint8_t> needed_;  // scratch: per shard, whether the items name it
};

}  // namespace sluice::stages
