// Error formatting: "<path>: <cause>" when a path is known, so every message names its input.
#include "sluice/core/error.hpp"

namespace sluice {

std::string_view to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kNotFound: return "not found";
    case ErrorCode::kPermissionDenied: return "permission denied";
    case ErrorCode::kIo: return "I/O error";
    case ErrorCode::kCorruptData: return "corrupt data";
    case ErrorCode::kUnsupportedFormat: return "unsupported format";
    case ErrorCode::kTooLarge: return "too large";
    case ErrorCode::kOutOfBudget: return "out of budget";
    case ErrorCode::kCancelled: return "cancelled";
    case ErrorCode::kInternal: return "internal error";
  }
  return "unknown error";
}

namespace {
std::string format_message(const std::string& message, const std::string& path) {
  return path.empty() ? message : path + ": " + message;
}
}  // namespace

Error::Error(ErrorCode code, const std::string& message, std::string path)
    : std::runtime_error(format_message(message, path)),
      code_(code),
      path_(std::move(path)),
      cause_(message) {}

}  // namespace sluice
