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

std::string origin_of(std::string_view url) {
  const std::size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return "local";
  const std::size_t start = scheme + 3;
  std::size_t end = url.find_first_of("/?#", start);
  if (end == std::string_view::npos) end = url.size();
  std::string_view authority = url.substr(start, end - start);
  const std::size_t at = authority.rfind('@');
  if (at != std::string_view::npos) authority.remove_prefix(at + 1);
  return std::string(url.substr(0, start)) + std::string(authority);
}

std::vector<SourceStats> SourceCounters::stats() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::vector<SourceStats> out;
  out.reserve(counters_.size());
  for (const auto& [name, c] : counters_) {
    SourceStats s;
    s.source = name;
    s.requests = static_cast<std::int64_t>(c.requests);
    s.bytes = c.bytes;
    for (int i = 0; i < kRetryCauses; ++i) {
      s.retries.emplace_back(retry_cause_name(static_cast<RetryCause>(i)), static_cast<std::int64_t>(c.retries[static_cast<std::size_t>(i)]));
    }
    s.network_wait_seconds = static_cast<double>(c.network_wait_ns) / 1e9;
    s.cache_hits = static_cast<std::int64_t>(c.cache_hits);
    s.cache_misses = static_cast<std::int64_t>(c.cache_misses);
    s.failures = static_cast<std::int64_t>(c.failures);
    out.push_back(std::move(s));
  }
  return out;
}

namespace {
thread_local const RemoteScope* t_scope = nullptr;
}  // namespace

RemoteScope::RemoteScope(std::shared_ptr<SourceCounters> counters, std::function<bool()> stop)
    : counters_(std::move(counters)), stop_(std::move(stop)), outer_(t_scope) {
  if (!stop_ && outer_ != nullptr) stop_ = outer_->stop_;  // an inner scope without a stop keeps the outer one's
  t_scope = this;
}

RemoteScope::~RemoteScope() { t_scope = outer_; }

const RemoteScope* RemoteScope::current() { return t_scope; }

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
