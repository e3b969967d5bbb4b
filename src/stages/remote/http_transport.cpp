// libcurl multi transfers with retries, Range resume and ETag checks (http_transport.hpp).
#include "stages/remote/http_transport.hpp"

#include <curl/curl.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <random>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/detail/core/log.hpp"
#include "stages/remote/http_errors.hpp"
#include "stages/remote/http_headers.hpp"
#include "stages/remote/remote_stats.hpp"
#include "stages/remote/remote_timeline.hpp"
#include "stages/remote/transfer_spares.hpp"

namespace sluice::stages::remote {

namespace {

std::atomic<bool (*)()> g_process_stop{nullptr};  // set_process_stop
std::atomic<std::uint64_t> g_file_writes{0};       // file_writes

using Clock = std::chrono::steady_clock;

// SHA-256 of the empty body: what a GET signs as its payload hash.
constexpr const char* kEmptySha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr std::size_t kErrorBodyBytes = 4096;

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Transfer {
  const Download* download = nullptr;
  Downloaded* result = nullptr;
  SourceCounters* counters = nullptr;  // the loader's (RemoteScope), or null
  std::string* text = nullptr;      // memory sink (fetch_text) instead of a file
  std::uint64_t max_bytes = 0;
  int fd = -1;
  CURL* easy = nullptr;
  curl_slist* headers_out = nullptr;
  ResponseHeaders headers;
  std::uint64_t have = 0;           // body bytes kept so far (the resume point)
  // A file sink's body bytes since the last write (flush_body): libcurl hands the body over in
  // 16 KiB pieces; each receive's pieces go to the file in one pwrite instead of 16. Taken from
  // `spares` at the first piece, given back when the attempt ends.
  std::unique_ptr<char[]> gather;
  std::size_t gathered = 0;
  TransferSpares* spares = nullptr;  // run_transfers'
  std::uint64_t requested_from = 0; // the Range start of the current attempt
  std::string first_etag;           // the object's ETag when the first bytes were kept
  std::string error_body;           // a non-2xx response's body (S3's <Error> document)
  bool etag_changed = false;
  bool first_chunk = true;
  bool too_large = false;
  bool write_failed = false;
  int attempts = 0;
  Clock::time_point not_before{};
  Clock::time_point last_progress{};  // the last header or body byte received
  Clock::time_point requested{};      // when the current attempt started
  double latency_s = -1;              // request to first body byte, once seen
  char curl_error[CURL_ERROR_SIZE] = {};
};

long status_of(CURL* easy) {
  long status = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
  return status;
}

std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  t->last_progress = Clock::now();
  t->headers.add_line(std::string_view(data, size * count), static_cast<std::int64_t>(std::time(nullptr)));
  return size * count;
}

// The body starts over (its ETag changed, or a Range request got the whole object): new reads
// wait for the new bytes, and the file is overwritten from its start rather than truncated, so a
// streamed read that saw its bytes as arrived a moment before still finds them (truncating here
// failed such a read as a short one). The file is cut to the new body's length when it is done.
void restart_from_zero(Transfer& t) {
  t.have = 0;
  t.gathered = 0;
  if (t.download != nullptr && t.download->arrived != nullptr) t.download->arrived->store(0, std::memory_order_release);
  t.first_etag.clear();
  if (t.text != nullptr) t.text->clear();
}

bool write_at(int fd, const char* data, std::size_t n, std::uint64_t at) {
  std::size_t done = 0;
  while (done < n) {
    g_file_writes.fetch_add(1, std::memory_order_relaxed);
    const ssize_t w = ::pwrite(fd, data + done, n - done, static_cast<off_t>(at + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    done += static_cast<std::size_t>(w);
  }
  return true;
}

// Writes a file sink's gathered bytes (they end at `have`) and tells the reads they are there.
// Called when the gather buffer is full, after each curl_multi_perform (so a read never waits
// longer than the receive that brought its bytes) and before a transfer's attempt is judged.
bool flush_body(Transfer& t) {
  if (t.gathered == 0) return true;
  const bool ok = write_at(t.fd, t.gather.get(), t.gathered, t.have - t.gathered);
  t.gathered = 0;
  if (!ok) {
    t.write_failed = true;
    return false;
  }
  if (t.download->arrived != nullptr) t.download->arrived->store(t.have, std::memory_order_release);
  return true;
}

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::size_t n = size * count;
  t->last_progress = Clock::now();
  const long status = status_of(t->easy);
  if (status != 200 && status != 206) {
    if (t->error_body.size() < kErrorBodyBytes) t->error_body.append(data, std::min(n, kErrorBodyBytes - t->error_body.size()));
    return n;
  }
  if (t->first_chunk) {
    // First bytes of this attempt. A 200 to a Range request is the whole object again.
    t->first_chunk = false;
    if (t->latency_s < 0) t->latency_s = std::chrono::duration<double>(t->last_progress - t->requested).count();
    timeline("first_byte", t->download->name, "status=" + std::to_string(status));
    if (status == 200 && t->have > 0) {
      restart_from_zero(*t);
      t->requested_from = 0;
    }
    if (status == 206 && t->headers.range_start.value_or(~std::uint64_t{0}) != t->have) return 0;  // wrong range: cut
    if (!t->first_etag.empty() && !t->headers.etag.empty() && t->headers.etag != t->first_etag) {
      t->etag_changed = true;
      return 0;
    }
    if (t->first_etag.empty()) t->first_etag = t->headers.etag;
  }
  if (t->have + n > t->max_bytes) {
    t->too_large = true;
    return 0;
  }
  if (t->text != nullptr) {
    t->text->append(data, n);
  } else if (t->download->memory != nullptr) {
    const MemoryTarget& m = *t->download->memory;
    if (m.data == nullptr) {
      t->write_failed = true;
      return 0;
    }
    std::memcpy(m.data + t->have, data, n);
  } else {
    if (t->write_failed || (t->gathered + n > kWriteGatherBytes && !flush_body(*t))) return 0;
    if (n >= kWriteGatherBytes) {
      if (!write_at(t->fd, data, n, t->have)) {
        t->write_failed = true;
        return 0;
      }
    } else {
      if (!t->gather) t->gather = t->spares->take_gather(kWriteGatherBytes);
      std::memcpy(t->gather.get() + t->gathered, data, n);
      t->gathered += n;
    }
  }
  t->have += n;
  // A file's bytes are there for the reads once written (flush_body says so for gathered ones).
  if (t->download->arrived != nullptr && t->gathered == 0) t->download->arrived->store(t->have, std::memory_order_release);
  remote_stats().add_bytes(n);
  if (t->counters != nullptr) t->counters->add_bytes(t->download->name, n);
  return n;
}

void configure(Transfer& t, const AwsConfig& aws, const TransferLimits& limits, const std::string& sigv4) {
  CURL* e = t.easy;
  curl_easy_setopt(e, CURLOPT_URL, t.download->http_url.c_str());
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_BUFFERSIZE, static_cast<long>(kTransferBufferBytes));
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS));
  const long timeout = std::max(1L, static_cast<long>(std::lround(limits.timeout_s)));
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, timeout);
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, timeout);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t.curl_error);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &t);
  if (t.download->ahead_max_bytes > 0) {
    curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(t.download->ahead_max_bytes));
  }
  curl_easy_setopt(e, CURLOPT_PRIVATE, &t);
  curl_slist_free_all(t.headers_out);
  t.headers_out = nullptr;
  t.requested_from = t.have;
  std::string range;
  if (t.have > 0) {
    range = std::to_string(t.have) + "-";
    curl_easy_setopt(e, CURLOPT_RANGE, range.c_str());  // copied by libcurl
  } else {
    curl_easy_setopt(e, CURLOPT_RANGE, nullptr);
    if (!t.download->cached_etag.empty()) {
      t.headers_out = curl_slist_append(t.headers_out, ("If-None-Match: " + t.download->cached_etag).c_str());
    }
  }
  if (t.download->sign && aws.signs()) {
    curl_easy_setopt(e, CURLOPT_AWS_SIGV4, sigv4.c_str());
    curl_easy_setopt(e, CURLOPT_USERNAME, aws.access_key_id.c_str());
    curl_easy_setopt(e, CURLOPT_PASSWORD, aws.secret_access_key.c_str());
    t.headers_out = curl_slist_append(t.headers_out, (std::string("x-amz-content-sha256: ") + kEmptySha256).c_str());
    if (!aws.session_token.empty()) {
      t.headers_out = curl_slist_append(t.headers_out, ("x-amz-security-token: " + aws.session_token).c_str());
    }
  }
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, t.headers_out);
  t.headers.reset();
  t.error_body.clear();
  t.etag_changed = false;
  t.first_chunk = true;
  t.curl_error[0] = '\0';
}

