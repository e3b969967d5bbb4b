// The transport: objects fetched over HTTP(S) with libcurl's multi interface, several at once on
// one connection pool (HTTP/1.1 keep-alive, HTTP/2 where the server offers it; TLS verified;
// proxies from the usual environment variables, as libcurl reads them). s3:// requests are signed
// with SigV4 (CURLOPT_AWS_SIGV4, x-amz-content-sha256 sent) unless the config is anonymous.
//
// Faults are retried with exponential backoff and full jitter: a refused connection, a reset, no
// byte for `timeout_s` seconds, 429 and 5xx (Retry-After honoured, capped at max_backoff_s), a
// body shorter than its Content-Length, an ETag that changed between requests (the object is
// fetched again from its start); a cut transfer resumes with a Range request from the bytes it
// has. 400/401/403/404 fail at once. Every wait has a deadline: the connect and no-progress
// timeouts bound each attempt, `retries` bounds the attempts. libcurl stays in the .cpp.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "stages/remote/aws_credentials.hpp"

namespace sluice::stages::remote {

// libcurl's receive buffer of one transfer (CURLOPT_BUFFERSIZE): what a transfer in flight holds
// in memory; the body goes to its file as it arrives. A loader reserves connections x this from
// its memory budget as MemoryUse::kRemote (remote_shards.hpp's remote_buffer_bytes).
inline constexpr std::uint64_t kTransferBufferBytes = std::uint64_t{256} << 10;
// A transfer into a file gathers the pieces libcurl hands over (16 KiB each) into one write per
// receive, in a buffer of this size held while it runs: also counted per connection.
inline constexpr std::uint64_t kWriteGatherBytes = kTransferBufferBytes;

struct Downloaded;

struct TransferLimits {
  int connections = 8;          // transfers in flight at once (at most, with tune_depth)
  // Streaming read-ahead: start 2 transfers and keep in flight just enough to cover the measured
  // latency and bandwidth (1 + bandwidth x latency / the mean object size, up to `connections`),
  // so that a shared pipe gives the objects first in line their bytes first. A revalidation
  // (cached_etag) not counted until a body byte of it arrives: a 304 brings none to wait behind.
  bool tune_depth = false;
  int retries = 6;              // attempts after the first
  double timeout_s = 30;        // no byte for this long (or no connection): the attempt failed
  double backoff_s = 0.2;       // first retry's delay before jitter; doubles per attempt
  double max_backoff_s = 20;    // a delay (Retry-After included) never exceeds this
  // Asked every 50 ms or so while transfers run or wait out a retry's delay: true ends them all
  // and throws kCancelled (Loader::cancel, a signal seen by the loader's wait check).
  std::function<bool()> stop;
  // Asked (may be empty) before download i first starts, in order: false holds it, and those
  // after it, back until it is asked again (a streamed shard waiting for memory to hold it).
  std::function<bool(std::size_t)> may_start;
  // Asked (may be empty) before may_start: true drops download i, never requested (its result
  // stays not ok, with no error and nothing counted).
  std::function<bool(std::size_t)> skip;
  // Called (may be empty) as soon as download i is done or given up, with its result, on the
  // thread running the transfers: a streamed shard's end is known when it arrives, not when the
  // whole set has.
  std::function<void(std::size_t, const Downloaded&)> finished;
};

// A body kept in memory instead of a file: `data` holds `size` bytes (a longer body is cut as
// too large). TransferLimits::may_start may set it, up to the transfer's first start.
struct MemoryTarget {
  std::uint8_t* data = nullptr;
  std::uint64_t size = 0;
};

struct Download {
  std::string name;             // the URL as the user wrote it: messages name it
  std::string http_url;         // what is requested (an s3:// URL's endpoint form)
  bool sign = false;            // SigV4 with the config's credentials
  std::string path;             // the file the body is written to (created or truncated)
  std::string cached_etag;      // non-empty: If-None-Match; a 304 leaves `path` untouched
  bool may_be_absent = false;   // a 404 is an answer (an optional object), not a failure in stats
  // Non-zero: fetched ahead of its need (a shard before its stream), only while it is small and
  // answers: a body larger than this is refused (at its headers when they give its length), and
  // it has one attempt; a fault ends it not ok, as an answer, not a failure or a retry in stats
  // (its stream fetches it later, as any other).
  std::uint64_t ahead_max_bytes = 0;
  // Streaming (may be null): the body bytes written to `path` so far, stored (release) after each
  // write, reset to 0 when the transfer starts over; ~0 once a 304 said the cached copy is current.
  std::atomic<std::uint64_t>* arrived = nullptr;
  // Instead of `path` (may be null): the body goes to this memory (a streamed shard under
  // cache_limit 0) ...
  MemoryTarget* memory = nullptr;
  // ... or to this string, at most max_text_bytes (an index file under cache_limit 0).
  std::string* text = nullptr;
  std::uint64_t max_text_bytes = 0;
};

struct Downloaded {
  bool ok = false;
  bool not_modified = false;    // 304: the cached copy is current
  std::string etag;
  std::uint64_t bytes = 0;      // the object's size (written to path)
  std::string error;            // when !ok: the URL, the status or curl's error, what to check
  bool fatal = false;           // when !ok: not worth retrying (403, 404, a bad URL)
};

// TransferLimits::tune_depth's rule: the transfers to keep in flight so that the bytes arriving
// while a new request waits for its first byte (bandwidth x latency) cover the objects after it:
// 1 + ceil(bandwidth x latency / object size), at least 2 (or `most`, if less), at most `most`;
// 2 while a measurement is missing (zero or negative).
int read_ahead_depth(double latency_s, double bandwidth, double object_bytes, int most);

// The write calls the transfers have made into files so far, process-wide: libcurl hands a body
// over in pieces of at most 16 KiB, which are gathered into one write per receive (up to
// kWriteGatherBytes), 6,584 writes against 432 for 107 MB (docs/remote.md).
std::uint64_t file_writes();

// A stop for every transfer of the process (null: none), asked as TransferLimits::stop is: the
// command line's signal guard sets it, so Ctrl-C ends build()'s fetch too, before any loader
// exists to cancel.
void set_process_stop(bool (*check)());

// Fetches every download, `limits.connections` at a time; never throws for a failed object (its
// result says why), only for a file it cannot create. A download with `memory` or `text` opens
// no file.
std::vector<Downloaded> download_all(const std::vector<Download>& downloads, const AwsConfig& aws,
                                     const TransferLimits& limits);

// One object's body into memory (a list file, a ListObjectsV2 page), at most max_bytes. Throws
// sluice::Error naming `name` when it fails after the retries, or at once on 403/404.
std::string fetch_text(const std::string& name, const std::string& http_url, bool sign, const AwsConfig& aws,
                       const TransferLimits& limits, std::uint64_t max_bytes);

}  // namespace sluice::stages::remote
