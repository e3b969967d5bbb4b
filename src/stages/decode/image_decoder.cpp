// ImageDecoder: dispatch on the first bytes, the max_image_pixels check from the header, and the
// shared workspace.
#include "stages/decode/image_decoder.hpp"

#include <cstdio>
#include <string>

#include "sluice/core/error.hpp"
#include "stages/decode/jpeg_decoder.hpp"

namespace sluice::stages {

ImageDecoder::ImageDecoder(const DecodeOptions& options) : options_(options) {}

bool ImageDecoder::handles(std::span<const std::uint8_t> bytes) {
  const ImageFormat f = sniff_format(bytes);
  return f != ImageFormat::kJpeg && f != ImageFormat::kUnknown;
}

FormatDecoder& ImageDecoder::decoder_for(ImageFormat format) {
  auto& slot = decoders_[static_cast<std::size_t>(format)];
  if (!slot) {
    switch (format) {
      case ImageFormat::kPng: slot = make_png_decoder(); break;
      case ImageFormat::kWebp: slot = make_webp_decoder(); break;
      case ImageFormat::kGif: slot = make_gif_decoder(); break;
      case ImageFormat::kBmp: slot = make_bmp_decoder(); break;
      case ImageFormat::kPnm: slot = make_pnm_decoder(); break;
      case ImageFormat::kTiff: slot = make_tiff_decoder(); break;
      case ImageFormat::kJpeg:
      case ImageFormat::kUnknown:
        throw Error(ErrorCode::kUnsupportedFormat, "not an image in a format sluice decodes");
    }
  }
  return *slot;
}

const FormatDecoder* ImageDecoder::find(ImageFormat format) const {
  return decoders_[static_cast<std::size_t>(format)].get();
}

ImageProbe ImageDecoder::probe(std::span<const std::uint8_t> bytes) {
  if (bytes.empty()) throw Error(ErrorCode::kCorruptData, "empty file");
  last_ = sniff_format(bytes);
  const ImageProbe p = decoder_for(last_).probe(bytes);
  const std::uint64_t pixels = static_cast<std::uint64_t>(p.width) * static_cast<std::uint64_t>(p.height);
  if (pixels > options_.max_image_pixels) {
    char cause[200];
    std::snprintf(cause, sizeof cause, "%s image is %dx%d (%.1f MP), above max_image_pixels (%.1f MP)",
                  std::string(format_name(p.format)).c_str(), p.width, p.height, static_cast<double>(pixels) / 1e6,
                  static_cast<double>(options_.max_image_pixels) / 1e6);
    throw Error(ErrorCode::kTooLarge, cause);
  }
  return p;
}

std::uint64_t ImageDecoder::workspace_requirements(const ImageProbe& probe) {
  return decoder_for(probe.format).workspace_requirements(probe, channels());
}

void ImageDecoder::decode(std::span<const std::uint8_t> bytes, const ImageProbe& probe, ImageView out) {
  if (out.data == nullptr || out.width != probe.width || out.height != probe.height || out.channels != channels() ||
      out.stride < static_cast<std::ptrdiff_t>(probe.width) * channels()) {
    throw Error(ErrorCode::kInvalidArgument,
                "decode output is " + std::to_string(out.width) + "x" + std::to_string(out.height) + "x" +
                    std::to_string(out.channels) + " but the image is " + std::to_string(probe.width) + "x" +
                    std::to_string(probe.height) + "x" + std::to_string(channels()));
  }
  if (sniff_format(bytes) != probe.format) {
    throw Error(ErrorCode::kInvalidArgument, "the probe passed to decode() is of another image");
  }
  last_ = probe.format;
  decoder_for(probe.format).decode(bytes, probe, out, workspace_);
  const FormatWarnings& w = decoder_for(probe.format).warnings();
  if (options_.strict && w.count > 0) {
    throw Error(ErrorCode::kCorruptData, std::string(format_name(probe.format)) + " warning (strict): " + w.first);
  }
}

bool ImageDecoder::begin_rows(std::span<const std::uint8_t> bytes, const ImageProbe& probe) {
  if (sniff_format(bytes) != probe.format) {
    throw Error(ErrorCode::kInvalidArgument, "the probe passed to begin_rows() is of another image");
  }
  last_ = probe.format;
  return decoder_for(probe.format).begin_rows(bytes, probe);
}

void ImageDecoder::read_rows(ImageView rows) {
  if (rows.channels != channels()) throw Error(ErrorCode::kInvalidArgument, "read_rows: wrong channel count");
  decoder_for(last_).read_rows(rows, workspace_);
}

void ImageDecoder::end_rows() {
  decoder_for(last_).end_rows();
  const FormatWarnings& w = decoder_for(last_).warnings();
  if (options_.strict && w.count > 0) {
    throw Error(ErrorCode::kCorruptData, std::string(format_name(last_)) + " warning (strict): " + w.first);
  }
}

const FormatWarnings& ImageDecoder::warnings() const {
  static const FormatWarnings kNone;
  const FormatDecoder* d = last_ == ImageFormat::kUnknown || last_ == ImageFormat::kJpeg ? nullptr : find(last_);
  return d != nullptr ? d->warnings() : kNone;
}

void ImageDecoder::attach(MemoryBudget& budget, MemoryUse use, std::uint64_t share) {
  workspace_.attach_share(budget, use, static_cast<std::size_t>(share));
}

ImageProbe probe_image(std::span<const std::uint8_t> bytes, JpegDecoder& jpeg, ImageDecoder& others) {
  if (ImageDecoder::handles(bytes)) return others.probe(bytes);
  const JpegHeader h = jpeg.read_header(bytes);
  ImageProbe p;
  p.format = ImageFormat::kJpeg;
  p.width = h.width;
  p.height = h.height;
  p.channels = h.components;
  p.interlaced = h.progressive;
  return p;
}

}  // namespace sluice::stages