enum class Outcome : std::uint8_t { kDone, kRetry, kFail };

struct Verdict {
  Outcome outcome = Outcome::kDone;
  RetryCause cause = RetryCause::kOther;
  std::string why;
};

Verdict judge(Transfer& t, CURLcode code, const AwsConfig& aws) {
  const long status = status_of(t.easy);
  if (t.write_failed) return {Outcome::kFail, RetryCause::kOther, std::string("cannot write the local copy: ") + std::strerror(errno)};
  if (t.too_large) return {Outcome::kFail, RetryCause::kOther, "larger than " + std::to_string(t.max_bytes) + " bytes"};
  if (code == CURLE_FILESIZE_EXCEEDED) return {Outcome::kFail, RetryCause::kOther, "larger than " + std::to_string(t.max_bytes) + " bytes"};
  if (t.etag_changed) {
    restart_from_zero(t);
    return {Outcome::kRetry, RetryCause::kEtagChanged, "the object changed (its ETag) between requests"};
  }
  if (code == CURLE_OK) {
    if (status == 304 && !t.download->cached_etag.empty()) return {Outcome::kDone, {}, {}};
    if (status == 200 || status == 206) {
      std::optional<std::uint64_t> expected = t.headers.total_size;
      if (!expected && t.headers.content_length) expected = t.requested_from + *t.headers.content_length;
      if (expected && t.have < *expected) {
        return {Outcome::kRetry, RetryCause::kShortBody,
                "a short body (" + std::to_string(t.have) + " of " + std::to_string(*expected) + " bytes)"};
      }
      return {Outcome::kDone, {}, {}};
    }
    if (status == 429 || status >= 500) return {Outcome::kRetry, RetryCause::kHttpStatus, "HTTP " + std::to_string(status) + s3_code(t.error_body)};
    if (status == 416) {
      restart_from_zero(t);
      return {Outcome::kRetry, RetryCause::kShortBody, "HTTP 416 to a resumed range"};
    }
    return {Outcome::kFail, RetryCause::kOther, what_to_check(status, *t.download, aws) + s3_code(t.error_body)};
  }
  const std::string curl_says = t.curl_error[0] != '\0' ? t.curl_error : curl_easy_strerror(code);
  switch (code) {
    case CURLE_COULDNT_CONNECT: return {Outcome::kRetry, RetryCause::kRefused, "connection refused: " + curl_says};
    case CURLE_OPERATION_TIMEDOUT: return {Outcome::kRetry, RetryCause::kTimeout, "timed out: " + curl_says};
    case CURLE_PARTIAL_FILE: return {Outcome::kRetry, RetryCause::kShortBody, "a short body: " + curl_says};
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_WRITE_ERROR: return {Outcome::kRetry, RetryCause::kReset, "connection reset: " + curl_says};
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL: return {Outcome::kFail, RetryCause::kOther, curl_says};
    default: return {Outcome::kRetry, RetryCause::kOther, curl_says};
  }
}

