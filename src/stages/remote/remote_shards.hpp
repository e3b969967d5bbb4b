// Shards named by URL, made local for the tar source: an s3:// glob listed (ListObjectsV2), and
// every remote shard fetched into the shard cache (stages/remote/shard_cache.hpp) at once, up to
// eight transfers in flight, revalidated with If-None-Match when a copy is there. The tar source
// then indexes and reads the copies as it reads shards on disk, so batches, their order and
// resume are those of the same shards on disk.
//
// A rank of several that splits by shards reads only some shards: it learns every shard's
// samples from the index file beside it on the server (fetch_remote_indexes) and fetches a shard
// only when an epoch reads it (stages/tar/shard_fetcher.hpp calls fetch_remote_shards then).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
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
// Copies of `urls` and of `keep_urls` are never evicted; throws kOutOfBudget when they need more
// than cache_limit.
// `stop` (may be empty): asked while the transfers run; true ends them and throws kCancelled.
// `stream` (empty, or one per URL): each body is written to its `path` (instead of a temporary
// of the cache's naming) and `arrived` follows it (http_transport.hpp's Download::arrived), so a
// reader may use a shard's first bytes before the whole set is fetched; each is still moved into
// the cache, as a copy, once the set is. Transfers start in the order of `urls`.
struct StreamTarget {
  std::string path;
  std::atomic<std::uint64_t>* arrived = nullptr;
};
std::vector<RemoteShard> fetch_remote_shards(const std::vector<std::string>& urls, const RemoteOptions& options,
                                             const std::vector<std::string>& keep_urls = {},
                                             const std::function<bool()>& stop = {},
                                             const std::vector<StreamTarget>& stream = {});

// cache_limit 0: `urls` streamed into memory, nothing written to disk. Body i goes to memory[i]
// (its size is the shard's, from its index file; may_start(i), asked before transfer i first
// starts, sets its data, or says false to hold it back until memory frees up) and arrived[i]
// follows it. finished(i, error) is called as soon as transfer i ends (error empty: all of it
// arrived). Throws kCancelled when `stop` ends the transfers (those not finished are not called).
struct MemoryTarget;
void stream_remote_shards_to_memory(const std::vector<std::string>& urls, const RemoteOptions& options,
                                    const std::vector<MemoryTarget*>& memory,
                                    const std::vector<std::atomic<std::uint64_t>*>& arrived,
                                    const std::function<bool(std::size_t)>& may_start,
                                    const std::function<void(std::size_t, const std::string&)>& finished,
                                    const std::function<bool()>& stop);

// Where a streamed shard's body may be written while it arrives: a temporary of the cache
// folder, unique to this process and call.
std::string remote_partial_path(const std::string& url, const RemoteOptions& options);

// Where the cache keeps the copy of each of `urls` (whether or not it is there yet).
std::vector<std::string> remote_copy_paths(const std::vector<std::string>& urls, const RemoteOptions& options);

// The index files sluice writes beside shards ("<url>.sluice-idx", stages/tar/tar_index.hpp),
// fetched into memory up to eight at a time: what a rank that reads some shards only needs to
// know of every one. An element is empty where the server has none (a 404, not counted as a
// failure) or it could not be fetched: that shard is then fetched whole.
//
// `early` (may be -1) names one of `urls` by its place: the shard an epoch reads first, fetched
// into the cache (or revalidated) with the index files, in the same round trips, so its first
// byte's latency passes while they arrive and not when the epoch starts; only a shard of at most
// kEarlyShardBytes (a larger one is refused at its headers and streams as the others do), and
// not under cache_limit 0. `early_current` says whether its copy is current in the cache.
inline constexpr std::uint64_t kEarlyShardBytes = std::uint64_t{32} << 20;
std::vector<std::vector<std::uint8_t>> fetch_remote_indexes(const std::vector<std::string>& urls,
                                                            const RemoteOptions& options, std::ptrdiff_t early = -1,
                                                            bool* early_current = nullptr);

// The in-flight download buffers of one loader's transfers (every transfer in flight holds
// libcurl's receive buffer): what it reserves from its memory budget as MemoryUse::kRemote.
std::uint64_t remote_buffer_bytes();

// An object's bytes (a list file named by URL), at most max_bytes.
std::string fetch_remote_text(const std::string& url, const RemoteOptions& options, std::uint64_t max_bytes);

}  // namespace sluice::stages::remote
