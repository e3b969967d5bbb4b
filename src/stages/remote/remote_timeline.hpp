// SLUICE_LOG=debug's "remote timeline" lines: "remote timeline MS EVENT NAME DETAIL", MS on the
// steady clock in milliseconds, one format for the transport's events (request, first_byte, done:
// stages/remote/http_transport.cpp) and the streamed reads (read: stages/source/read_file.cpp),
// so a stream's requests, first bytes and ends line up with when its members were read
// (bench/e2e/remote_timeline.py reads them). Internal to src/stages.
#pragma once

#include <string>

namespace sluice::stages::remote {

// True when the lines are written (SLUICE_LOG=debug): callers skip their own work otherwise.
bool timeline_enabled();
// One line, stamped now.
void timeline(const char* event, const std::string& name, const std::string& detail);
// The calling thread's CPU so far, as a "stream_thread_cpu" line (at the end of a stream, whose
// thread does nothing else).
void timeline_thread_cpu();

}  // namespace sluice::stages::remote
