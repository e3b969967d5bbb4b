// What the remote transport did, counted process-wide (every loader of the process adds to the
// same counters): requests and bytes, retries by cause, time spent waiting on the network and
// the shard cache's hits. `sluice bench --json` reports it as "remote"; the library's own log
// (kInfo) prints it after each build.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

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

// One line for logs: "12 requests, 1.2 GiB, retries: reset 2, ...; waited 3.1 s; cache 4 hits".
std::string describe(const RemoteCounters& c);

}  // namespace sluice::stages::remote
