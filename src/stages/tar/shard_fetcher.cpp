// Remote shards fetched when an epoch reads them (shard_fetcher.hpp).
#include "stages/tar/shard_fetcher.hpp"

#include <sys/stat.h>

#include <algorithm>

#include "stages/remote/remote_shards.hpp"
#include "stages/remote/remote_stats.hpp"

namespace sluice::stages {

OnDemandShards::OnDemandShards(RemoteOptions options, std::vector<Shard> shards)
    : options_(std::move(options)), shards_(std::move(shards)), needed_(shards_.size(), 0) {
  if (const remote::RemoteScope* scope = remote::RemoteScope::current()) counters_ = scope->counters();
}

std::int64_t OnDemandShards::shard_of(std::int64_t item) const {
  const auto after = std::upper_bound(shards_.begin(), shards_.end(), item,
                                      [](std::int64_t i, const Shard& s) { return i < s.first; });
  if (after == shards_.begin()) return -1;
  const auto at = after - 1;
  return item < at->end ? at - shards_.begin() : -1;
}

void OnDemandShards::fetch(std::span<const std::int64_t> items, const std::function<bool()>& stop) {
  std::fill(needed_.begin(), needed_.end(), std::uint8_t{0});
  std::int64_t last = -1;  // consecutive items mostly share a shard: skip the search for them
  for (const std::int64_t item : items) {
    if (last >= 0 && item >= shards_[static_cast<std::size_t>(last)].first && item < shards_[static_cast<std::size_t>(last)].end) continue;
    last = shard_of(item);
    if (last >= 0) needed_[static_cast<std::size_t>(last)] = 1;
  }
  std::vector<std::string> urls;
  std::vector<std::size_t> which;
  std::vector<std::string> keep;
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    Shard& s = shards_[i];
    if (needed_[i] == 0 || s.failure->failed.load(std::memory_order_relaxed)) continue;
    keep.push_back(s.url);
    struct stat st {};
    // A copy this loader fetched or revalidated stays current unless it was evicted since.
    if (s.validated && ::stat(s.copy.c_str(), &st) == 0 && static_cast<std::uint64_t>(st.st_size) == s.size) continue;
    urls.push_back(s.url);
    which.push_back(i);
  }
  if (urls.empty()) return;
  const remote::RemoteScope scope(counters_, {});
  const std::vector<remote::RemoteShard> got = remote::fetch_remote_shards(urls, options_, keep, stop);
  for (std::size_t k = 0; k < got.size(); ++k) {
    Shard& s = shards_[which[k]];
    std::string cause = got[k].error;
    struct stat st {};
    if (cause.empty() && (::stat(got[k].local_path.c_str(), &st) != 0 || static_cast<std::uint64_t>(st.st_size) != s.size)) {
      cause = s.url + ": the object is not the size its index file says (it changed since it was indexed): "
                      "index it again beside the shard, or build the pipeline again";
    }
    if (cause.empty()) {
      s.validated = true;
      continue;
    }
    s.failure->cause = std::move(cause);
    s.failure->failed.store(true, std::memory_order_release);
  }
}

}  // namespace sluice::stages
