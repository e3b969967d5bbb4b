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

// What a file that ends before its EOI marker lacks. libjpeg's memory source warns "Premature end
// of JPEG file" and inserts a fake EOI marker, and decoding goes on with made-up data; whether
// any row was made up depends on where the data ended.
enum class Truncation : std::uint8_t {
  kNone,          // no data is missing (at most the EOI marker itself): every row is real
  kRowsMissing,   // the entropy-coded data of some rows is missing: those rows are made up
  kScansMissing,  // a progressive (or multi-scan) image lacks scans: coefficients are missing
};

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
  // Where the data ended, if it ended before the EOI marker:
  bool data_ended = false;          // "Premature end of JPEG file"
  bool bits_made_up = false;        // then a Huffman decoder ran out of bits and used zeros
  unsigned data_end_imcu_row = 0;   // the iMCU row being read when the data ended
  // sluice's entropy decoder (jpeg_huffman.hpp) met something it does not vouch for and jumped
  // out: the decode is to be run again from the start with libjpeg's own decoder.
  bool own_huffman_gave_up = false;

  // Makes this the manager of `cinfo` (before jpeg_create_decompress).
  void install(jpeg_decompress_struct& cinfo);
  // Clears what the last image left, for the next one.
  void arm(OnWarning policy);
};

// The Error (without a path: the caller adds it) for a header read or decode that libjpeg ended.
// kUnsupportedFormat for a valid JPEG this build does not decode, kCorruptData for damage; a file
// cut short is named as such.
Error libjpeg_failure(const JpegErrorManager& err, JpegPhase phase);

// What the data read so far lacks, judged from the warnings and the decompressor's state (call
// it before jpeg_finish_decompress or jpeg_abort_decompress, which free the progression state).
Truncation truncation_of(jpeg_decompress_struct& cinfo, const JpegErrorManager& err);

// The Error for a decode whose rows libjpeg would have made up (Truncation other than kNone).
Error truncation_failure(Truncation truncation);

// The cause for data without the SOI marker: names the format when its signature is known.
std::string describe_non_jpeg(std::span<const std::uint8_t> data);

}  // namespace sluice::stages