double backoff_s(const Transfer& t, const TransferLimits& limits, std::mt19937_64& rng) {
  const double base = std::min(limits.max_backoff_s, limits.backoff_s * std::ldexp(1.0, std::min(t.attempts - 1, 30)));
  double delay = base * std::uniform_real_distribution<double>(0.5, 1.0)(rng);  // jitter: ranks do not retry in step
  if (t.headers.retry_after_s) delay = std::max(delay, std::min(*t.headers.retry_after_s, limits.max_backoff_s));
  return delay;
}

struct MultiDeleter {
  void operator()(CURLM* m) const { curl_multi_cleanup(m); }
};

// A transfer's attempt ended (`code`): done, given up, or put on `waiting` for its retry.
void finish_attempt(Transfer& t, CURLcode code, const AwsConfig& aws, const TransferLimits& limits, std::mt19937_64& rng,
                    std::vector<Transfer*>& waiting) {
  const Verdict v = judge(t, code, aws);
  ++t.attempts;
  const int retries = t.download->ahead_max_bytes > 0 ? 0 : limits.retries;
  if (v.outcome == Outcome::kRetry && t.attempts <= retries) {
    remote_stats().add_retry(v.cause);
    if (t.counters != nullptr) t.counters->add_retry(t.download->name, v.cause);
    const double delay = backoff_s(t, limits, rng);
    t.not_before = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(delay));
    waiting.push_back(&t);
    return;
  }
  Downloaded& r = *t.result;
  if (v.outcome == Outcome::kDone) {
    r.ok = true;
    r.not_modified = status_of(t.easy) == 304;
    // A body that started over may be shorter than what the file held before (restart_from_zero).
    if (!r.not_modified && t.fd >= 0 && ::ftruncate(t.fd, static_cast<off_t>(t.have)) != 0) {
      r.ok = false;
      r.fatal = true;
      r.error = t.download->name + ": cannot write the local copy: " + std::strerror(errno);
      remote_stats().add_failure();
      if (t.counters != nullptr) t.counters->add_failure(t.download->name);
      return;
    }
    if (r.not_modified && t.download->arrived != nullptr) t.download->arrived->store(~std::uint64_t{0}, std::memory_order_release);
    r.etag = r.not_modified ? t.download->cached_etag : t.first_etag;
    r.bytes = t.have;
  } else {
    const bool answer = (t.download->may_be_absent && status_of(t.easy) == 404) || t.download->ahead_max_bytes > 0;
    if (!answer) {
      remote_stats().add_failure();
      if (t.counters != nullptr) t.counters->add_failure(t.download->name);
    }
    r.fatal = v.outcome == Outcome::kFail;
    r.error = t.download->name + ": " + v.why +
              (v.outcome == Outcome::kRetry ? " (gave up after " + std::to_string(t.attempts) + " attempts)" : "");
  }
}

