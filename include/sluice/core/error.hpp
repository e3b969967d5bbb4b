// sluice::Error: the one exception type the library throws, with a code a program can branch on
// and the path of the input it concerns (empty when none).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace sluice {

enum class ErrorCode {
  kInvalidArgument,   // bad configuration: what to change is in the message
  kNotFound,          // missing file or folder
  kPermissionDenied,  // the OS refused to open or read
  kIo,                // any other read failure
  kCorruptData,       // truncated or malformed file contents
  kUnsupportedFormat, // not a JPEG, or a JPEG feature we do not decode
  kTooLarge,          // over max_image_pixels or the maximum file size
  kOutOfBudget,       // the pipeline cannot run inside its memory budget
  kCancelled,         // the pipeline was shut down while the work was pending
  kInternal,          // a bug in sluice
};

std::string_view to_string(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message, std::string path = {});

  ErrorCode code() const noexcept { return code_; }
  // The input the error concerns, or empty.
  const std::string& path() const noexcept { return path_; }
  // The message without the path prefix.
  const std::string& cause() const noexcept { return cause_; }

 private:
  ErrorCode code_;
  std::string path_;
  std::string cause_;
};

}  // namespace sluice
