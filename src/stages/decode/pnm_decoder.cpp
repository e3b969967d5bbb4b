// PNM (P1 to P6), hand-written: Debian's libnetpbm exits the process on a bad file (pm_error),
// which a loader cannot allow, and the format is a text header and rows. It reads what Pillow's
// PpmImagePlugin reads, with its pixels: plain (P1-P3) and binary (P4-P6), comments in the header
// (and in plain data), maxval 1 to 65535. Samples are scaled as Pillow scales them,
// round(v / maxval * 255) with ties to even (Python's round); Pillow keeps 16-bit grey as 32-bit
// "I" and its convert() clips that at 255, where this scales it like the colour samples
// (docs/reliability.md). A plain sample above maxval is refused, as Pillow refuses it; a binary
// one is clamped, as Pillow clamps it. Rows decode straight into the output through one row of
// RGB samples.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "sluice/core/error.hpp"
#include "stages/decode/image_format.hpp"

namespace sluice::stages {

namespace {

constexpr ImageFormat kPnm = ImageFormat::kPnm;

bool is_space(std::uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

struct Header {
  int kind = 0;  // 1 to 6
  int width = 0;
  int height = 0;
  int maxval = 1;
  int samples = 1;           // per pixel: 1 or 3
  std::size_t data_at = 0;   // first byte of the pixel data
};

// A header or plain-data token reader: whitespace and '#' comments (to the end of the line) skipped.
struct Tokens {
  std::span<const std::uint8_t> bytes;
  std::size_t at = 0;

  // The next run of non-space bytes, at most `longest`; empty at the end of the data.
  std::string_view next(std::size_t longest) {
    for (;;) {
      while (at < bytes.size() && is_space(bytes[at])) ++at;
      if (at < bytes.size() && bytes[at] == '#') {
        while (at < bytes.size() && bytes[at] != '\n' && bytes[at] != '\r') ++at;
        continue;
      }
      break;
    }
    const std::size_t start = at;
    while (at < bytes.size() && !is_space(bytes[at]) && bytes[at] != '#' && at - start <= longest) ++at;
    return {reinterpret_cast<const char*>(bytes.data() + start), at - start};
  }

  int number(const char* what, std::int64_t most) {
    const std::string_view t = next(10);
    if (t.empty()) corrupt(kPnm, std::string("truncated file (no ") + what + ")");
    std::int64_t v = 0;
    for (const char c : t) {
      if (c < '0' || c > '9' || t.size() > 10) corrupt(kPnm, std::string("bad ") + what + " '" + std::string(t) + "'");
      v = v * 10 + (c - '0');
    }
    if (v > most) corrupt(kPnm, std::string(what) + " " + std::string(t) + " is out of range");
    return static_cast<int>(v);
  }
};

Header parse(std::span<const std::uint8_t> bytes) {
  if (bytes.size() < 3) corrupt(kPnm, "truncated file");
  Header h;
  h.kind = bytes[1] - '0';
  h.samples = h.kind == 3 || h.kind == 6 ? 3 : 1;
  Tokens t{bytes, 2};
  h.width = t.number("width", INT32_MAX);
  h.height = t.number("height", INT32_MAX);
  if (h.width <= 0 || h.height <= 0) corrupt(kPnm, "the image has no pixels");
  if (h.kind != 1 && h.kind != 4) {
    h.maxval = t.number("maxval", 65535);
    if (h.maxval == 0) corrupt(kPnm, "maxval must be greater than 0");
  }
  // One whitespace byte ends the header.
  if (t.at >= bytes.size()) {
    if (h.kind >= 4) corrupt(kPnm, "truncated file (no pixel data)");
  } else {
    ++t.at;
  }
  h.data_at = t.at;
  return h;
}

// Pillow's scaling: round(value / maxval * 255), ties to even like Python's round().
std::uint8_t scale(int value, int maxval) {
  if (maxval == 255) return static_cast<std::uint8_t>(value);
  const double v = std::nearbyint(static_cast<double>(value) / maxval * 255.0);
  return static_cast<std::uint8_t>(std::min(v, 255.0));
}

class PnmDecoder final : public FormatDecoder {
 public:
  ImageProbe probe(std::span<const std::uint8_t> bytes) override {
    clear_warnings();
    const Header h = parse(bytes);
    ImageProbe p;
    p.format = kPnm;
    p.width = h.width;
    p.height = h.height;
    p.channels = h.samples;
    p.bit_depth = h.kind == 1 || h.kind == 4 ? 1 : (h.maxval > 255 ? 16 : 8);
    return p;
  }

  std::uint64_t workspace_requirements(const ImageProbe& probe, int /*out_channels*/) const override {
    return static_cast<std::uint64_t>(probe.width) * 3;
  }

  void decode(std::span<const std::uint8_t> bytes, const ImageProbe& probe, ImageView out,
              AlignedBuffer& scratch) override {
    clear_warnings();
    const Header h = parse(bytes);
    if (h.width != probe.width || h.height != probe.height) {
      throw Error(ErrorCode::kInvalidArgument, "PNM: the probe passed to decode() is of another image");
    }
    scratch.reserve(static_cast<std::size_t>(workspace_requirements(probe, out.channels)));
    std::uint8_t* const rgb = scratch.data();
    const std::size_t w = static_cast<std::size_t>(h.width);
    if (h.kind >= 4) {  // binary
      const std::size_t row = h.kind == 4 ? (w + 7) / 8 : w * h.samples * (h.maxval > 255 ? 2 : 1);
      if (h.data_at + row * static_cast<std::size_t>(h.height) > bytes.size()) {
        corrupt(kPnm, "truncated file (pixel data cut short)");
      }
      for (int y = 0; y < h.height; ++y) {
        const std::uint8_t* in = bytes.data() + h.data_at + row * static_cast<std::size_t>(y);
        for (std::size_t x = 0; x < w; ++x) {
          if (h.kind == 4) {
            const std::uint8_t v = ((in[x / 8] >> (7 - x % 8)) & 1) != 0 ? 0 : 255;
            rgb[3 * x] = rgb[3 * x + 1] = rgb[3 * x + 2] = v;
            continue;
          }
          for (int s = 0; s < 3; ++s) {
            const std::size_t i = x * h.samples + static_cast<std::size_t>(h.samples == 3 ? s : 0);
            const int v = h.maxval > 255 ? (in[2 * i] << 8) | in[2 * i + 1] : in[i];
            rgb[3 * x + s] = scale(std::min(v, h.maxval), h.maxval);
          }
        }
        store_rgb_row(rgb, h.width, out.row(y), out.channels);
      }
      return;
    }
    Tokens t{bytes, h.data_at};
    for (int y = 0; y < h.height; ++y) {
      for (std::size_t x = 0; x < w; ++x) {
        if (h.kind == 1) {  // one byte a sample, spaces optional
          const std::string_view token = t.next(0);  // a single byte
          if (token.empty()) corrupt(kPnm, "truncated file (plain data cut short)");
          const char c = token[0];
          if (c != '0' && c != '1') corrupt(kPnm, std::string("bad plain PBM sample '") + c + "'");
          rgb[3 * x] = rgb[3 * x + 1] = rgb[3 * x + 2] = c == '1' ? 0 : 255;
          continue;
        }
        for (int s = 0; s < h.samples; ++s) {
          const int v = t.number("sample", 65535);
          if (v > h.maxval) corrupt(kPnm, "sample " + std::to_string(v) + " above maxval " + std::to_string(h.maxval));
          rgb[3 * x + s] = scale(v, h.maxval);
        }
        if (h.samples == 1) rgb[3 * x + 1] = rgb[3 * x + 2] = rgb[3 * x];
      }
      store_rgb_row(rgb, h.width, out.row(y), out.channels);
    }
  }
};

}  // namespace

std::unique_ptr<FormatDecoder> make_pnm_decoder() { return std::make_unique<PnmDecoder>(); }

}  // namespace sluice::stages
