// The level is read once from SLUICE_LOG; a line is written with one fputs so lines from several
// threads do not interleave mid-line.
#include "sluice/detail/core/log.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace sluice {

namespace {
LogLevel configured_level() {
  const char* env = std::getenv("SLUICE_LOG");
  if (env == nullptr) return LogLevel::kWarning;
  const std::string value(env);
  if (value == "error") return LogLevel::kError;
  if (value == "info") return LogLevel::kInfo;
  if (value == "debug") return LogLevel::kDebug;
  return LogLevel::kWarning;
}
}  // namespace

bool log_enabled(LogLevel level) {
  static const LogLevel threshold = configured_level();
  return static_cast<int>(level) <= static_cast<int>(threshold);
}

void log(LogLevel level, std::string_view message) {
  if (!log_enabled(level)) return;
  std::string line = "sluice: ";
  line += message;
  line += '\n';
  std::fputs(line.c_str(), stderr);
}

}  // namespace sluice
