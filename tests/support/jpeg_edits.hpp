// JPEGs as users' data sets hold them, made in the test: byte edits that damage a file the way
// files in the wild are damaged (junk between markers, a cut scan, a missing EOI marker, ...),
// CMYK and YCCK files written through libjpeg's API, and files written by Debian's cjpeg and
// jpegtran (libjpeg-turbo-progs) for the encodings TurboJPEG cannot write (arithmetic coding,
// restart markers, 4:1:1 and 4:4:0 subsampling). Nothing here is committed as a binary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace sluice::test {

using Bytes = std::vector<std::uint8_t>;

// One marker segment of a JPEG (offset of its FF, marker byte, bytes including FF and marker), or
// the entropy-coded data that follows an SOS (marker 0, restart markers inside).
struct JpegSegment {
  std::size_t offset = 0;
  std::uint8_t marker = 0;
  std::size_t length = 0;
};
std::vector<JpegSegment> jpeg_segments(const Bytes& jpeg);

// Each returns a damaged copy. `scan` counts the file's scans from 0.
Bytes with_junk_before_marker(const Bytes& jpeg, std::uint8_t marker, std::size_t count);  // the first such marker
Bytes with_junk_after_eoi(const Bytes& jpeg);
Bytes without_eoi(const Bytes& jpeg);
Bytes cut_at(const Bytes& jpeg, std::size_t size);  // the first `size` bytes, nothing after
// The scan's data cut to `keep` (0-1) of its length; the rest of the file (next markers, EOI) kept.
Bytes with_cut_scan(const Bytes& jpeg, int scan, double keep);
// The file cut inside the scan's data, at `keep` (0-1) of its length: nothing after.
Bytes cut_in_scan(const Bytes& jpeg, int scan, double keep);
// `count` bytes of the scan's data from `at` (0-1) of its length set to zero.
Bytes with_zeroed_scan_bytes(const Bytes& jpeg, int scan, double at, std::size_t count);
Bytes without_scan(const Bytes& jpeg, int scan);  // its SOS and data (and DHTs right before it kept)
// Every segment with this marker before the first scan removed (a DQT, or a DHT as in MJPEG frames).
Bytes without_segments(const Bytes& jpeg, std::uint8_t marker);
// The file cut right before the scan's SOS marker: the scans before it complete, no EOI.
Bytes cut_before_scan(const Bytes& jpeg, int scan);

// CMYK pixels (4 channels, as Adobe applications store them: inverted) written through libjpeg's
// API with an Adobe marker, as plain CMYK or as YCCK.
enum class InkSpace : std::uint8_t { kCmyk, kYcck };
Bytes encode_cmyk_libjpeg(const Bytes& cmyk, int width, int height, InkSpace space, int quality = 90);

// Writes `pixels` (3 channels) as a PPM, runs Debian's cjpeg with `args` on it and returns the
// JPEG; nullopt when cjpeg is not installed (the caller skips). jpegtran likewise on a JPEG.
std::optional<Bytes> run_cjpeg(const Bytes& pixels, int width, int height, const std::string& args,
                               const std::filesystem::path& scratch);
std::optional<Bytes> run_jpegtran(const Bytes& jpeg, const std::string& args, const std::filesystem::path& scratch);

}  // namespace sluice::test
