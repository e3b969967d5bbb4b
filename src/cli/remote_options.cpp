// --remote-cache, --remote-cache-limit, --no-sign-request and the transport's counters.
#include "cli/remote_options.hpp"

#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"
#include "stages/remote/remote_stats.hpp"

namespace sluice::cli {

void add_remote_options(CLI::App* cmd, RemoteFlags& flags) {
  cmd->add_option("--remote-cache", flags.cache_dir,
                  "Folder for local copies of shards named by URL (default ~/.cache/sluice/remote)");
  cmd->add_option("--remote-cache-limit", flags.cache_limit, "Bytes that folder may hold (default 20GiB; 0: stream the shards through memory, nothing on disk)");
  cmd->add_flag("--no-sign-request", flags.no_sign, "Unsigned S3 requests (a public bucket)");
}

RemoteOptions remote_options(const RemoteFlags& flags) {
  RemoteOptions o;
  o.cache_dir = flags.cache_dir;
  o.anonymous = flags.no_sign;
  if (!flags.cache_limit.empty()) {
    const auto bytes = parse_size(flags.cache_limit);
    if (!bytes) throw Error(ErrorCode::kInvalidArgument, "--remote-cache-limit: cannot read \"" + flags.cache_limit + "\" as a size");
    o.cache_limit = *bytes;
  }
  return o;
}

nlohmann::json remote_stats_json() {
  const stages::remote::RemoteCounters c = stages::remote::remote_stats().snapshot();
  nlohmann::json retries = nlohmann::json::object();
  for (int i = 0; i < stages::remote::kRetryCauses; ++i) {
    retries[stages::remote::retry_cause_name(static_cast<stages::remote::RetryCause>(i))] = c.retries[static_cast<std::size_t>(i)];
  }
  return {{"requests", c.requests},       {"bytes", c.bytes},           {"retries", retries},
          {"network_wait_s", static_cast<double>(c.network_wait_ns) / 1e9},  {"cache_hits", c.cache_hits},
          {"cache_misses", c.cache_misses}, {"failures", c.failures}};
}

}  // namespace sluice::cli
