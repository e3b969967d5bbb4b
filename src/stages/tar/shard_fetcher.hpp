// Remote shards whose index file the server has ("<url>.sluice-idx", what sluice writes beside a
// shard it indexes): build() learns every shard's samples from it without fetching the shard,
// and the shards stream in when an epoch reads them (docs/remote.md). Each epoch's start (and
// build()'s size probe) hands this the rank's items (a rank of several that splits by shards
// reads about 1 / world of the shards, so it fetches those and not the whole set); the shards
// they live in that are not yet current in the shard cache are fetched in the order the epoch
// first reads them, up to eight transfers in flight, on a thread of this fetcher's own, and the
// epoch starts at once: a read waits until its member's bytes have arrived (FetchFailure in
// stages/source/item_table.hpp), so samples are served as their bytes arrive, not when the
// whole shard or the whole set has. A cached copy is revalidated with If-None-Match the first
// time this loader uses it. Copies the epoch needs are never evicted; others may be, least
// recently used first, when the cache is over its limit.
//
// Under cache_limit 0 nothing is written to disk: each shard streams into a buffer of its own
// (FetchFailure::Memory), allocated when its transfer starts and only while the shards in memory
// fit the window reserve_window() sized (from the memory budget, use `remote`), and let go of by
// the epoch's last read of it. A transfer waits for memory, never a read for another read: the
// window holds every shard whose reads straddle a point of the epoch's order, plus read-ahead.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
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

  ~OnDemandShards() override;
  OnDemandShards(const OnDemandShards&) = delete;
  OnDemandShards& operator=(const OnDemandShards&) = delete;

  // Starts streaming the shards of `items` that are not current, in the order the items first
  // name them, and returns. A stream still running from the last call is waited for first
  // (`stop` ends that wait, and the stream, with Error(kCancelled)).
  void fetch(std::span<const std::int64_t> items, const std::function<bool()>& stop) override;
  // Ends the stream in flight (its shards' waiting reads fail) and waits for its thread.
  void stop() override;
  void interrupt() override { interrupts_.fetch_add(1, std::memory_order_acq_rel); }
  std::uint64_t reserve_window(std::int64_t positions) override;
  void settle(const std::function<bool()>& stop) override { finish_stream(stop); }

  // Under cache_limit 0: the most bytes of shard buffers alive at once so far (allocated and not
  // yet freed), and the window they must stay inside.
  std::uint64_t memory_peak() const { return memory_peak_.load(std::memory_order_acquire); }
  std::uint64_t memory_window() const { return memory_window_; }
  std::uint64_t memory_held() const { return memory_held_.load(std::memory_order_acquire); }

  // Shards streamed ahead of the reads beyond those a window of reads straddles.
  static constexpr std::int64_t kReadAheadShards = 4;

 private:
  // The stream's thread: fetches shards_[which[k]] (URLs `urls`), then says for each how it went.
  void run(std::vector<std::size_t> which, std::vector<std::string> urls, std::vector<std::string> keep);
  void finish_stream(const std::function<bool()>& stop);
  // cache_limit 0: fetch() and the stream's thread, through memory.
  void fetch_into_memory(const std::vector<std::size_t>& order, std::span<const std::int64_t> items);
  void run_in_memory(std::vector<std::size_t> which, std::vector<std::string> urls);
  std::shared_ptr<std::uint8_t[]> allocate(std::uint64_t size);
  // The shard whose items hold `item`, or -1 (an item of a local shard or one fetched in build()).
  std::int64_t shard_of(std::int64_t item) const;

  RemoteOptions options_;
  std::vector<Shard> shards_;
  // The loader's per-source counters (stages/remote/remote_stats.hpp), taken from the scope
  // build() runs in: an epoch's fetch counts where build()'s did.
  std::shared_ptr<remote::SourceCounters> counters_;
  std::vector<std::uint8_t> needed_;  // scratch: per shard, whether the items name it
  std::thread stream_;                 // the fetch in flight, if any
  std::atomic<bool> stopping_{false};  // asked by the stream's transfers
  std::atomic<std::uint64_t> interrupts_{0};  // FetchFailure::interrupts
  // cache_limit 0
  bool in_memory_ = false;
  std::uint64_t memory_window_ = 0;               // reserve_window's
  std::vector<std::size_t> streaming_;             // the shards of the stream in flight, in order
  std::atomic<std::uint64_t> memory_held_{0};      // shard buffers alive
  std::atomic<std::uint64_t> memory_peak_{0};
};

}  // namespace sluice::stages
