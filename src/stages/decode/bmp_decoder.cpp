// BMP, hand-written: Debian has no BMP library of its own (libstb's loader skips RLE and 1-bit
// files; ImageMagick and GDAL are whole toolkits), and the format is a header and rows. It reads
// what Pillow's BmpImagePlugin reads, with Pillow's pixels: OS/2 (12-byte) and Windows (40, 64,
// 108, 124-byte) headers; 1/4/8-bit palettes (3- or 4-byte entries), RLE8 and RLE4; 16-bit 5-5-5
// and 5-6-5 (BI_RGB or bitfields, expanded as Pillow does: v * 255 / 31, integer division);
// 24-bit; 32-bit BI_RGB and the bitfield layouts Pillow knows (alpha dropped); bottom-up and
// top-down rows. Other bitfield layouts and compressions are unsupported, as in Pillow. RLE data
// that ends before the last pixel is refused, as Pillow refuses it; the encoded runs are clamped
// at the row's end as Pillow clamps them. Rows decode straight into the output: no workspace but
// the palette.
#include <algorithm>
#include <cstring>
#include <string>

#include "sluice/core/error.hpp"
#include "stages/decode/image_format.hpp"

namespace sluice::stages {

namespace {

constexpr ImageFormat kBmp = ImageFormat::kBmp;
constexpr std::uint32_t kRgb = 0, kRle8 = 1, kRle4 = 2, kBitfields = 3, kAlphaBitfields = 6;

std::uint32_t le32(const std::uint8_t* p) {
  return std::uint32_t{p[0]} | (std::uint32_t{p[1]} << 8) | (std::uint32_t{p[2]} << 16) | (std::uint32_t{p[3]} << 24);
}
std::uint16_t le16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] | (p[1] << 8)); }

// How a 16- or 32-bit pixel's bytes become RGB.
enum class Packing : std::uint8_t { kPalette, kBgr15, kBgr16, kBgr, kBgrx, kXbgr, kRgba };

struct Header {
  int width = 0;
  int height = 0;
  bool top_down = false;
  int bits = 0;
  std::uint32_t compression = kRgb;
  std::uint64_t pixels_at = 0;  // offset of the pixel data
  std::uint64_t palette_at = 0;
  int palette_entry = 4;        // bytes per palette entry (3 in OS/2 files)
  int colors = 0;
  Packing packing = Packing::kPalette;
};

Packing packing_of(int bits, std::uint32_t r, std::uint32_t g, std::uint32_t b, std::uint32_t a) {
  if (bits == 32) {
    if (r == 0xFF0000 && g == 0xFF00 && b == 0xFF) return Packing::kBgrx;  // BGRX or BGRA
    if (r == 0xFF000000 && g == 0xFF0000 && b == 0xFF00) return Packing::kXbgr;  // XBGR or ABGR
    if (r == 0xFF && g == 0xFF00 && b == 0xFF0000 && a == 0xFF000000) return Packing::kRgba;
    if (r == 0 && g == 0 && b == 0 && a == 0) return Packing::kBgrx;
  }
  if (bits == 24 && r == 0xFF0000 && g == 0xFF00 && b == 0xFF) return Packing::kBgr;
  if (bits == 16 && r == 0xF800 && g == 0x7E0 && b == 0x1F) return Packing::kBgr16;
  if (bits == 16 && r == 0x7C00 && g == 0x3E0 && b == 0x1F) return Packing::kBgr15;
  unsupported(kBmp, "bitfields layout of " + std::to_string(bits) + "-bit pixels");
}

