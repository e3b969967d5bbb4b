// The "remote timeline" lines (remote_timeline.hpp).
#include "stages/remote/remote_timeline.hpp"

#include <sys/resource.h>

#include <chrono>
#include <cstdio>

#include "sluice/detail/core/log.hpp"

namespace sluice::stages::remote {

bool timeline_enabled() { return log_enabled(LogLevel::kDebug); }

void timeline(const char* event, const std::string& name, const std::string& detail) {
  if (!timeline_enabled()) return;
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.3f",
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count());
  log(LogLevel::kDebug, std::string("remote timeline ") + ms + " " + event + " " + name + " " + detail);
}

void timeline_thread_cpu() {
  if (!timeline_enabled()) return;
  rusage ru{};
  ::getrusage(RUSAGE_THREAD, &ru);
  const auto ms = [](const timeval& t) { return std::to_string(t.tv_sec * 1000 + t.tv_usec / 1000); };
  timeline("stream_thread_cpu", "-", "user_ms=" + ms(ru.ru_utime) + " sys_ms=" + ms(ru.ru_stime));
}

}  // namespace sluice::stages::remote
