// Format sniffing by signature, extension mapping (for `sluice inspect`'s mismatch flags and the
// listings), and the row stores every format decoder shares.
#include "stages/decode/image_format.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "sluice/core/error.hpp"

namespace sluice::stages {

namespace {

bool starts_with(std::span<const std::uint8_t> bytes, const char* signature, std::size_t size) {
  return bytes.size() >= size && std::memcmp(bytes.data(), signature, size) == 0;
}

bool is_space(std::uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

}  // namespace

ImageFormat sniff_format(std::span<const std::uint8_t> bytes) {
  if (bytes.size() >= 2 && bytes[0] == 0xFF && bytes[1] == 0xD8) return ImageFormat::kJpeg;
  if (starts_with(bytes, "\x89PNG\r\n\x1a\n", 8)) return ImageFormat::kPng;
  if (starts_with(bytes, "GIF87a", 6) || starts_with(bytes, "GIF89a", 6)) return ImageFormat::kGif;
  if (bytes.size() >= 12 && std::memcmp(bytes.data(), "RIFF", 4) == 0 && std::memcmp(bytes.data() + 8, "WEBP", 4) == 0) {
    return ImageFormat::kWebp;
  }
  if (starts_with(bytes, "II*\0", 4) || starts_with(bytes, "MM\0*", 4) || starts_with(bytes, "II+\0", 4) ||
      starts_with(bytes, "MM\0+", 4)) {
    return ImageFormat::kTiff;
  }
  if (starts_with(bytes, "BM", 2) && bytes.size() >= 18) return ImageFormat::kBmp;
  if (bytes.size() >= 3 && bytes[0] == 'P' && bytes[1] >= '1' && bytes[1] <= '6' && is_space(bytes[2])) {
    return ImageFormat::kPnm;
  }
  return ImageFormat::kUnknown;
}

std::string_view format_name(ImageFormat format) {
  switch (format) {
    case ImageFormat::kJpeg: return "JPEG";
    case ImageFormat::kPng: return "PNG";
    case ImageFormat::kWebp: return "WebP";
    case ImageFormat::kGif: return "GIF";
    case ImageFormat::kBmp: return "BMP";
    case ImageFormat::kPnm: return "PNM";
    case ImageFormat::kTiff: return "TIFF";
    case ImageFormat::kUnknown: break;
  }
  return "unknown";
}

ImageFormat format_of_extension(std::string_view path) {
  const std::size_t dot = path.rfind('.');
  if (dot == std::string_view::npos || path.find('/', dot) != std::string_view::npos) return ImageFormat::kUnknown;
  std::string ext(path.substr(dot + 1));
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  if (ext == "jpg" || ext == "jpeg" || ext == "jpe" || ext == "jfif") return ImageFormat::kJpeg;
  if (ext == "png" || ext == "apng") return ImageFormat::kPng;
  if (ext == "webp") return ImageFormat::kWebp;
  if (ext == "gif") return ImageFormat::kGif;
  if (ext == "bmp" || ext == "dib") return ImageFormat::kBmp;
  if (ext == "ppm" || ext == "pgm" || ext == "pbm" || ext == "pnm") return ImageFormat::kPnm;
  if (ext == "tif" || ext == "tiff") return ImageFormat::kTiff;
  return ImageFormat::kUnknown;
}

void store_rgb_row(const std::uint8_t* rgb, int width, std::uint8_t* out, int out_channels) {
  if (out_channels == 3) {
    std::memcpy(out, rgb, static_cast<std::size_t>(width) * 3);
    return;
  }
  for (int x = 0; x < width; ++x, rgb += 3) out[x] = rgb_to_grey(rgb[0], rgb[1], rgb[2]);
}

void store_palette_row(const std::uint8_t* indices, int width, const std::uint8_t* palette_rgb, int colors,
                       std::uint8_t* out, int out_channels) {
  static constexpr std::uint8_t kBlack[3] = {0, 0, 0};
  for (int x = 0; x < width; ++x) {
    const int i = indices[x];
    const std::uint8_t* c = i < colors ? palette_rgb + 3 * i : kBlack;
    if (out_channels == 3) {
      out[3 * x] = c[0];
      out[3 * x + 1] = c[1];
      out[3 * x + 2] = c[2];
    } else {
      out[x] = rgb_to_grey(c[0], c[1], c[2]);
    }
  }
}

void corrupt(ImageFormat format, const std::string& what) {
  throw Error(ErrorCode::kCorruptData, "corrupt " + std::string(format_name(format)) + ": " + what);
}

void unsupported(ImageFormat format, const std::string& what) {
  throw Error(ErrorCode::kUnsupportedFormat, "unsupported " + std::string(format_name(format)) + ": " + what);
}

}  // namespace sluice::stages
