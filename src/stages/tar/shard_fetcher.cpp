// Remote shards streamed when an epoch reads them (shard_fetcher.hpp).
#include "stages/tar/shard_fetcher.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <exception>

#include "sluice/core/error.hpp"
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
    : options_(std::move(options)), shards_(std::move(shards)), needed_(shards_.size(), 0) {
  if (const remote::RemoteScope* scope = remote::RemoteScope::current()) counters_ = scope->counters();
  // Before the item table is shared with any worker: fixed for the loader's life.
  for (Shard& s : shards_) {
    s.failure->partial = remote::remote_partial_path(s.url, options_);
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

}  // namespace sluice::stages