Header parse(std::span<const std::uint8_t> bytes) {
  if (bytes.size() < 26) corrupt(kBmp, "truncated file (no complete header)");
  const std::uint8_t* p = bytes.data();
  Header h;
  h.pixels_at = le32(p + 10);
  const std::uint32_t header_size = le32(p + 14);
  if (header_size != 12 && header_size != 40 && header_size != 64 && header_size != 108 && header_size != 124) {
    unsupported(kBmp, "header of " + std::to_string(header_size) + " bytes");
  }
  if (bytes.size() < 14 + std::uint64_t{header_size}) corrupt(kBmp, "truncated file (header cut short)");
  const std::uint8_t* d = p + 14;
  std::uint32_t masks[4] = {0, 0, 0, 0};
  if (header_size == 12) {
    h.width = le16(d + 4);
    h.height = le16(d + 6);
    h.bits = le16(d + 10);
    h.palette_entry = 3;
  } else {
    const auto width = static_cast<std::int32_t>(le32(d + 4));
    const auto height = static_cast<std::int32_t>(le32(d + 8));
    h.top_down = height < 0;
    h.width = width;
    h.height = height == INT32_MIN ? -1 : (height < 0 ? -height : height);
    h.bits = le16(d + 14);
    h.compression = le32(d + 16);
    h.colors = static_cast<int>(std::min<std::uint32_t>(le32(d + 32), 1u << 17));
    if (h.compression == kBitfields || h.compression == kAlphaBitfields) {
      const std::uint8_t* m = d + 40;
      if (header_size == 40) {  // the masks follow the header
        const std::size_t count = h.compression == kAlphaBitfields ? 4 : 3;
        if (bytes.size() < 54 + 4 * count) corrupt(kBmp, "truncated file (bitfield masks cut short)");
      }
      masks[0] = le32(m);
      masks[1] = le32(m + 4);
      masks[2] = le32(m + 8);
      if (header_size >= 56 || h.compression == kAlphaBitfields) masks[3] = le32(m + 12);
    }
  }
  if (h.width <= 0 || h.height <= 0) corrupt(kBmp, "the image has no pixels");
  h.palette_at = 14 + std::uint64_t{header_size};
  switch (h.bits) {
    case 1: case 4: case 8: h.packing = Packing::kPalette; break;
    case 16: h.packing = Packing::kBgr15; break;
    case 24: h.packing = Packing::kBgr; break;
    case 32: h.packing = Packing::kBgrx; break;
    default: unsupported(kBmp, std::to_string(h.bits) + "-bit pixels");
  }
  if (h.compression == kBitfields || h.compression == kAlphaBitfields) {
    h.packing = packing_of(h.bits, masks[0], masks[1], masks[2], masks[3]);
  } else if (h.compression == kRle8 || h.compression == kRle4) {
    if (h.bits != (h.compression == kRle8 ? 8 : 4)) corrupt(kBmp, "RLE compression with " + std::to_string(h.bits) + "-bit pixels");
  } else if (h.compression != kRgb) {
    unsupported(kBmp, "compression " + std::to_string(h.compression));
  }
  if (h.packing == Packing::kPalette) {
    if (h.colors == 0) h.colors = 1 << h.bits;
    if (h.colors > 65536) corrupt(kBmp, "palette of " + std::to_string(h.colors) + " colours");
    if (h.pixels_at == h.palette_at) h.pixels_at += 4 * static_cast<std::uint64_t>(h.colors);  // as Pillow reads it
    if (h.palette_at + static_cast<std::uint64_t>(h.palette_entry) * h.colors > bytes.size()) {
      corrupt(kBmp, "truncated file (palette cut short)");
    }
  }
  if (h.pixels_at > bytes.size()) corrupt(kBmp, "truncated file (the pixel data starts past the end)");
  return h;
}

void store_pixels(const std::uint8_t* in, int width, Packing packing, std::uint8_t* out, int channels) {
  for (int x = 0; x < width; ++x) {
    int r = 0, g = 0, b = 0;
    switch (packing) {
      case Packing::kBgr15: {
        const int v = in[2 * x] | (in[2 * x + 1] << 8);
        b = (v & 31) * 255 / 31;
        g = ((v >> 5) & 31) * 255 / 31;
        r = ((v >> 10) & 31) * 255 / 31;
        break;
      }
      case Packing::kBgr16: {
        const int v = in[2 * x] | (in[2 * x + 1] << 8);
        b = (v & 31) * 255 / 31;
        g = ((v >> 5) & 63) * 255 / 63;
        r = ((v >> 11) & 31) * 255 / 31;
        break;
      }
      case Packing::kBgr: b = in[3 * x]; g = in[3 * x + 1]; r = in[3 * x + 2]; break;
      case Packing::kBgrx: b = in[4 * x]; g = in[4 * x + 1]; r = in[4 * x + 2]; break;
      case Packing::kXbgr: b = in[4 * x + 1]; g = in[4 * x + 2]; r = in[4 * x + 3]; break;
      case Packing::kRgba: r = in[4 * x]; g = in[4 * x + 1]; b = in[4 * x + 2]; break;
      case Packing::kPalette: break;
    }
    if (channels == 3) {
      out[3 * x] = static_cast<std::uint8_t>(r);
      out[3 * x + 1] = static_cast<std::uint8_t>(g);
      out[3 * x + 2] = static_cast<std::uint8_t>(b);
    } else {
      out[x] = rgb_to_grey(r, g, b);
    }
  }
}

class BmpDecoder final : public FormatDecoder {
 public:
  ImageProbe probe(std::span<const std::uint8_t> bytes) override {
    clear_warnings();
    const Header h = parse(bytes);
    ImageProbe p;
    p.format = kBmp;
    p.width = h.width;
    p.height = h.height;
    p.bit_depth = h.bits <= 8 ? h.bits : 8;
    p.palette = h.packing == Packing::kPalette;
    p.channels = h.bits == 32 ? 4 : 3;
    return p;
  }

  std::uint64_t workspace_requirements(const ImageProbe& probe, int /*out_channels*/) const override {
    // The palette in RGB; RLE decodes a row of indices at a time.
    return 65536 * 3 + static_cast<std::uint64_t>(probe.width);
  }

