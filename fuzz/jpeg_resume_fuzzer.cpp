// jpeg_resume_fuzzer: the resume-point scanner and the splicer (stages/decode/jpeg_resume.hpp) on
// would-be JPEGs. Each input is a file: its markers parsed, its MCU rows' resume points found
// (in two steps, which must agree with one), and up to 8 of its rows spliced. A finding (the
// target aborts) is a crash or a sanitizer report, points that differ between the two scans, a
// splice whose tail lies outside the file or whose head is shorter than the markers it copies,
// or, for a file small enough to decode whole: a decode of the rows from a spliced row down
// through resume points (JpegDecoder, as the loader decodes a crop) whose pixels, warning count or
// error differ from decode()'s without points, and a spliced file without an appended DC code
// whose rows differ from the original's where both decode without a warning (margin: one MCU row,
// for fancy upsampling).
// Seeds: small TurboJPEG files of each subsampling and two qualities (write_seeds).
#include <turbojpeg.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "sluice/core/error.hpp"
#include "stages/decode/jpeg_decoder.hpp"
#include "fuzz_support.hpp"
#include "stages/decode/jpeg_resume.hpp"

namespace sluice::fuzz {

void write_seeds(const std::filesystem::path& folder) {
  const int w = 45, h = 37;
  std::vector<std::uint8_t> rgb(static_cast<std::size_t>(w) * h * 3);
  for (std::size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<std::uint8_t>((i * 7) ^ (i / 131));
  tjhandle tj = tjInitCompress();
  for (const int subsampling : {TJSAMP_444, TJSAMP_422, TJSAMP_420, TJSAMP_GRAY}) {
    for (const int quality : {50, 95}) {
      unsigned char* out = nullptr;
      unsigned long size = 0;
      if (tjCompress2(tj, rgb.data(), w, 0, h, TJPF_RGB, &out, &size, subsampling, quality, 0) == 0) {
        write_seed(folder, "jpeg-s" + std::to_string(subsampling) + "-q" + std::to_string(quality),
                   std::vector<std::uint8_t>(out, out + size));
      }
      tjFree(out);
    }
  }
  tjDestroy(tj);
}

}  // namespace sluice::fuzz

namespace {

using namespace sluice;
using namespace sluice::stages;

struct Decoded {
  bool ok = false;
  int width = 0, height = 0;
  std::vector<std::uint8_t> pixels;
};

Decoded decode_whole(JpegDecoder& decoder, std::span<const std::uint8_t> jpeg) {
  Decoded d;
  try {
    const JpegHeader h = decoder.read_header(jpeg);
    const Rect r = decoder.decoded_region(h, {});
    d.pixels.resize(static_cast<std::size_t>(r.width) * r.height * 3);
    decoder.decode(jpeg, h, {}, ImageView{d.pixels.data(), r.width, r.height, 3, static_cast<std::ptrdiff_t>(r.width) * 3});
    d.ok = decoder.warnings().count == 0;
    d.width = r.width;
    d.height = r.height;
  } catch (const Error& e) {
    sluice::fuzz::check_error(e, "decode");
  }
  return d;
}

// The rows from y down as the loader decodes a crop: JpegDecoder::decode with resume points
// (which splices where it can) must give decode()'s pixels, warnings and errors.
struct RegionDecode {
  std::vector<std::uint8_t> pixels;
  int warnings = 0;
  bool failed = false;
  ErrorCode error = ErrorCode::kInternal;
};

RegionDecode decode_region(JpegDecoder& decoder, std::span<const std::uint8_t> jpeg, int y, bool through_points) {
  RegionDecode d;
  try {
    const JpegHeader h = decoder.read_header(jpeg);
    JpegRequest request;
    request.region = {0, y, h.width, h.height - y};
    const Rect r = decoder.decoded_region(h, request);
    d.pixels.resize(static_cast<std::size_t>(r.width) * r.height * 3);
    const ImageView out{d.pixels.data(), r.width, r.height, 3, static_cast<std::ptrdiff_t>(r.width) * 3};
    std::vector<ResumePoint> points;
    if (through_points) {
      decoder.decode(jpeg, h, request, out, points);
    } else {
      decoder.decode(jpeg, h, request, out);
    }
    d.warnings = decoder.warnings().count;
  } catch (const Error& e) {
    sluice::fuzz::check_error(e, "decode from points");
    d.failed = true;
    d.error = e.code();
  }
  return d;
}

void check_decode_from_points(JpegDecoder& decoder, std::span<const std::uint8_t> jpeg, int y) {
  const RegionDecode want = decode_region(decoder, jpeg, y, false);
  const RegionDecode got = decode_region(decoder, jpeg, y, true);
  const std::string at = "rows from " + std::to_string(y) + ": ";
  if (want.failed != got.failed || (want.failed && want.error != got.error)) {
    sluice::fuzz::finding("decode from points", at + (got.failed ? "fails" : "succeeds") + " where decode() " +
                                                    (want.failed ? "fails" : "succeeds") + " (or another error)");
  }
  if (want.failed) return;
  if (want.warnings != got.warnings) {
    sluice::fuzz::finding("decode from points", at + std::to_string(got.warnings) + " warnings against decode()'s " +
                                                    std::to_string(want.warnings));
  }
  if (want.pixels != got.pixels) sluice::fuzz::finding("decode from points", at + "pixels differ from decode()'s");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> jpeg(data, size);
  ScanLayout layout;
  if (!parse_scan_layout(jpeg, layout)) return 0;
  if (layout.scan_offset > size || layout.height_offset + 2 > layout.sos_offset || layout.sos_offset > layout.scan_offset) {
    sluice::fuzz::finding("layout", "scan " + std::to_string(layout.scan_offset) + ", height field " +
                                         std::to_string(layout.height_offset) + ", SOS " + std::to_string(layout.sos_offset) +
                                         ", size " + std::to_string(size));
  }
  std::vector<ResumePoint> all, steps;
  const int rows = layout.mcu_rows - 1;
  const int found = scan_resume_points(jpeg, layout, rows, all);
  scan_resume_points(jpeg, layout, rows / 2, steps);
  scan_resume_points(jpeg, layout, rows, steps);
  if (found != static_cast<int>(all.size()) || all.size() != steps.size()) {
    sluice::fuzz::finding("scan", "found " + std::to_string(found) + ", one scan " + std::to_string(all.size()) +
                                      " points, two steps " + std::to_string(steps.size()));
  }
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i].byte != steps[i].byte || all[i].bit != steps[i].bit || all[i].dc[0] != steps[i].dc[0]) {
      sluice::fuzz::finding("scan", "point " + std::to_string(i) + " differs between one scan and two steps");
    }
    if (all[i].byte > size) sluice::fuzz::finding("scan", "point " + std::to_string(i) + " past the file's end");
  }
  const bool small = static_cast<std::int64_t>(layout.width) * layout.height <= 256 * 256;
  DecodeOptions options;
  options.max_image_pixels = 256 * 256;
  JpegDecoder decoder(options);
  Decoded whole;
  if (small) whole = decode_whole(decoder, jpeg);
  const int step = std::max(1, found / 8);
  for (int row = 1; row < found; row += step) {
    Splice s;
    if (!splice_at(jpeg, layout, row, all[static_cast<std::size_t>(row)], s)) continue;
    if (s.tail_offset > size || s.head.size() < layout.scan_offset || s.first_row != row * layout.mcu_height) {
      sluice::fuzz::finding("splice", "row " + std::to_string(row) + ": tail " + std::to_string(s.tail_offset) + " of " +
                                          std::to_string(size) + ", head " + std::to_string(s.head.size()) + " bytes, first row " +
                                          std::to_string(s.first_row));
    }
    if (small) check_decode_from_points(decoder, jpeg, row * layout.mcu_height);
    if (!whole.ok) continue;
    // A spliced file with an appended DC code is only the original where the data below holds no
    // code the original's table lacks (AppendedDcCode); the decode above covers it.
    if (s.appended.any()) continue;
    std::vector<std::uint8_t> cut = s.head;
    cut.insert(cut.end(), jpeg.begin() + s.tail_offset, jpeg.end());
    const Decoded part = decode_whole(decoder, cut);
    if (!part.ok) continue;
    if (part.width != whole.width || part.height != whole.height - s.first_row) {
      sluice::fuzz::finding("splice", "row " + std::to_string(row) + ": spliced file " + std::to_string(part.width) + "x" +
                                          std::to_string(part.height) + ", whole " + std::to_string(whole.width) + "x" +
                                          std::to_string(whole.height));
    }
    const std::size_t line = static_cast<std::size_t>(whole.width) * 3;
    for (int y = layout.mcu_height; y < part.height; ++y) {
      const std::uint8_t* a = whole.pixels.data() + (static_cast<std::size_t>(y) + s.first_row) * line;
      const std::uint8_t* b = part.pixels.data() + static_cast<std::size_t>(y) * line;
      for (std::size_t i = 0; i < line; ++i) {
        if (a[i] != b[i]) {
          sluice::fuzz::finding("splice", "row " + std::to_string(row) + ": pixel row " + std::to_string(y) + " byte " +
                                              std::to_string(i) + " differs from the whole decode's");
        }
      }
    }
  }
  return 0;
}
