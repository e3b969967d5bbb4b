// Minimal diagnostics: messages at or above SLUICE_LOG (error, warning, info, debug; default
// warning) go to stderr, one line each, prefixed "sluice: ". A library prints nothing else.
#pragma once

#include <string_view>

namespace sluice {

enum class LogLevel : int { kError = 0, kWarning = 1, kInfo = 2, kDebug = 3 };

bool log_enabled(LogLevel level);
void log(LogLevel level, std::string_view message);

}  // namespace sluice