  void decode(std::span<const std::uint8_t> bytes, const ImageProbe& probe, ImageView out,
              AlignedBuffer& scratch) override {
    clear_warnings();
    const Header h = parse(bytes);
    if (h.width != probe.width || h.height != probe.height) {
      throw Error(ErrorCode::kInvalidArgument, "BMP: the probe passed to decode() is of another image");
    }
    const std::uint8_t* const data = bytes.data();
    if (h.packing != Packing::kPalette) {
      const std::uint64_t stride = (static_cast<std::uint64_t>(h.width) * h.bits + 31) / 32 * 4;
      if (h.pixels_at + stride * static_cast<std::uint64_t>(h.height) > bytes.size()) corrupt(kBmp, "truncated file (pixel data cut short)");
      for (int y = 0; y < h.height; ++y) {
        const int row = h.top_down ? y : h.height - 1 - y;
        store_pixels(data + h.pixels_at + stride * static_cast<std::uint64_t>(y), h.width, h.packing, out.row(row), out.channels);
      }
      return;
    }
    scratch.reserve(static_cast<std::size_t>(workspace_requirements(probe, out.channels)));
    std::uint8_t* const palette = scratch.data();
    std::uint8_t* const line = palette + 65536 * 3;
    for (int i = 0; i < h.colors; ++i) {
      const std::uint8_t* e = data + h.palette_at + static_cast<std::uint64_t>(h.palette_entry) * i;
      palette[3 * i] = e[2];
      palette[3 * i + 1] = e[1];
      palette[3 * i + 2] = e[0];
    }
    if (h.compression == kRle8 || h.compression == kRle4) {
      decode_rle(bytes, h, palette, line, out);
      return;
    }
    const std::uint64_t stride = (static_cast<std::uint64_t>(h.width) * h.bits + 31) / 32 * 4;
    if (h.pixels_at + stride * static_cast<std::uint64_t>(h.height) > bytes.size()) corrupt(kBmp, "truncated file (pixel data cut short)");
    for (int y = 0; y < h.height; ++y) {
      const std::uint8_t* in = data + h.pixels_at + stride * static_cast<std::uint64_t>(y);
      for (int x = 0; x < h.width; ++x) {
        const int shift = 8 - h.bits - (x * h.bits) % 8;
        line[x] = static_cast<std::uint8_t>((in[x * h.bits / 8] >> shift) & ((1 << h.bits) - 1));
      }
      store_palette_row(line, h.width, palette, h.colors, out.row(h.top_down ? y : h.height - 1 - y), out.channels);
    }
  }

 private:
  // RLE8/RLE4 as Pillow's BmpRleDecoder reads them: a stream of indices filling the rows in file
  // order (bottom-up), index 0 where an end-of-line or a delta skips.
  static void decode_rle(std::span<const std::uint8_t> bytes, const Header& h, const std::uint8_t* palette,
                         std::uint8_t* line, ImageView out) {
    const bool rle4 = h.compression == kRle4;
    std::size_t at = h.pixels_at;
    int x = 0;
    int y = 0;  // in file order
    std::memset(line, 0, static_cast<std::size_t>(h.width));
    const auto flush = [&] {
      store_palette_row(line, h.width, palette, h.colors, out.row(h.top_down ? y : h.height - 1 - y), out.channels);
      std::memset(line, 0, static_cast<std::size_t>(h.width));
      x = 0;
      ++y;
    };
    const auto put = [&](std::uint8_t index) {
      line[x++] = index;
      if (x == h.width) flush();
    };
    while (y < h.height) {
      if (at + 2 > bytes.size()) corrupt(kBmp, "truncated file (RLE data ends before the last pixel)");
      const int count = bytes[at];
      const std::uint8_t value = bytes[at + 1];
      at += 2;
      if (count > 0) {  // a run, clamped at the row's end
        const int n = std::min(count, h.width - x);
        for (int i = 0; i < n; ++i) put(rle4 ? static_cast<std::uint8_t>(i % 2 == 0 ? value >> 4 : value & 15) : value);
      } else if (value == 0) {  // end of line
        if (x > 0) flush();
      } else if (value == 1) {  // end of bitmap
        break;
      } else if (value == 2) {  // delta: right, up (rows in file order)
        if (at + 2 > bytes.size()) corrupt(kBmp, "truncated file (RLE delta cut short)");
        const std::uint64_t skip = bytes[at] + std::uint64_t{bytes[at + 1]} * static_cast<std::uint64_t>(h.width);
        at += 2;
        for (std::uint64_t i = 0; i < skip && y < h.height; ++i) put(0);
      } else {  // literal indices, padded to a 16-bit boundary
        const std::size_t size = rle4 ? (static_cast<std::size_t>(value) + 1) / 2 : value;
        if (at + size > bytes.size()) corrupt(kBmp, "truncated file (RLE literal cut short)");
        for (int i = 0; i < value && y < h.height; ++i) {
          const std::uint8_t b = bytes[at + (rle4 ? static_cast<std::size_t>(i / 2) : static_cast<std::size_t>(i))];
          put(rle4 ? static_cast<std::uint8_t>(i % 2 == 0 ? b >> 4 : b & 15) : b);
        }
        at += size + (size & 1);
      }
    }
    if (y < h.height) corrupt(kBmp, "RLE data ends before the last pixel");
  }
};

}  // namespace

std::unique_ptr<FormatDecoder> make_bmp_decoder() { return std::make_unique<BmpDecoder>(); }

}  // namespace sluice::stages
