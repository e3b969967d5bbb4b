// jpeg_resume_fuzzer: the resume-point scanner and the splicer (stages/decode/jpeg_resume.hpp) on
// would-be JPEGs. Each input is a file: its markers parsed, its MCU rows' resume points found
// (in two steps, which must agree with one), and up to 8 of its rows spliced. A finding (the
// target aborts) is a crash or a sanitizer report, points that differ between the two scans, a
// splice whose tail lies outside the file or whose head is shorter than the markers it copies,
// or, for a file small enough to decode whole, a spliced file whose rows differ from the
// original's where both decode without a warning (margin: one MCU row, for fancy upsampling).
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> jpeg(data, size);
  ScanLayout layout;
  if (!parse_scan_layout(jpeg, layout)) return 0;
  if (layout.scan_offset > size || layout.height_offset + 2 > layout.sos_offset || layout.sos_offset > layout.scan_offset) {
    std::abort();
  }
  std::vector<ResumePoint> all, steps;
  const int rows = layout.mcu_rows - 1;
  const int found = scan_resume_points(jpeg, layout, rows, all);
  scan_resume_points(jpeg, layout, rows / 2, steps);
  scan_resume_points(jpeg, layout, rows, steps);
  if (found != static_cast<int>(all.size()) || all.size() != steps.size()) std::abort();
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i].byte != steps[i].byte || all[i].bit != steps[i].bit || all[i].dc[0] != steps[i].dc[0]) std::abort();
    if (all[i].byte > size) std::abort();
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
    if (s.tail_offset > size || s.head.size() < layout.scan_offset || s.first_row != row * layout.mcu_height) std::abort();
    if (!whole.ok) continue;
    std::vector<std::uint8_t> cut = s.head;
    cut.insert(cut.end(), jpeg.begin() + s.tail_offset, jpeg.end());
    const Decoded part = decode_whole(decoder, cut);
    if (!part.ok) continue;
    if (part.width != whole.width || part.height != whole.height - s.first_row) std::abort();
    const std::size_t line = static_cast<std::size_t>(whole.width) * 3;
    for (int y = layout.mcu_height; y < part.height; ++y) {
      const std::uint8_t* a = whole.pixels.data() + (static_cast<std::size_t>(y) + s.first_row) * line;
      const std::uint8_t* b = part.pixels.data() + static_cast<std::size_t>(y) * line;
      for (std::size_t i = 0; i < line; ++i) {
        if (a[i] != b[i]) std::abort();
      }
    }
  }
  return 0;
}
