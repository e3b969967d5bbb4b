// Byte edits on JPEG marker structure, libjpeg-written CMYK/YCCK files, and cjpeg/jpegtran runs.
#include "jpeg_edits.hpp"

#include <csetjmp>
#include <cstdio>  // jpeglib.h needs FILE and size_t declared first
#include <cstdlib>
#include <stdexcept>

#include <jpeglib.h>

#include "test_support.hpp"

namespace sluice::test {

namespace {

// The entropy-coded data after an SOS ends at the first marker that is neither a stuffed zero
// (FF 00), a restart marker (FF D0-D7) nor fill (FF FF).
std::size_t scan_data_end(const Bytes& d, std::size_t i) {
  while (i + 1 < d.size()) {
    if (d[i] == 0xFF && d[i + 1] != 0x00 && d[i + 1] != 0xFF && !(d[i + 1] >= 0xD0 && d[i + 1] <= 0xD7)) return i;
    ++i;
  }
  return d.size();
}

const JpegSegment& nth_scan_data(const std::vector<JpegSegment>& segments, int scan) {
  int seen = 0;
  for (const JpegSegment& s : segments) {
    if (s.marker == 0 && seen++ == scan) return s;
  }
  throw std::invalid_argument("the JPEG has no scan " + std::to_string(scan));
}

const JpegSegment& nth_sos(const std::vector<JpegSegment>& segments, int scan) {
  int seen = 0;
  for (const JpegSegment& s : segments) {
    if (s.marker == 0xDA && seen++ == scan) return s;
  }
  throw std::invalid_argument("the JPEG has no scan " + std::to_string(scan));
}

Bytes splice(const Bytes& d, std::size_t from, std::size_t to, const Bytes& insert = {}) {
  Bytes out(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(from));
  out.insert(out.end(), insert.begin(), insert.end());
  out.insert(out.end(), d.begin() + static_cast<std::ptrdiff_t>(to), d.end());
  return out;
}

bool have_program(const char* name) {
  return std::system((std::string("command -v ") + name + " >/dev/null 2>&1").c_str()) == 0;
}

struct JumpingErrors {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
};

[[noreturn]] void jump_on_error(j_common_ptr cinfo) { std::longjmp(reinterpret_cast<JumpingErrors*>(cinfo->err)->jump, 1); }

// libjpeg may longjmp out: nothing here owns a destructor; the caller frees `out`.
bool compress_cmyk(const std::uint8_t* cmyk, int width, int height, InkSpace space, int quality, unsigned char** out,
                   unsigned long* size) {
  jpeg_compress_struct c{};
  JumpingErrors err{};
  c.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = jump_on_error;
  if (setjmp(err.jump) != 0) {
    jpeg_destroy_compress(&c);
    return false;
  }
  jpeg_create_compress(&c);
  jpeg_mem_dest(&c, out, size);
  c.image_width = static_cast<JDIMENSION>(width);
  c.image_height = static_cast<JDIMENSION>(height);
  c.input_components = 4;
  c.in_color_space = JCS_CMYK;
  jpeg_set_defaults(&c);
  jpeg_set_colorspace(&c, space == InkSpace::kYcck ? JCS_YCCK : JCS_CMYK);  // writes the Adobe marker
  jpeg_set_quality(&c, quality, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    auto* row = const_cast<JSAMPLE*>(cmyk + static_cast<std::size_t>(c.next_scanline) * width * 4);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  return true;
}

}  // namespace

std::vector<JpegSegment> jpeg_segments(const Bytes& d) {
  std::vector<JpegSegment> out;
  std::size_t i = 2;
  while (i + 1 < d.size()) {
    if (d[i] != 0xFF) throw std::invalid_argument("no marker at byte " + std::to_string(i));
    const std::uint8_t marker = d[i + 1];
    if (marker == 0xD9) {
      out.push_back({i, marker, 2});
      break;
    }
    if (i + 3 >= d.size()) break;
    const std::size_t length = 2 + (static_cast<std::size_t>(d[i + 2]) << 8 | d[i + 3]);
    out.push_back({i, marker, length});
    i += length;
    if (marker == 0xDA) {
      const std::size_t end = scan_data_end(d, i);
      out.push_back({i, 0, end - i});
      i = end;
    }
  }
  return out;
}

Bytes with_junk_before_marker(const Bytes& jpeg, std::uint8_t marker, std::size_t count) {
  for (const JpegSegment& s : jpeg_segments(jpeg)) {
    if (s.marker == marker) {
      Bytes junk(count);
      for (std::size_t k = 0; k < count; ++k) junk[k] = static_cast<std::uint8_t>(0x21 + k % 64);  // never FF
      return splice(jpeg, s.offset, s.offset, junk);
    }
  }
  throw std::invalid_argument("no such marker");
}

Bytes with_junk_after_eoi(const Bytes& jpeg) {
  Bytes out = jpeg;
  const std::string junk = "trailing bytes a camera or an uploader appended";
  out.insert(out.end(), junk.begin(), junk.end());
  out.insert(out.end(), {0xFF, 0xD8, 0xFF});  // even the start of another image
  return out;
}

Bytes without_eoi(const Bytes& jpeg) { return Bytes(jpeg.begin(), jpeg.end() - 2); }

Bytes cut_at(const Bytes& jpeg, std::size_t size) {
  return Bytes(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(size));
}

Bytes with_cut_scan(const Bytes& jpeg, int scan, double keep) {
  const auto segments = jpeg_segments(jpeg);
  const JpegSegment& data = nth_scan_data(segments, scan);
  const auto kept = static_cast<std::size_t>(static_cast<double>(data.length) * keep);
  std::size_t from = data.offset + kept;
  if (from > data.offset && jpeg[from - 1] == 0xFF) --from;  // never leave half a marker or stuffed byte
  return splice(jpeg, from, data.offset + data.length);
}

Bytes cut_in_scan(const Bytes& jpeg, int scan, double keep) {
  const auto segments = jpeg_segments(jpeg);
  const JpegSegment& data = nth_scan_data(segments, scan);
  return cut_at(jpeg, data.offset + static_cast<std::size_t>(static_cast<double>(data.length) * keep));
}

Bytes with_zeroed_scan_bytes(const Bytes& jpeg, int scan, double at, std::size_t count) {
  const auto segments = jpeg_segments(jpeg);
  const JpegSegment& data = nth_scan_data(segments, scan);
  Bytes out = jpeg;
  const std::size_t from = data.offset + static_cast<std::size_t>(static_cast<double>(data.length) * at);
  for (std::size_t k = from; k < from + count && k < data.offset + data.length; ++k) {
    if (out[k] == 0xFF) continue;  // keep markers (and stuffing) where they are
    if (k > 0 && out[k - 1] == 0xFF) continue;
    out[k] = 0;
  }
  return out;
}

Bytes without_scan(const Bytes& jpeg, int scan) {
  const auto segments = jpeg_segments(jpeg);
  const JpegSegment& sos = nth_sos(segments, scan);
  const JpegSegment& data = nth_scan_data(segments, scan);
  return splice(jpeg, sos.offset, data.offset + data.length);
}

Bytes without_segments(const Bytes& jpeg, std::uint8_t marker) {
  Bytes out(jpeg.begin(), jpeg.begin() + 2);
  std::size_t kept_from = 2;
  for (const JpegSegment& s : jpeg_segments(jpeg)) {
    if (s.marker == 0xDA) break;
    if (s.marker != marker) continue;
    out.insert(out.end(), jpeg.begin() + static_cast<std::ptrdiff_t>(kept_from), jpeg.begin() + static_cast<std::ptrdiff_t>(s.offset));
    kept_from = s.offset + s.length;
  }
  out.insert(out.end(), jpeg.begin() + static_cast<std::ptrdiff_t>(kept_from), jpeg.end());
  return out;
}

Bytes cut_before_scan(const Bytes& jpeg, int scan) {
  const auto segments = jpeg_segments(jpeg);
  return cut_at(jpeg, nth_sos(segments, scan).offset);
}

Bytes encode_cmyk_libjpeg(const Bytes& cmyk, int width, int height, InkSpace space, int quality) {
  unsigned char* out = nullptr;
  unsigned long size = 0;
  const bool ok = compress_cmyk(cmyk.data(), width, height, space, quality, &out, &size);
  Bytes jpeg(out, out + (ok ? size : 0));
  std::free(out);
  if (!ok) throw std::runtime_error("libjpeg could not write the CMYK test image");
  return jpeg;
}

std::optional<Bytes> run_cjpeg(const Bytes& pixels, int width, int height, const std::string& args,
                               const std::filesystem::path& scratch) {
  if (!have_program("cjpeg")) return std::nullopt;
  const std::string header = "P6\n" + std::to_string(width) + " " + std::to_string(height) + "\n255\n";
  Bytes ppm(header.begin(), header.end());
  ppm.insert(ppm.end(), pixels.begin(), pixels.end());
  const auto in = scratch / "cjpeg-in.ppm";
  const auto out = scratch / "cjpeg-out.jpg";
  write_bytes(in, ppm);
  const std::string command = "cjpeg " + args + " -outfile '" + out.string() + "' '" + in.string() + "'";
  if (std::system(command.c_str()) != 0) throw std::runtime_error("failed: " + command);
  return read_bytes(out);
}

std::optional<Bytes> run_jpegtran(const Bytes& jpeg, const std::string& args, const std::filesystem::path& scratch) {
  if (!have_program("jpegtran")) return std::nullopt;
  const auto in = scratch / "jpegtran-in.jpg";
  const auto out = scratch / "jpegtran-out.jpg";
  write_bytes(in, jpeg);
  const std::string command = "jpegtran " + args + " -outfile '" + out.string() + "' '" + in.string() + "'";
  if (std::system(command.c_str()) != 0) throw std::runtime_error("failed: " + command);
  return read_bytes(out);
}

}  // namespace sluice::test
