// The command line's options for shards named by URL (--remote-cache DIR, --remote-cache-limit
// SIZE, --no-sign-request), shared by bench and inspect, and the transport's counters as JSON.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "sluice/pipeline/options.hpp"

namespace sluice::cli {

struct RemoteFlags {
  std::string cache_dir;
  std::string cache_limit;  // a size ("20GiB"); empty: the default
  bool no_sign = false;
};

void add_remote_options(CLI::App* cmd, RemoteFlags& flags);
// Throws kInvalidArgument when --remote-cache-limit is not a size.
RemoteOptions remote_options(const RemoteFlags& flags);
// bench --json's "remote": requests, bytes, retries by cause, network wait, cache hits.
nlohmann::json remote_stats_json();

}  // namespace sluice::cli