// TransferLimits::tune_depth: 1 + bandwidth x latency / object size transfers in flight (at least
// 2, at most `most`), from what the transfers measured so far: the mean time from request to
// first body byte, the body bytes received since the start, the mean object size announced.
int tuned_depth(const std::vector<Transfer>& transfers, Clock::time_point started, int most) {
  double latency = 0;
  int latencies = 0;
  std::uint64_t received = 0;
  std::uint64_t sizes = 0;
  int sized = 0;
  for (const Transfer& t : transfers) {
    received += t.have;
    if (t.latency_s >= 0) {
      latency += t.latency_s;
      ++latencies;
    }
    if (t.headers.content_length) {
      sizes += t.requested_from + *t.headers.content_length;
      ++sized;
    }
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
  if (latencies == 0 || sized == 0 || elapsed <= 0) return read_ahead_depth(0, 0, 0, most);
  return read_ahead_depth(latency / latencies, static_cast<double>(received) / elapsed, static_cast<double>(sizes) / sized,
                          most);
}

// The transfers in flight that tune_depth's rule counts: a revalidation (If-None-Match) that has
// had no body byte yet is mostly a 304 with no body, a round trip that brings no bytes to wait
// behind, so it does not hold back the next request (`limits.connections` still bounds them all).
// Each origin the transfers fetched from waited as long as their call did.
void add_wait(SourceCounters& counters, const std::vector<Transfer>& transfers, std::uint64_t waited_ns) {
  std::vector<std::string> origins;
  for (const Transfer& t : transfers) {
    std::string o = origin_of(t.download->name);
    if (std::find(origins.begin(), origins.end(), o) == origins.end()) origins.push_back(std::move(o));
  }
  for (const std::string& o : origins) counters.add_wait_ns(o, waited_ns);
}

int bodies_in_flight(const std::vector<Transfer*>& active) {
  int n = 0;
  for (const Transfer* t : active) n += t->download->cached_etag.empty() || t->have > 0 ? 1 : 0;
  return n;
}

// Runs every transfer to completion (done or given up), `limits.connections` at a time. A
// transfer that receives nothing (not a header, not a body byte) for timeout_s is cut here: the
// low-speed check of libcurl averages over seconds of history, this is the "no byte for N
// seconds" deadline itself.
// The transfers take turns with `limits.connections` easy handles and gather buffers
// (TransferSpares).
void run_transfers(std::vector<Transfer>& transfers, const AwsConfig& aws, const TransferLimits& limits) {
  global_init();
  const std::unique_ptr<CURLM, MultiDeleter> multi(curl_multi_init());
  if (!multi) throw Error(ErrorCode::kIo, "libcurl: cannot create a transfer pool");
  TransferSpares spares;  // after `multi`: its handles are out of the pool and cleaned up before it goes
  curl_multi_setopt(multi.get(), CURLMOPT_MAX_HOST_CONNECTIONS, static_cast<long>(limits.connections));
  const std::string sigv4 = "aws:amz:" + aws.region + ":s3";
  const auto deadline = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limits.timeout_s));
  std::mt19937_64 rng(std::random_device{}());
  const auto started = Clock::now();
  // The caller's loader (its counters, its stop: BuildOptions::stop in build()), if it set one.
  const RemoteScope* scope = RemoteScope::current();
  SourceCounters* const counters = scope != nullptr ? scope->counters().get() : nullptr;
  const std::function<bool()> no_stop;
  const std::function<bool()>& scope_stop = scope != nullptr ? scope->stop() : no_stop;
  for (Transfer& t : transfers) {
    t.counters = counters;
    t.spares = &spares;
  }
  std::size_t next = 0;
  std::vector<Transfer*> active;
  std::vector<Transfer*> waiting;  // retries waiting out their delay
  const auto start = [&](Transfer& t) {
    if (t.easy == nullptr) t.easy = spares.take_handle();  // configure() sets what this transfer needs
    if (t.easy == nullptr) throw Error(ErrorCode::kIo, "libcurl: cannot create a transfer");
    configure(t, aws, limits, sigv4);
    t.last_progress = Clock::now();
    t.requested = t.last_progress;
    curl_multi_add_handle(multi.get(), t.easy);
    remote_stats().add_request();
    if (counters != nullptr) counters->add_request(t.download->name);
    active.push_back(&t);
    timeline("request", t.download->name, "in_flight=" + std::to_string(active.size()));
  };
  const auto end = [&](Transfer& t, CURLcode code) {
    curl_multi_remove_handle(multi.get(), t.easy);
    (void)flush_body(t);  // a failed write is judged (write_failed)
    spares.give_gather(std::move(t.gather));
    active.erase(std::find(active.begin(), active.end(), &t));
    timeline("done", t.download->name, "bytes=" + std::to_string(t.have) + " curl=" + std::to_string(static_cast<int>(code)));
    const std::size_t retrying = waiting.size();
    finish_attempt(t, code, aws, limits, rng, waiting);
    spares.give_handle(std::exchange(t.easy, nullptr));  // judged: the handle serves the next
    if (limits.finished && waiting.size() == retrying) limits.finished(static_cast<std::size_t>(&t - transfers.data()), *t.result);
  };
  int connections = limits.tune_depth ? std::min(2, limits.connections) : limits.connections;
  constexpr auto kStopCheck = std::chrono::milliseconds(50);
  auto next_stop_check = started + kStopCheck;
  bool stopped = false;
  while (next < transfers.size() || !active.empty() || !waiting.empty()) {
    const auto now = Clock::now();
    bool (*const process_stop)() = g_process_stop.load(std::memory_order_acquire);
    if ((limits.stop || scope_stop || process_stop != nullptr) && now >= next_stop_check) {
      next_stop_check = now + kStopCheck;
      if ((process_stop != nullptr && process_stop()) || (limits.stop && limits.stop()) || (scope_stop && scope_stop())) {
        for (Transfer* t : active) curl_multi_remove_handle(multi.get(), t->easy);
        active.clear();
        stopped = true;
        break;
      }
    }
    for (auto it = waiting.begin(); it != waiting.end() && static_cast<int>(active.size()) < connections;) {
      if ((*it)->not_before <= now) {
        start(**it);
        it = waiting.erase(it);
      } else {
        ++it;
      }
    }
    if (limits.tune_depth) connections = tuned_depth(transfers, started, limits.connections);
    while (next < transfers.size() && static_cast<int>(active.size()) < limits.connections &&
           bodies_in_flight(active) < connections) {
      if (limits.skip && limits.skip(next)) {
        ++next;
        continue;
      }
      if (limits.may_start && !limits.may_start(next)) break;
      start(transfers[next++]);
    }
    int running = 0;
    curl_multi_perform(multi.get(), &running);
    for (Transfer* t : active) (void)flush_body(*t);  // a failed write ends the transfer at its next piece
    int left = 0;
    bool ended = false;
    while (CURLMsg* msg = curl_multi_info_read(multi.get(), &left)) {
      if (msg->msg != CURLMSG_DONE) continue;
      Transfer* t = nullptr;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &t);
      end(*t, msg->data.result);
      ended = true;
    }
    const auto stalled = std::find_if(active.begin(), active.end(), [&](const Transfer* t) { return Clock::now() - t->last_progress > deadline; });
    if (stalled != active.end()) {
      std::snprintf((*stalled)->curl_error, CURL_ERROR_SIZE, "no byte for %.1f s", limits.timeout_s);
      end(**stalled, CURLE_OPERATION_TIMEDOUT);
      ended = true;
    }
    // A transfer that ended leaves its place to the next at once: the poll would first wait up to
    // 50 ms for the other transfers' sockets (all of them silent while they wait out a latency).
    if (!ended && (next < transfers.size() || !active.empty() || !waiting.empty())) {
      curl_multi_poll(multi.get(), nullptr, 0, active.empty() ? 10 : 50, nullptr);
    }
  }
  for (Transfer& t : transfers) {
    if (t.easy != nullptr) curl_easy_cleanup(t.easy);
    curl_slist_free_all(t.headers_out);
    t.easy = nullptr;
    t.headers_out = nullptr;
  }
  if (limits.tune_depth) timeline_thread_cpu();
  const auto waited = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - started).count());
  remote_stats().add_wait_ns(waited);
  if (counters != nullptr) add_wait(*counters, transfers, waited);
  if (stopped) throw Error(ErrorCode::kCancelled, "stopped while fetching from the network");
}

}  // namespace

