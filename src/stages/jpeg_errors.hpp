// What JpegDecoder does with libjpeg's errors and warnings: the error manager it installs in its
// decompressor, and the sluice::Error a failed header read or decode becomes. libjpeg's default
// manager calls exit() on an error and prints warnings to stderr; this one jumps back to the
// guarded call (setjmp) and keeps the messages in fixed storage, so a failure allocates nothing
// until the caller builds the sluice::Error. Internal to src/stages.
#pragma once

#include <csetjmp>
#include <cstdint>
#include <cstdio>  // jpeglib.h needs FILE and size_t declared first
#include <span>
#include <string>

#include <jpeglib.h>

#include "sluice/core/error.hpp"

namespace sluice::stages {

// What a libjpeg warning does to the decode in progress.
enum class OnWarning : std::uint8_t {
  kStop,      // ends it like an error
  kContinue,  // is counted and the decode goes on
};

// Where libjpeg stopped: in the markers before the first scan, or in the image data.
enum class JpegPhase : std::uint8_t { kHeader, kScan };

struct JpegErrorManager {
  jpeg_error_mgr pub;  // first member: libjpeg hands back &pub and we cast it to JpegErrorManager
  std::jmp_buf jump;
  OnWarning on_warning = OnWarning::kStop;
  bool failed_on_warning = false;
  int failed_code = 0;  // libjpeg's msg_code of what stopped the decode
  int warnings = 0;
  int first_warning_code = 0;
  char message[JMSG_LENGTH_MAX] = {};  // what stopped the decode
  char warning[JMSG_LENGTH_MAX] = {};  // the first warning

  // Makes this the manager of `cinfo` (before jpeg_create_decompress).
  void install(jpeg_decompress_struct& cinfo);
  // Clears what the last image left, for the next one.
  void arm(OnWarning policy);
};

// The Error (without a path: the caller adds it) for a header read or decode that libjpeg ended.
// kUnsupportedFormat for a valid JPEG this build does not decode, kCorruptData for damage; a file
// cut short is named as such.
Error libjpeg_failure(const JpegErrorManager& err, JpegPhase phase);

// The cause for data without the SOI marker: names the format when its signature is known.
std::string describe_non_jpeg(std::span<const std::uint8_t> data);

}  // namespace sluice::stages
