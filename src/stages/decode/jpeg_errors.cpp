// libjpeg's error and message callbacks for JpegDecoder, and the causes its failures are given.
#include "stages/decode/jpeg_errors.hpp"

#include <algorithm>
#include <string_view>

#include <jerror.h>

namespace sluice::stages {

namespace {

JpegErrorManager& manager_of(j_common_ptr cinfo) { return *reinterpret_cast<JpegErrorManager*>(cinfo->err); }

[[noreturn]] void on_libjpeg_error(j_common_ptr cinfo) {
  JpegErrorManager& err = manager_of(cinfo);
  err.failed_code = cinfo->err->msg_code;
  cinfo->err->format_message(cinfo, err.message);
  std::longjmp(err.jump, 1);
}

void on_libjpeg_message(j_common_ptr cinfo, int level) {
  if (level >= 0) return;  // trace messages
  JpegErrorManager& err = manager_of(cinfo);
  const int code = cinfo->err->msg_code;
  if (code == JWRN_JPEG_EOF && !err.data_ended) {
    err.data_ended = true;
    if (cinfo->is_decompressor) err.data_end_imcu_row = reinterpret_cast<j_decompress_ptr>(cinfo)->input_iMCU_row;
  } else if (code == JWRN_HIT_MARKER && err.data_ended) {
    err.bits_made_up = true;  // the marker it hit is the fake EOI: the bits it needed are past the end
  }
  if (err.warnings++ == 0) {
    err.first_warning_code = cinfo->err->msg_code;
    cinfo->err->format_message(cinfo, err.warning);
  }
  if (err.on_warning == OnWarning::kStop) {
    err.failed_on_warning = true;
    err.failed_code = cinfo->err->msg_code;
    std::snprintf(err.message, sizeof err.message, "%s", err.warning);
    std::longjmp(err.jump, 1);
  }
}

void on_libjpeg_output(j_common_ptr /*cinfo*/) {}  // never print: the message reaches the Error

// libjpeg's text for JWRN_JPEG_EOF, which jpeg_mem_src raises when the data ends before EOI.
constexpr const char* kEndOfData = "Premature end of JPEG file";

// libjpeg codes that mean "a valid JPEG this build does not decode", not damage.
bool is_unsupported(int code) {
  return code == JERR_BAD_PRECISION || code == JERR_SOF_UNSUPPORTED || code == JERR_NOT_COMPILED ||
         code == JERR_CONVERSION_NOTIMPL || code == JERR_ARITH_NOTIMPL;
}

// A file cut short, named as such: libjpeg first warns "Premature end of JPEG file", then (when
// warnings do not stop it) may fail on the fake EOI marker it inserted with errors such as "Bogus
// Huffman table definition" that hide the real problem.
std::string truncation_cause(const JpegErrorManager& err, JpegPhase phase) {
  if (phase == JpegPhase::kScan && err.failed_on_warning) {
    // Strict: stopped at the end of the data, before knowing whether any row would be missing.
    return std::string("truncated JPEG: the file ends before its EOI marker (") + kEndOfData +
           "); DecodeOptions::strict refuses it even when every row is there";
  }
  std::string cause = phase == JpegPhase::kHeader ? "truncated JPEG: the file ends inside its header ("
                                                  : "truncated JPEG: the file ends before the last row to decode (";
  cause += kEndOfData;
  if (!err.failed_on_warning) cause += std::string(", then: ") + err.message;
  return cause + ")";
}

bool starts_with(std::span<const std::uint8_t> data, std::size_t offset, std::string_view sig) {
  if (data.size() < offset + sig.size()) return false;
  return std::equal(sig.begin(), sig.end(), data.begin() + static_cast<std::ptrdiff_t>(offset),
                    [](char a, std::uint8_t b) { return static_cast<std::uint8_t>(a) == b; });
}

}  // namespace

void JpegErrorManager::install(jpeg_decompress_struct& cinfo) {
  cinfo.err = jpeg_std_error(&pub);
  pub.error_exit = on_libjpeg_error;
  pub.emit_message = on_libjpeg_message;
  pub.output_message = on_libjpeg_output;
  arm(OnWarning::kStop);
}

void JpegErrorManager::arm(OnWarning policy) {
  on_warning = policy;
  failed_on_warning = false;
  failed_code = first_warning_code = warnings = 0;
  message[0] = warning[0] = '\0';
  data_ended = bits_made_up = own_huffman_gave_up = false;
  data_end_imcu_row = 0;
}

Error libjpeg_failure(const JpegErrorManager& err, JpegPhase phase) {
  if (!err.failed_on_warning && is_unsupported(err.failed_code)) {
    return Error(ErrorCode::kUnsupportedFormat, "unsupported JPEG: " + std::string(err.message));
  }
  if (err.data_ended) {
    return Error(ErrorCode::kCorruptData, truncation_cause(err, phase));
  }
  std::string cause = std::string(phase == JpegPhase::kHeader ? "damaged JPEG header: " : "corrupt JPEG data: ") +
                      err.message;
  if (err.failed_on_warning) cause += " (a libjpeg warning: DecodeOptions::strict makes it an error)";
  return Error(ErrorCode::kCorruptData, cause);
}

// Huffman decoders warn when they run out of bits (JWRN_HIT_MARKER). Arithmetic decoders stuff
// zeros without a word, and legitimately so at the end of every scan (the encoder drops trailing
// zero bytes), so an end of data while a scan's rows are being read cannot be told from a cut in
// them: it counts as rows missing (a cut three bytes before EOI changes the last row's pixels; Pillow
// refuses both). A progressive image is complete when every coefficient of every component has
// been refined down to bit 0 (coef_bits 0); a sequential image in several scans does not say which
// scans exist, so an early end there counts as missing scans.
Truncation truncation_of(jpeg_decompress_struct& cinfo, const JpegErrorManager& err) {
  if (!err.data_ended) return Truncation::kNone;
  if (err.bits_made_up) return Truncation::kRowsMissing;
  if (cinfo.arith_code && err.data_end_imcu_row < cinfo.total_iMCU_rows) return Truncation::kRowsMissing;
  if (cinfo.progressive_mode) {
    if (cinfo.coef_bits == nullptr) return Truncation::kScansMissing;
    for (int c = 0; c < cinfo.num_components; ++c) {
      for (int k = 0; k < DCTSIZE2; ++k) {
        if (cinfo.coef_bits[c][k] != 0) return Truncation::kScansMissing;
      }
    }
    return Truncation::kNone;
  }
  return jpeg_has_multiple_scans(&cinfo) ? Truncation::kScansMissing : Truncation::kNone;
}

Error truncation_failure(Truncation truncation) {
  const char* what = truncation == Truncation::kScansMissing
                         ? "truncated JPEG: the file ends before the last scan of its image ("
                         : "truncated JPEG: the file ends before the last row to decode (";
  return Error(ErrorCode::kCorruptData, std::string(what) + kEndOfData + ")");
}

// "not a JPEG" on a .jpg file is usually a mislabelled PNG or WebP: say which.
std::string describe_non_jpeg(std::span<const std::uint8_t> data) {
  using namespace std::string_view_literals;
  if (starts_with(data, 0, "\x89PNG\r\n\x1a\n"sv)) return "PNG image, not a JPEG";
  if (starts_with(data, 0, "GIF87a"sv) || starts_with(data, 0, "GIF89a"sv)) return "GIF image, not a JPEG";
  if (starts_with(data, 0, "RIFF"sv) && starts_with(data, 8, "WEBP"sv)) return "WebP image, not a JPEG";
  if (starts_with(data, 0, "BM"sv)) return "BMP image, not a JPEG";
  if (starts_with(data, 0, "II*\0"sv) || starts_with(data, 0, "MM\0*"sv)) return "TIFF image, not a JPEG";
  if (starts_with(data, 4, "ftyp"sv)) return "HEIF/AVIF or other ISO media file, not a JPEG";
  // The file's own bytes are never quoted: a path named .jpg may hold anything, a secret included,
  // and skip messages reach logs.
  return "not a JPEG: does not start with the SOI marker FF D8";
}

}  // namespace sluice::stages
