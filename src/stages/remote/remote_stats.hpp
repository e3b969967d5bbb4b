// What the remote transport did: requests and bytes, retries by cause, time spent waiting on the
// network and the shard cache's hits. Counted twice: process-wide (RemoteStats: every loader of
// the process adds to the same counters; `sluice bench --json` reports them as "remote" and the
// library's own log, kInfo, prints them after each build) and per loader, per origin
// (SourceCounters: what Loader::stats() reports as "sources"). A loader's counters reach the
// transport through a RemoteScope on the thread that fetches (build()'s, then the consumer's for
// an epoch's fetch): the transport runs its transfers on the calling thread, so the scope is
// thread-local and no fetch signature carries it. The scope also carries the caller's stop
// (BuildOptions::stop), asked as TransferLimits::stop is.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/pipeline/stats.hpp"

namespace sluice::stages::remote {

enum class RetryCause : std::uint8_t { kRefused, kReset, kTimeout, kHttpStatus, kShortBody, kEtagChanged, kOther };
inline constexpr int kRetryCauses = 7;
const char* retry_cause_name(RetryCause cause);  // "refused", "reset", "timeout", "http_status", ...

struct RemoteCounters {
  std::uint64_t requests = 0;
  std::uint64_t bytes = 0;
  std::array<std::uint64_t, kRetryCauses> retries{};
  std::uint64_t network_wait_ns = 0;
  std::uint64_t cache_hits = 0;
  std::uint64_t cache_misses = 0;
  std::uint64_t failures = 0;  // objects given up on (after the retries, or a 403/404)
};

class RemoteStats {
 public:
  void add_request() { requests_.fetch_add(1, std::memory_order_relaxed); }
  void add_bytes(std::uint64_t n) { bytes_.fetch_add(n, std::memory_order_relaxed); }
  void add_retry(RetryCause c) { retries_[static_cast<int>(c)].fetch_add(1, std::memory_order_relaxed); }
  void add_wait_ns(std::uint64_t ns) { wait_ns_.fetch_add(ns, std::memory_order_relaxed); }
  void add_cache(bool hit) { (hit ? hits_ : misses_).fetch_add(1, std::memory_order_relaxed); }
  void add_failure() { failures_.fetch_add(1, std::memory_order_relaxed); }
  RemoteCounters snapshot() const;

 private:
  std::atomic<std::uint64_t> requests_{0};
  std::atomic<std::uint64_t> bytes_{0};
  std::array<std::atomic<std::uint64_t>, kRetryCauses> retries_{};
  std::atomic<std::uint64_t> wait_ns_{0};
  std::atomic<std::uint64_t> hits_{0};
  std::atomic<std::uint64_t> misses_{0};
  std::atomic<std::uint64_t> failures_{0};
};

RemoteStats& remote_stats();

// "http://host:port", "https://host", "s3://bucket": what a URL's counters are kept under. The
// userinfo (user:password@) and everything after the authority (a presigned URL's query) are
// left out, so no secret reaches stats.
std::string origin_of(std::string_view url);

// One loader's counters, per origin, in the order the origins were first met.
class SourceCounters {
 public:
  void add_request(std::string_view url) { with(url, [](RemoteCounters& c) { ++c.requests; }); }
  void add_bytes(std::string_view url, std::uint64_t n) { with(url, [n](RemoteCounters& c) { c.bytes += n; }); }
  void add_retry(std::string_view url, RetryCause cause) {
    with(url, [cause](RemoteCounters& c) { ++c.retries[static_cast<std::size_t>(cause)]; });
  }
  void add_wait_ns(std::string_view url, std::uint64_t ns) { with(url, [ns](RemoteCounters& c) { c.network_wait_ns += ns; }); }
  void add_cache(std::string_view url, bool hit) { with(url, [hit](RemoteCounters& c) { ++(hit ? c.cache_hits : c.cache_misses); }); }
  void add_failure(std::string_view url) { with(url, [](RemoteCounters& c) { ++c.failures; }); }
  std::vector<SourceStats> stats() const;

 private:
  template <class F>
  void with(std::string_view url, F&& f) {
    std::string origin = origin_of(url);
    const std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [name, c] : counters_) {
      if (name == origin) return f(c);
    }
    counters_.emplace_back(std::move(origin), RemoteCounters{});
    f(counters_.back().second);
  }

  mutable std::mutex mutex_;
  std::vector<std::pair<std::string, RemoteCounters>> counters_;
};

// While it lives, fetches on this thread count into `counters` (may be null) and stop when
// `stop` says so (empty: the enclosing scope's stop, if any). Scopes nest: the innermost counts.
class RemoteScope {
 public:
  RemoteScope(std::shared_ptr<SourceCounters> counters, std::function<bool()> stop);
  ~RemoteScope();
  RemoteScope(const RemoteScope&) = delete;
  RemoteScope& operator=(const RemoteScope&) = delete;

  // The innermost scope of this thread, or null.
  static const RemoteScope* current();
  const std::shared_ptr<SourceCounters>& counters() const { return counters_; }
  const std::function<bool()>& stop() const { return stop_; }

 private:
  std::shared_ptr<SourceCounters> counters_;
  std::function<bool()> stop_;
  const RemoteScope* outer_;
};

// One line for logs: "12 requests, 1.2 GiB, retries: reset 2, ...; waited 3.1 s; cache 4 hits".
std::string describe(const RemoteCounters& c);

}  // namespace sluice::stages::remote
