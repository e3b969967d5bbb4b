// libjpeg's error and message callbacks for JpegDecoder, and the causes its failures are given.
#include "stages/jpeg_errors.hpp"

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

// libjpeg codes that mean "a valid JPEG this build does not decode", not damage.
bool is_unsupported(int code) {
  return code == JERR_BAD_PRECISION || code == JERR_SOF_UNSUPPORTED || code == JERR_NOT_COMPILED ||
         code == JERR_CONVERSION_NOTIMPL || code == JERR_ARITH_NOTIMPL;
}

// A file cut short, named as such: libjpeg first warns "Premature end of JPEG file", then (when
// warnings do not stop it) fails on the fake EOI marker it inserted with errors such as "Bogus
// Huffman table definition" that hide the real problem.
std::string truncation_cause(const JpegErrorManager& err, JpegPhase phase) {
  std::string cause = phase == JpegPhase::kHeader ? "truncated JPEG: the file ends inside its header ("
                                                  : "truncated JPEG: the file ends before the last row to decode (";
  cause += err.warning;
  if (!err.failed_on_warning) cause += std::string(", then: ") + err.message;
  cause += ")";
  if (err.failed_on_warning && phase == JpegPhase::kScan) {
    cause += "; DecodeOptions::accept_warnings decodes what is there";
  }
  return cause;
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
}

Error libjpeg_failure(const JpegErrorManager& err, JpegPhase phase) {
  if (!err.failed_on_warning && is_unsupported(err.failed_code)) {
    return Error(ErrorCode::kUnsupportedFormat, "unsupported JPEG: " + std::string(err.message));
  }
  if (err.warnings > 0 && err.first_warning_code == JWRN_JPEG_EOF) {
    return Error(ErrorCode::kCorruptData, truncation_cause(err, phase));
  }
  std::string cause = std::string(phase == JpegPhase::kHeader ? "damaged JPEG header: " : "corrupt JPEG data: ") +
                      err.message;
  if (err.failed_on_warning) cause += " (a libjpeg warning; DecodeOptions::accept_warnings ignores it)";
  return Error(ErrorCode::kCorruptData, cause);
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
  std::string cause = "not a JPEG: does not start with the SOI marker FF D8 (starts with";
  char hex[4];
  for (std::size_t i = 0; i < std::min<std::size_t>(data.size(), 4); ++i) {
    std::snprintf(hex, sizeof hex, " %02X", data[i]);
    cause += hex;
  }
  return cause + ")";
}

}  // namespace sluice::stages
