// The image formats the decode stage reads, told apart by their first bytes (never by the file's
// name), and the small interface every format's decoder implements besides JPEG's, which keeps its
// own richer one (jpeg_decoder.hpp: DCT scaling, regions, bands). A FormatDecoder works like a
// DALI kernel: probe() reads the header only and says what the image is, workspace_requirements()
// says what decode() will allocate for it, and decode() fills an output the caller already holds.
//
// Every decoder produces what Pillow's Image.open(f).convert("RGB") (or convert("L")) gives for
// 8-bit data: alpha dropped, palettes expanded, grey replicated, and RGB to grey with Pillow's
// weights (rgb_to_grey below). Internal to src/stages.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "sluice/detail/core/image.hpp"
#include "sluice/detail/memory/aligned_buffer.hpp"

namespace sluice::stages {

enum class ImageFormat : std::uint8_t { kUnknown, kJpeg, kPng, kWebp, kGif, kBmp, kPnm, kTiff };
inline constexpr int kImageFormatCount = 8;

// The format the bytes start like; kUnknown when none matches.
ImageFormat sniff_format(std::span<const std::uint8_t> bytes);
// "JPEG", "PNG", ... ("unknown").
std::string_view format_name(ImageFormat format);
// The format a file name's extension promises (any case); kUnknown for any other extension.
ImageFormat format_of_extension(std::string_view path);

// What a format's header says about its image.
struct ImageProbe {
  ImageFormat format = ImageFormat::kUnknown;
  int width = 0;   // of the image decode() produces (a GIF's canvas, a WebP animation's canvas)
  int height = 0;
  int channels = 0;       // stored: 1 grey, 2 grey+alpha, 3 colour, 4 colour+alpha or CMYK
  int bit_depth = 8;      // per stored sample (1 to 16)
  bool alpha = false;     // an alpha channel or a transparent colour (dropped by the decode)
  bool palette = false;
  bool animated = false;  // more than one frame (the decode takes the first)
  bool interlaced = false;
  int rows_per_band = 0;  // rows the decoder reads at a time, where the format sets it (TIFF)
  // Set by a decoder that keeps its parsed header for the decode() that follows (PNG): a decode of
  // the same bytes with this probe goes on from there instead of parsing the header again.
  std::uint64_t token = 0;
  // The compressed image data's bytes, where the decoder needs them in one piece (PNG's IDAT
  // chunks joined for one inflate call); 0 elsewhere.
  std::uint64_t coded_bytes = 0;
};

// What a decoder warned about in its last call, when that call succeeded: counted as recovered.
struct FormatWarnings {
  int count = 0;
  std::string first;
};

class FormatDecoder {
 public:
  virtual ~FormatDecoder() = default;
  // Parses the header only. Throws sluice::Error without a path: kCorruptData for a damaged or
  // truncated header, kUnsupportedFormat for a variant this decoder does not read. The caller
  // checks the size against max_image_pixels before anything else is allocated.
  virtual ImageProbe probe(std::span<const std::uint8_t> bytes) = 0;
  // The bytes decode() takes from `scratch` for this image and output channel count (beyond the
  // output itself): a row, a band, or a whole image where the format allows nothing less. The
  // format library's own small state (zlib windows, tables) stays outside, as libjpeg's does.
  virtual std::uint64_t workspace_requirements(const ImageProbe& probe, int out_channels) const = 0;
  // Decodes the first frame into `out` (probe's size, 1 or 3 channels, any stride), reserving
  // workspace_requirements() of `scratch` first. Throws sluice::Error without a path:
  // kCorruptData with the library's own message for damaged data.
  virtual void decode(std::span<const std::uint8_t> bytes, const ImageProbe& probe, ImageView out,
                      AlignedBuffer& scratch) = 0;
  // Row bands, for an image too large to hold at once, where the format gives its rows in order
  // (PNG without interlacing): begin_rows() says whether it can for this image; read_rows() fills
  // `rows` (full width, 1 or 3 channels) with the next rows, top to bottom, taking no more of
  // `scratch` than workspace_requirements(); end_rows() after the last. The pixels are decode()'s.
  virtual bool begin_rows(std::span<const std::uint8_t> /*bytes*/, const ImageProbe& /*probe*/) { return false; }
  virtual void read_rows(ImageView /*rows*/, AlignedBuffer& /*scratch*/) {}
  virtual void end_rows() {}
  // What the last probe() or decode() warned about.
  const FormatWarnings& warnings() const { return warnings_; }

 protected:
  void clear_warnings() {
    warnings_.count = 0;
    warnings_.first.clear();
  }
  void warn(std::string_view message) {
    if (warnings_.count++ == 0) warnings_.first = std::string(message);
  }

 private:
  FormatWarnings warnings_;
};

std::unique_ptr<FormatDecoder> make_png_decoder();
std::unique_ptr<FormatDecoder> make_webp_decoder();
std::unique_ptr<FormatDecoder> make_gif_decoder();
std::unique_ptr<FormatDecoder> make_bmp_decoder();
std::unique_ptr<FormatDecoder> make_pnm_decoder();
std::unique_ptr<FormatDecoder> make_tiff_decoder();

// Pillow's RGB to L (ITU-R 601-2 luma, in 16-bit fixed point, rounded): its convert("L").
inline std::uint8_t rgb_to_grey(int r, int g, int b) {
  return static_cast<std::uint8_t>((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16);
}

// One row of RGB pixels into an output row of 3 (copied) or 1 (rgb_to_grey) channels.
void store_rgb_row(const std::uint8_t* rgb, int width, std::uint8_t* out, int out_channels);

// An RGB palette expanded into an output row: index i of `indices` is palette entry i (entries
// past `colors` are black).
void store_palette_row(const std::uint8_t* indices, int width, const std::uint8_t* palette_rgb, int colors,
                       std::uint8_t* out, int out_channels);

// kCorruptData "truncated <format> file: ..." and the like, as one place words them.
[[noreturn]] void corrupt(ImageFormat format, const std::string& what);
[[noreturn]] void unsupported(ImageFormat format, const std::string& what);

}  // namespace sluice::stages
