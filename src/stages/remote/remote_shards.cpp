// Remote shards into the local cache: listing, fetching, revalidation, the cache limit.
#include "stages/remote/remote_shards.hpp"

#include <fnmatch.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <numeric>
#include <optional>
#include <set>

#include "sluice/core/error.hpp"
#include "sluice/detail/core/binary_io.hpp"
#include "sluice/detail/core/log.hpp"
#include "stages/remote/aws_credentials.hpp"
#include "stages/remote/http_transport.hpp"
#include "stages/remote/remote_stats.hpp"
#include "stages/remote/remote_url.hpp"
#include "stages/remote/s3_listing.hpp"
#include "stages/remote/shard_cache.hpp"

namespace sluice::stages::remote {

namespace {

constexpr std::uint64_t kMaxListingPage = 64ULL << 20;
constexpr std::size_t kMaxListedKeys = 1'000'000;
constexpr const char* kIndexSuffix = ".sluice-idx";  // stages/tar/tar_source.cpp's shard_index_path
constexpr std::uint64_t kMaxIndexBytes = std::uint64_t{4} << 30;

TransferLimits limits_of(const RemoteOptions& o) {
  TransferLimits l;
  l.timeout_s = o.timeout_s;
  l.retries = o.retries;
  return l;
}

// An http(s) URL stays as it is; an s3:// one becomes its endpoint's URL, signed.
Download request_for(const std::string& url, const AwsConfig& aws) {
  Download d;
  d.name = url;
  if (is_s3_url(url)) {
    d.http_url = s3_http_url(parse_s3_url(url), aws.endpoint, aws.region);
    d.sign = true;
  } else {
    d.http_url = url;
  }
  return d;
}

std::string size_text(std::uint64_t bytes) {
  char out[32];
  std::snprintf(out, sizeof out, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return out;
}

// fetch_remote_indexes' early shard: committed into the cache (or found current) and counted as
// a cache hit or miss once, as the stream counts the shards it fetches; else its temporary goes.
void keep_early_shard(ShardCache& cache, const Download& d, const Downloaded& r, bool* current) {
  if (!r.ok) {
    ::unlink(d.path.c_str());
    return;
  }
  remote_stats().add_cache(r.not_modified);
  if (const RemoteScope* scope = RemoteScope::current(); scope != nullptr && scope->counters()) {
    scope->counters()->add_cache(d.name, r.not_modified);
  }
  if (r.not_modified) {
    ::unlink(d.path.c_str());
  } else {
    cache.commit(d.name, d.path, r.etag, r.bytes);
  }
  cache.touch(d.name);
  if (current != nullptr) *current = true;
}

}  // namespace

std::vector<std::string> list_s3_glob(const std::string& pattern, const RemoteOptions& options) {
  const AwsConfig aws = load_aws_config(options.anonymous);
  const S3Location where = parse_s3_url(pattern);
  const std::string prefix = where.key.substr(0, where.key.find_first_of("*?["));
  const std::string bucket_url = s3_http_url({where.bucket, ""}, aws.endpoint, aws.region);
  std::vector<std::string> out;
  std::string token;
  do {
    // Parameters in SigV4's canonical (sorted) order, so the signed query is the one sent.
    std::string query = "?";
    if (!token.empty()) query += "continuation-token=" + uri_encode(token, false) + "&";
    query += "list-type=2&prefix=" + uri_encode(prefix, false);
    const std::string xml = fetch_text(pattern, bucket_url + query, true, aws, limits_of(options), kMaxListingPage);
    ListPage page = parse_list_objects_v2(xml);
    for (const std::string& key : page.keys) {
      if (::fnmatch(where.key.c_str(), key.c_str(), FNM_PATHNAME) != 0) continue;
      if (out.size() >= kMaxListedKeys) throw Error(ErrorCode::kInvalidArgument, "the listing names over a million shards", pattern);
      out.push_back("s3://" + where.bucket + "/" + key);
    }
    token = page.truncated ? page.next_token : std::string();
  } while (!token.empty());
  if (out.empty()) throw Error(ErrorCode::kInvalidArgument, "no object matches this pattern (listed with ListObjectsV2)", pattern);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<RemoteShard> fetch_remote_shards(const std::vector<std::string>& urls, const RemoteOptions& options,
                                             const std::vector<std::string>& keep_urls,
                                             const std::function<bool()>& stop,
                                             const std::vector<StreamTarget>& stream) {
  if (options.cache_limit == 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "remote cache_limit 0 streams shards through memory, which needs the index file sluice writes beside "
                "each shard (<shard>.sluice-idx: run `sluice inspect --shards` on the local set and upload the index "
                "files), and a split by shards; without them sluice fetches shards whole into the cache folder: give "
                "a cache_limit that holds them",
                urls.empty() ? std::string() : urls.front());
  }
  const bool any_s3 = std::any_of(urls.begin(), urls.end(), [](const std::string& u) { return is_s3_url(u); });
  const AwsConfig aws = any_s3 ? load_aws_config(options.anonymous) : AwsConfig{.anonymous = true};
  ShardCache cache(options.cache_dir, options.cache_limit);
  cache.lock();
  std::vector<Download> downloads;
  downloads.reserve(urls.size());
  for (std::size_t i = 0; i < urls.size(); ++i) {
    Download d = request_for(urls[i], aws);
    d.path = stream.empty() ? cache.temp_path_of(urls[i]) : stream[i].path;
    if (!stream.empty()) d.arrived = stream[i].arrived;
    d.cached_etag = cache.cached_etag(urls[i]);
    downloads.push_back(std::move(d));
  }
  TransferLimits limits = limits_of(options);
  limits.stop = stop;
  limits.tune_depth = !stream.empty();  // streamed in read order: the first in line first
  std::vector<Downloaded> got;
  try {
    got = download_all(downloads, aws, limits);
  } catch (...) {
    for (const Download& d : downloads) ::unlink(d.path.c_str());
    throw;
  }
  std::vector<RemoteShard> out(urls.size());
  std::set<std::string> keep;
  std::string fatal;
  for (std::size_t i = 0; i < urls.size(); ++i) {
    out[i].url = urls[i];
    const Downloaded& r = got[i];
    if (!r.ok || r.not_modified) ::unlink(downloads[i].path.c_str());
    if (!r.ok) {
      out[i].error = r.error;
      if (r.fatal && fatal.empty()) fatal = r.error;
      continue;
    }
    remote_stats().add_cache(r.not_modified);
    if (const RemoteScope* scope = RemoteScope::current(); scope != nullptr && scope->counters()) {
      scope->counters()->add_cache(urls[i], r.not_modified);
    }
    if (!r.not_modified) cache.commit(urls[i], downloads[i].path, r.etag, r.bytes);
    cache.touch(urls[i]);
    out[i].local_path = cache.path_of(urls[i]);
    keep.insert(out[i].local_path);
  }
  if (!fatal.empty()) throw Error(ErrorCode::kNotFound, fatal);
  for (const std::string& url : keep_urls) keep.insert(cache.path_of(url));
  cache.evict(keep);
  const std::uint64_t used = cache.used();
  if (used > cache.limit()) {
    throw Error(ErrorCode::kOutOfBudget,
                "the remote shards' copies take " + size_text(used) + ", over the remote cache_limit of " +
                    size_text(cache.limit()) + ": raise cache_limit (sluice keeps every shard of the data set)",
                cache.dir());
  }
  if (log_enabled(LogLevel::kInfo)) log(LogLevel::kInfo, "remote shards: " + describe(remote_stats().snapshot()));
  return out;
}

void stream_remote_shards_to_memory(const std::vector<std::string>& urls, const RemoteOptions& options,
                                    const std::vector<MemoryTarget*>& memory,
                                    const std::vector<std::atomic<std::uint64_t>*>& arrived,
                                    const std::function<bool(std::size_t)>& may_start,
                                    const std::function<void(std::size_t, const std::string&)>& finished,
                                    const std::function<bool()>& stop) {
  const bool any_s3 = std::any_of(urls.begin(), urls.end(), [](const std::string& u) { return is_s3_url(u); });
  const AwsConfig aws = any_s3 ? load_aws_config(options.anonymous) : AwsConfig{.anonymous = true};
  std::vector<Download> downloads;
  downloads.reserve(urls.size());
  for (std::size_t i = 0; i < urls.size(); ++i) {
    Download d = request_for(urls[i], aws);
    d.memory = memory[i];
    d.arrived = arrived[i];
    downloads.push_back(std::move(d));
  }
  const RemoteScope* scope = RemoteScope::current();
  const std::shared_ptr<SourceCounters> counters = scope != nullptr ? scope->counters() : nullptr;
  TransferLimits limits = limits_of(options);
  limits.stop = stop;
  limits.tune_depth = true;
  limits.may_start = may_start;
  limits.finished = [&](std::size_t i, const Downloaded& r) {
    std::string error = r.error;
    if (r.ok && r.bytes != memory[i]->size) {
      error = urls[i] + ": the object is not the size its index file says (it changed since it was indexed): "
                        "index it again beside the shard, or build the pipeline again";
    }
    if (r.ok) {
      remote_stats().add_cache(false);
      if (counters) counters->add_cache(urls[i], false);
    }
    finished(i, error);
  };
  (void)download_all(downloads, aws, limits);
}

std::string remote_partial_path(const std::string& url, const RemoteOptions& options) {
  return ShardCache(options.cache_dir, options.cache_limit).temp_path_of(url);
}

std::uint64_t remote_buffer_bytes() {
  return static_cast<std::uint64_t>(TransferLimits{}.connections) * (kTransferBufferBytes + kWriteGatherBytes);
}

std::vector<std::string> remote_copy_paths(const std::vector<std::string>& urls, const RemoteOptions& options) {
  const ShardCache cache(options.cache_dir, options.cache_limit);
  std::vector<std::string> out;
  out.reserve(urls.size());
  for (const std::string& url : urls) out.push_back(cache.path_of(url));
  return out;
}

std::vector<std::vector<std::uint8_t>> fetch_remote_indexes(const std::vector<std::string>& urls,
                                                            const RemoteOptions& options, std::ptrdiff_t early,
                                                            bool* early_current) {
  const bool any_s3 = std::any_of(urls.begin(), urls.end(), [](const std::string& u) { return is_s3_url(u); });
  const AwsConfig aws = any_s3 ? load_aws_config(options.anonymous) : AwsConfig{.anonymous = true};
  // Kept in the cache folder as copies of their own URLs, revalidated with If-None-Match (a
  // replaced shard's new index file has a new ETag, so it is never read stale); under
  // cache_limit 0 (no folder is used) fetched into memory each time.
  const bool in_memory = options.cache_limit == 0;
  std::optional<ShardCache> cache;
  if (!in_memory) {
    cache.emplace(options.cache_dir, options.cache_limit);
    cache->lock();
  }
  if (early_current != nullptr) *early_current = false;
  const bool with_early = !in_memory && early >= 0 && static_cast<std::size_t>(early) < urls.size();
  // Download j is the index file of urls[order[j]]: the early shard's first, so that its body
  // can start as soon as a connection is free once its index file has come.
  std::vector<std::size_t> order(urls.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (with_early) std::rotate(order.begin(), order.begin() + early, order.begin() + early + 1);
  std::vector<std::string> texts(in_memory ? urls.size() : 0);
  std::vector<Download> downloads;
  downloads.reserve(urls.size() + 1);
  for (const std::size_t i : order) {
    Download d = request_for(urls[i] + kIndexSuffix, aws);
    if (in_memory) {
      d.text = &texts[i];
      d.max_text_bytes = kMaxIndexBytes;
    } else {
      d.path = cache->temp_path_of(urls[i] + kIndexSuffix);
      d.cached_etag = cache->cached_etag(urls[i] + kIndexSuffix);
    }
    d.may_be_absent = true;
    downloads.push_back(std::move(d));
  }
  TransferLimits limits = limits_of(options);
  if (with_early) {
    // Last, and only once its index file has come (a shard without one is fetched whole after
    // this, with the others): the index files go out first where they outnumber the connections.
    Download d = request_for(urls[static_cast<std::size_t>(early)], aws);
    d.path = cache->temp_path_of(d.name);
    d.cached_etag = cache->cached_etag(d.name);
    d.ahead_max_bytes = kEarlyShardBytes;
    downloads.push_back(std::move(d));
    auto index = std::make_shared<std::atomic<int>>(0);  // 0: on its way, 1: here, 2: not
    limits.finished = [index](std::size_t j, const Downloaded& r) {
      if (j == 0) index->store(r.ok ? 1 : 2);
    };
    const std::size_t last = downloads.size() - 1;
    limits.skip = [index, last](std::size_t j) { return j == last && index->load() == 2; };
    limits.may_start = [index, last](std::size_t j) { return j != last || index->load() == 1; };
  }
  std::vector<Downloaded> got;
  try {
    got = download_all(downloads, aws, limits);
  } catch (...) {
    for (const Download& d : downloads) {
      if (!d.path.empty()) ::unlink(d.path.c_str());
    }
    throw;
  }
  if (with_early) keep_early_shard(*cache, downloads.back(), got.back(), early_current);
  std::vector<std::vector<std::uint8_t>> out(urls.size());
  for (std::size_t j = 0; j < urls.size(); ++j) {
    const std::size_t i = order[j];
    if (in_memory) {
      if (got[j].ok) out[i].assign(texts[i].begin(), texts[i].end());
      continue;
    }
    const std::string index_url = urls[i] + kIndexSuffix;
    if (got[j].ok && got[j].bytes <= kMaxIndexBytes) {
      try {
        if (!got[j].not_modified) cache->commit(index_url, downloads[j].path, got[j].etag, got[j].bytes);
        cache->touch(index_url);
        out[i] = core::read_regular_file(cache->path_of(index_url), kMaxIndexBytes, "shard index");
      } catch (const Error&) {
        out[i].clear();  // unreadable: the shard is fetched whole
      }
    }
    ::unlink(downloads[j].path.c_str());  // gone already when committed
  }
  return out;
}

std::string fetch_remote_text(const std::string& url, const RemoteOptions& options, std::uint64_t max_bytes) {
  const AwsConfig aws = is_s3_url(url) ? load_aws_config(options.anonymous) : AwsConfig{.anonymous = true};
  const Download d = request_for(url, aws);
  return fetch_text(url, d.http_url, d.sign, aws, limits_of(options), max_bytes);
}

}  // namespace sluice::stages::remote
