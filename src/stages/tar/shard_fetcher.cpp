// Remote shards streamed when an epoch reads them (shard_fetcher.hpp).
#include "stages/tar/shard_fetcher.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>

#include "sluice/core/error.hpp"
#include "sluice/detail/core/log.hpp"
#include "sluice/detail/memory/huge_mapping.hpp"
#include "stages/remote/http_transport.hpp"
#include "stages/remote/remote_shards.hpp"
#include "stages/remote/remote_stats.hpp"

namespace sluice::stages {

namespace {

// How long a read waits for its member's bytes: every attempt of the transfer may take the
// no-byte timeout and the longest backoff (http_transport.hpp), and the shards before it in the
// stream may take as long (eight in flight).
double wait_limit_s(const RemoteOptions& o) { return (o.timeout_s + 20.0) * (o.retries + 1) * 2.0; }

}  // namespace

OnDemandShards::OnDemandShards(RemoteOptions options, std::vector<Shard> shards)
    : options_(std::move(options)), shards_(std::move(shards)), needed_(shards_.size(), 0),
      in_memory_(options_.cache_limit == 0) {
  if (const remote::RemoteScope* scope = remote::RemoteScope::current()) counters_ = scope->counters();
  // Before the item table is shared with any worker: fixed for the loader's life.
  for (Shard& s : shards_) {
    if (in_memory_) {
      s.failure->memory = std::make_unique<FetchFailure::Memory>();
      s.failure->memory->size = s.size;
    } else {
      s.failure->partial = remote::remote_partial_path(s.url, options_);
    }
    s.failure->wait_limit_s = wait_limit_s(options_);
    s.failure->interrupts = &interrupts_;
  }
}

OnDemandShards::~OnDemandShards() { stop(); }

void OnDemandShards::stop() {
  stopping_.store(true, std::memory_order_release);
  interrupt();
  if (stream_.joinable()) stream_.join();
  stopping_.store(false, std::memory_order_release);
  // The stream is over: the reads waiting on it failed, those of the epoch gone read nothing more.
  for (Shard& s : shards_) {
    if (s.failure->memory) s.failure->memory->release();
  }
}

std::int64_t OnDemandShards::shard_of(std::int64_t item) const {
  const auto after = std::upper_bound(shards_.begin(), shards_.end(), item,
                                      [](std::int64_t i, const Shard& s) { return i < s.first; });
  if (after == shards_.begin()) return -1;
  const auto at = after - 1;
  return item < at->end ? at - shards_.begin() : -1;
}

// Waits for the stream in flight; `stop` (Loader::cancel, Ctrl-C) ends it instead.
void OnDemandShards::finish_stream(const std::function<bool()>& stop) {
  if (!stream_.joinable()) return;
  while (stop) {
    bool running = false;
    for (const Shard& s : shards_) running = running || s.failure->arriving.load(std::memory_order_acquire);
    if (!running) break;
    if (stop()) {
      this->stop();
      throw Error(ErrorCode::kCancelled, "stopped while fetching from the network");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stream_.join();
}

void OnDemandShards::fetch(std::span<const std::int64_t> items, const std::function<bool()>& stop) {
  std::fill(needed_.begin(), needed_.end(), std::uint8_t{0});
  std::vector<std::size_t> order;  // shards in the order the items first name them
  std::int64_t last = -1;  // consecutive items mostly share a shard: skip the search for them
  for (const std::int64_t item : items) {
    if (last >= 0 && item >= shards_[static_cast<std::size_t>(last)].first && item < shards_[static_cast<std::size_t>(last)].end) continue;
    last = shard_of(item);
    if (last < 0 || needed_[static_cast<std::size_t>(last)] != 0) continue;
    needed_[static_cast<std::size_t>(last)] = 1;
    order.push_back(static_cast<std::size_t>(last));
  }
  if (in_memory_) {
    fetch_into_memory(order, items);
    return;
  }
  // A stream in flight that brings every needed shard not already here (build()'s size probe
  // started epoch 0's) is left to run; else it is waited for and a new one started. A shard's
  // `validated` is read only once it is not arriving: its stream wrote it before saying so.
  if (stream_.joinable()) {
    bool covered = true;
    for (const std::size_t i : order) {
      const Shard& s = shards_[i];
      if (s.failure->arriving.load(std::memory_order_acquire) || s.failure->failed.load(std::memory_order_acquire)) continue;
      struct stat st {};
      if (!(s.validated && ::stat(s.copy.c_str(), &st) == 0 && static_cast<std::uint64_t>(st.st_size) == s.size)) {
        covered = false;
        break;
      }
    }
    if (covered) return;
    finish_stream(stop);
  }
  std::vector<std::string> urls;
  std::vector<std::size_t> which;
  std::vector<std::string> keep;
  for (const std::size_t i : order) {
    Shard& s = shards_[i];
    if (s.failure->failed.load(std::memory_order_relaxed)) continue;
    keep.push_back(s.url);
    struct stat st {};
    // A copy this loader fetched or revalidated stays current unless it was evicted since.
    if (s.validated && ::stat(s.copy.c_str(), &st) == 0 && static_cast<std::uint64_t>(st.st_size) == s.size) continue;
    urls.push_back(s.url);
    which.push_back(i);
  }
  if (urls.empty()) return;
  for (const std::size_t i : which) {
    shards_[i].failure->arrived.store(0, std::memory_order_relaxed);
    shards_[i].failure->arriving.store(true, std::memory_order_release);
  }
  stream_ = std::thread(&OnDemandShards::run, this, std::move(which), std::move(urls), std::move(keep));
}

void OnDemandShards::run(std::vector<std::size_t> which, std::vector<std::string> urls, std::vector<std::string> keep) {
  const remote::RemoteScope scope(counters_, {});
  std::vector<remote::StreamTarget> targets;
  targets.reserve(which.size());
  for (const std::size_t i : which) targets.push_back({shards_[i].failure->partial, &shards_[i].failure->arrived});
  std::vector<remote::RemoteShard> got;
  std::string everything_failed;
  try {
    got = remote::fetch_remote_shards(urls, options_, keep, [this] { return stopping_.load(std::memory_order_acquire); },
                                      targets);
  } catch (const std::exception& e) {
    everything_failed = e.what();  // stopped, a 403/404, the cache over its limit
  }
  for (std::size_t k = 0; k < which.size(); ++k) {
    Shard& s = shards_[which[k]];
    std::string cause = everything_failed.empty() ? got[k].error : everything_failed;
    struct stat st {};
    if (cause.empty() && (::stat(got[k].local_path.c_str(), &st) != 0 || static_cast<std::uint64_t>(st.st_size) != s.size)) {
      cause = s.url + ": the object is not the size its index file says (it changed since it was indexed): "
                      "index it again beside the shard, or build the pipeline again";
    }
    // Stopped (the loader goes, or a cancelled epoch's start): not the shard's fault. Its reads
    // still waiting find no copy and fail; a later epoch fetches it again.
    const bool stopped = !everything_failed.empty() && stopping_.load(std::memory_order_acquire);
    if (cause.empty()) {
      s.validated = true;
    } else if (!stopped && !s.failure->failed.load(std::memory_order_relaxed)) {
      s.failure->cause = std::move(cause);
      s.failure->failed.store(true, std::memory_order_release);
    }
    s.failure->arriving.store(false, std::memory_order_release);
  }
}

std::uint64_t OnDemandShards::reserve_window(std::int64_t positions) {
  if (!in_memory_ || shards_.empty()) return 0;
  // `positions` consecutive reads straddle at most positions / fewest + 2 shards (a part at each
  // end); a transfer waits for memory only behind those, so the reads never wait on each other.
  std::int64_t fewest = std::numeric_limits<std::int64_t>::max();
  std::vector<std::uint64_t> sizes;
  for (const Shard& s : shards_) {
    fewest = std::min(fewest, std::max<std::int64_t>(1, s.end - s.first));
    sizes.push_back(s.size);
  }
  const std::int64_t wanted = std::max<std::int64_t>(0, positions) / fewest + 2 + kReadAheadShards;
  const std::size_t count = static_cast<std::size_t>(std::min<std::int64_t>(wanted, static_cast<std::int64_t>(sizes.size())));
  std::partial_sort(sizes.begin(), sizes.begin() + static_cast<std::ptrdiff_t>(count), sizes.end(), std::greater<>());
  memory_window_ = 0;
  for (std::size_t i = 0; i < count; ++i) memory_window_ += sizes[i];
  return memory_window_;
}

std::shared_ptr<std::uint8_t[]> OnDemandShards::allocate(std::uint64_t size) {
  std::uint8_t* bytes = map_huge_aligned(size);  // before it is counted: it may throw
  const std::uint64_t held = memory_held_.fetch_add(size, std::memory_order_acq_rel) + size;
  std::uint64_t peak = memory_peak_.load(std::memory_order_relaxed);
  while (held > peak && !memory_peak_.compare_exchange_weak(peak, held, std::memory_order_acq_rel)) {
  }
  // Freed when both the shard's reads and its transfer have let go of it.
  return std::shared_ptr<std::uint8_t[]>(bytes, [this, size](std::uint8_t* p) {
    unmap_huge_aligned(p, size);
    memory_held_.fetch_sub(size, std::memory_order_acq_rel);
  });
}

void OnDemandShards::fetch_into_memory(const std::vector<std::size_t>& order, std::span<const std::int64_t> items) {
  std::vector<std::int64_t> reads(shards_.size(), 0);  // per shard, the items that name it
  std::int64_t last = -1;
  for (const std::int64_t item : items) {
    if (last < 0 || item < shards_[static_cast<std::size_t>(last)].first || item >= shards_[static_cast<std::size_t>(last)].end) {
      last = shard_of(item);
    }
    if (last >= 0) ++reads[static_cast<std::size_t>(last)];
  }
  std::vector<std::size_t> live;
  for (const std::size_t i : order) {
    if (!shards_[i].failure->failed.load(std::memory_order_acquire)) live.push_back(i);
  }
  // The stream build()'s size probe started for epoch 0 brings the same shards in the same order:
  // it goes on, each shard now expecting the epoch's reads (the probe's read counted too), unless
  // one of them was let go of already.
  if (stream_.joinable() && live == streaming_) {
    bool intact = true;
    for (const std::size_t i : live) intact = intact && shards_[i].failure->memory->unread.load(std::memory_order_acquire) > 0;
    if (intact) {
      for (const std::size_t i : live) shards_[i].failure->memory->unread.store(reads[i], std::memory_order_release);
      return;
    }
  }
  stop();
  streaming_ = live;
  if (live.empty()) return;
  std::vector<std::string> urls;
  for (const std::size_t i : live) {
    FetchFailure& f = *shards_[i].failure;
    f.memory->unread.store(reads[i], std::memory_order_relaxed);
    f.memory->wanted.store(false, std::memory_order_relaxed);
    f.arrived.store(0, std::memory_order_relaxed);
    f.arriving.store(true, std::memory_order_release);
    urls.push_back(shards_[i].url);
  }
  stream_ = std::thread(&OnDemandShards::run_in_memory, this, live, std::move(urls));
}

void OnDemandShards::run_in_memory(std::vector<std::size_t> which, std::vector<std::string> urls) {
  const remote::RemoteScope scope(counters_, {});
  std::vector<remote::MemoryTarget> targets(which.size());
  std::vector<remote::MemoryTarget*> memory;
  std::vector<std::atomic<std::uint64_t>*> arrived;
  // The stream's own hold on each buffer while its transfer may write into it: the epoch's last
  // read may come before the shard's end blocks have.
  std::vector<std::shared_ptr<std::uint8_t[]>> writing(which.size());
  for (std::size_t k = 0; k < which.size(); ++k) {
    targets[k].size = shards_[which[k]].size;
    memory.push_back(&targets[k]);
    arrived.push_back(&shards_[which[k]].failure->arrived);
  }
  const auto may_start = [&](std::size_t k) {
    FetchFailure::Memory& m = *shards_[which[k]].failure->memory;
    const std::uint64_t held = memory_held_.load(std::memory_order_acquire);
    if (held > 0 && held + targets[k].size > memory_window_) {
      if (!m.wanted.load(std::memory_order_acquire)) return false;
      // A read waits for it: the window was too small for the reads in flight.
      if (log_enabled(LogLevel::kInfo)) log(LogLevel::kInfo, shards_[which[k]].url + ": streamed past the memory window, a read waits for it");
    }
    writing[k] = allocate(targets[k].size);
    targets[k].data = writing[k].get();
    const std::lock_guard<std::mutex> lock(m.mutex);
    m.bytes = writing[k];
    return true;
  };
  const auto finished = [&](std::size_t k, const std::string& error) {
    FetchFailure& f = *shards_[which[k]].failure;
    if (!error.empty() && !f.failed.load(std::memory_order_relaxed)) {
      f.cause = error;
      f.failed.store(true, std::memory_order_release);
    }
    writing[k].reset();
    f.arriving.store(false, std::memory_order_release);
  };
  std::string everything_failed;
  try {
    remote::stream_remote_shards_to_memory(urls, options_, memory, arrived, may_start, finished,
                                           [this] { return stopping_.load(std::memory_order_acquire); });
  } catch (const std::exception& e) {
    everything_failed = e.what();
  }
  // Stopped (the loader goes, a new epoch): its reads still waiting fail; a later epoch fetches
  // the shards again. Any other failure of the whole stream is each unfinished shard's.
  const bool stopped = stopping_.load(std::memory_order_acquire);
  for (std::size_t k = 0; k < which.size(); ++k) {
    FetchFailure& f = *shards_[which[k]].failure;
    if (!f.arriving.load(std::memory_order_acquire)) continue;
    if (!stopped && !everything_failed.empty() && !f.failed.load(std::memory_order_relaxed)) {
      f.cause = everything_failed;
      f.failed.store(true, std::memory_order_release);
    }
    writing[k].reset();
    f.arriving.store(false, std::memory_order_release);
  }
}

}  // namespace sluice::stages
