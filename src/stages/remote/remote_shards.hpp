// Shards named by URL, made local for the tar source: an s3:// glob listed (ListObjectsV2), and
// every remote shard fetched into the shard cache (stages/remote/shard_cache.hpp) at once, up to
// eight transfers in flight, revalidated with If-None-Match when a copy is there. The tar source
// then indexes and reads the copies as it reads shards on disk, so batches, their order and
// resume are those of the same shards on disk.
//
// The seam for rank sharding: every rank fetches every shard it is handed here; a split by
// shards (each rank fetching only its own) belongs before this call, once the split is by shards.
#pragma once

#include <string>
#include <vector>

#include "sluice/pipeline/options.hpp"

namespace sluice::stages::remote {

// The keys under an s3:// pattern whose key holds *, ? or [...] (matched per path component,
// as a shell glob), as s3:// URLs sorted byte-wise. Throws naming the pattern when none match.
std::vector<std::string> list_s3_glob(const std::string& pattern, const RemoteOptions& options);

struct RemoteShard {
  std::string url;
  std::string local_path;  // the copy; empty when the shard could not be fetched
  std::string error;       // why not (the URL, the status or curl's error)
};

// Fetches `urls` into the cache. A 403/404 or a failure to use the cache folder throws; a shard
// still failing after its retries comes back with its error (its samples become bad samples).
// Throws kOutOfBudget when the shards need more than cache_limit.
std::vector<RemoteShard> fetch_remote_shards(const std::vector<std::string>& urls, const RemoteOptions& options);

// An object's bytes (a list file named by URL), at most max_bytes.
std::string fetch_remote_text(const std::string& url, const RemoteOptions& options, std::uint64_t max_bytes);

}  // namespace sluice::stages::remote