int read_ahead_depth(double latency_s, double bandwidth, double object_bytes, int most) {
  if (!(latency_s > 0) || !(bandwidth > 0) || !(object_bytes > 0)) return std::min(2, most);
  const double depth = 1 + std::ceil(bandwidth * latency_s / object_bytes);
  return static_cast<int>(std::clamp(depth, std::min(2.0, static_cast<double>(most)), static_cast<double>(most)));
}

std::uint64_t file_writes() { return g_file_writes.load(std::memory_order_relaxed); }

void set_process_stop(bool (*check)()) { g_process_stop.store(check, std::memory_order_release); }

std::vector<Downloaded> download_all(const std::vector<Download>& downloads, const AwsConfig& aws,
                                     const TransferLimits& limits) {
  std::vector<Downloaded> results(downloads.size());
  std::vector<Transfer> transfers(downloads.size());
  struct Closer {
    std::vector<Transfer>& t;
    ~Closer() {
      for (Transfer& x : t) {
        if (x.fd >= 0) ::close(x.fd);
        if (x.easy != nullptr) curl_easy_cleanup(x.easy);
        curl_slist_free_all(x.headers_out);
      }
    }
  } closer{transfers};
  for (std::size_t i = 0; i < downloads.size(); ++i) {
    Transfer& t = transfers[i];
    t.download = &downloads[i];
    t.result = &results[i];
    t.max_bytes = ~std::uint64_t{0};
    if (downloads[i].text != nullptr) {
      t.text = downloads[i].text;
      t.max_bytes = downloads[i].max_text_bytes;
      continue;
    }
    if (downloads[i].memory != nullptr) {
      t.max_bytes = downloads[i].memory->size;
      continue;
    }
    if (downloads[i].ahead_max_bytes > 0) t.max_bytes = downloads[i].ahead_max_bytes;
    t.fd = ::open(downloads[i].path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (t.fd < 0) {
      throw Error(ErrorCode::kIo, std::string("cannot create the shard's local copy: ") + std::strerror(errno), downloads[i].path);
    }
  }
  run_transfers(transfers, aws, limits);
  return results;
}

std::string fetch_text(const std::string& name, const std::string& http_url, bool sign, const AwsConfig& aws,
                       const TransferLimits& limits, std::uint64_t max_bytes) {
  const Download d{name, http_url, sign, {}, {}, false};
  Downloaded result;
  std::string text;
  std::vector<Transfer> transfers(1);
  transfers[0].download = &d;
  transfers[0].result = &result;
  transfers[0].text = &text;
  transfers[0].max_bytes = max_bytes;
  run_transfers(transfers, aws, limits);
  if (!result.ok) throw Error(ErrorCode::kIo, result.error);
  return text;
}

}  // namespace sluice::stages::remote
