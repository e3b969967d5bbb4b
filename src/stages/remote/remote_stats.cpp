// Process-wide counters of the remote transport.
#include "stages/remote/remote_stats.hpp"

#include <cstdio>

namespace sluice::stages::remote {

const char* retry_cause_name(RetryCause cause) {
  switch (cause) {
    case RetryCause::kRefused: return "refused";
    case RetryCause::kReset: return "reset";
    case RetryCause::kTimeout: return "timeout";
    case RetryCause::kHttpStatus: return "http_status";
    case RetryCause::kShortBody: return "short_body";
    case RetryCause::kEtagChanged: return "etag_changed";
    case RetryCause::kOther: return "other";
  }
  return "other";
}

RemoteCounters RemoteStats::snapshot() const {
  RemoteCounters c;
  c.requests = requests_.load(std::memory_order_relaxed);
  c.bytes = bytes_.load(std::memory_order_relaxed);
  for (int i = 0; i < kRetryCauses; ++i) c.retries[static_cast<std::size_t>(i)] = retries_[static_cast<std::size_t>(i)].load(std::memory_order_relaxed);
  c.network_wait_ns = wait_ns_.load(std::memory_order_relaxed);
  c.cache_hits = hits_.load(std::memory_order_relaxed);
  c.cache_misses = misses_.load(std::memory_order_relaxed);
  c.failures = failures_.load(std::memory_order_relaxed);
  return c;
}

RemoteStats& remote_stats() {
  static RemoteStats stats;
  return stats;
}

std::string describe(const RemoteCounters& c) {
  char head[160];
  std::snprintf(head, sizeof head, "%llu requests, %.1f MB, waited %.2f s on the network, cache %llu hits %llu misses",
                static_cast<unsigned long long>(c.requests), static_cast<double>(c.bytes) / 1e6,
                static_cast<double>(c.network_wait_ns) / 1e9, static_cast<unsigned long long>(c.cache_hits),
                static_cast<unsigned long long>(c.cache_misses));
  std::string out = head;
  std::string retries;
  for (int i = 0; i < kRetryCauses; ++i) {
    if (c.retries[static_cast<std::size_t>(i)] == 0) continue;
    retries += (retries.empty() ? "" : ", ") + std::string(retry_cause_name(static_cast<RetryCause>(i))) + " " +
               std::to_string(c.retries[static_cast<std::size_t>(i)]);
  }
  if (!retries.empty()) out += "; retries: " + retries;
  return out;
}

}  // namespace sluice::stages::remote
