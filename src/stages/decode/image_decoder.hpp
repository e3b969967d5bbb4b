// ImageDecoder: the decode stage's kernel for every format but JPEG, chosen by the file's first
// bytes (image_format.hpp), one per worker thread like JpegDecoder. It owns one decoder per
// format (made when the format is first seen) and the workspace they share, which counts against
// the memory budget from attach() on. probe() reads the header only and refuses an image above
// max_image_pixels before anything is allocated; decode() then fills an output the caller has
// already reserved (the decoded size), taking the format's workspace_requirements() from the
// shared workspace first.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>

#include "sluice/detail/memory/aligned_buffer.hpp"
#include "sluice/memory/budget.hpp"
#include "sluice/pipeline/options.hpp"
#include "stages/decode/image_format.hpp"

namespace sluice::stages {

class JpegDecoder;

class ImageDecoder {
 public:
  explicit ImageDecoder(const DecodeOptions& options);
  ImageDecoder(const ImageDecoder&) = delete;
  ImageDecoder& operator=(const ImageDecoder&) = delete;

  // Whether this decoder reads the bytes (a PNG, WebP, GIF, BMP, PNM or TIFF signature); JPEG and
  // anything unknown go to JpegDecoder, whose messages name what the bytes look like.
  static bool handles(std::span<const std::uint8_t> bytes);

  // The header, for a format handles() accepts. Throws sluice::Error without a path: the format's
  // kCorruptData or kUnsupportedFormat, kTooLarge above max_image_pixels.
  ImageProbe probe(std::span<const std::uint8_t> bytes);
  // The workspace decode() takes for this image (beyond its output).
  std::uint64_t workspace_requirements(const ImageProbe& probe);
  // The whole first frame into `out` (probe's size, channels() channels, any stride).
  void decode(std::span<const std::uint8_t> bytes, const ImageProbe& probe, ImageView out);
  // Row bands through the format's decoder, where it has them (image_format.hpp): false when
  // this image cannot be read so (the caller then needs the whole image's memory).
  bool begin_rows(std::span<const std::uint8_t> bytes, const ImageProbe& probe);
  void read_rows(ImageView rows);
  void end_rows();
  // What the last probe() or decode() warned about.
  const FormatWarnings& warnings() const;

  int channels() const { return options_.color == Color::kGrey ? 1 : 3; }

  // Accounts the workspace against `budget` from now on, holding `share` bytes at once (what the
  // memory plan gives it: runtime/loader_memory_plan.cpp).
  void attach(MemoryBudget& budget, MemoryUse use, std::uint64_t share);

 private:
  FormatDecoder& decoder_for(ImageFormat format);
  const FormatDecoder* find(ImageFormat format) const;

  DecodeOptions options_;
  std::array<std::unique_ptr<FormatDecoder>, kImageFormatCount> decoders_;
  AlignedBuffer workspace_;
  ImageFormat last_ = ImageFormat::kUnknown;
};

// Any image's header, JPEG's through `jpeg` (ImageProbe::channels is then its components): what
// the sample-size probe, the memory plan and `sluice inspect` read. Throws as the decoders do.
ImageProbe probe_image(std::span<const std::uint8_t> bytes, JpegDecoder& jpeg, ImageDecoder& others);

}  // namespace sluice::stages
