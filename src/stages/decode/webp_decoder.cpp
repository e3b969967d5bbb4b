// WebP through libwebp (lossy, lossless, with alpha) and libwebpdemux (an animation's first
// frame). libwebp decodes straight into the caller's rows in RGB, alpha dropped, which is what
// Pillow's convert("RGB") gives: Pillow decodes through WebPAnimDecoder, whose first frame is the
// frame's own pixels on a canvas cleared to transparent black, with no blending (the first frame
// is a key frame), and so is ours. Grey output needs the RGB image first (libwebp has no grey
// output mode), so its workspace is the whole image in RGB.
#include <webp/decode.h>
#include <webp/demux.h>

#include <cstring>
#include <string>

#include "sluice/core/error.hpp"
#include "stages/decode/image_format.hpp"

namespace sluice::stages {

namespace {

std::string status_text(VP8StatusCode status) {
  switch (status) {
    case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
    case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR: return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
    case VP8_STATUS_SUSPENDED: return "suspended";
    case VP8_STATUS_USER_ABORT: return "aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA: return "truncated file (not enough data)";
    case VP8_STATUS_OK: break;
  }
  return "ok";
}

[[noreturn]] void fail(VP8StatusCode status) {
  if (status == VP8_STATUS_UNSUPPORTED_FEATURE) unsupported(ImageFormat::kWebp, status_text(status));
  if (status == VP8_STATUS_OUT_OF_MEMORY) throw Error(ErrorCode::kTooLarge, "WebP: libwebp ran out of memory");
  corrupt(ImageFormat::kWebp, status_text(status));
}

struct Demux {
  WebPDemuxer* demux = nullptr;
  explicit Demux(std::span<const std::uint8_t> bytes) {
    const WebPData data{bytes.data(), bytes.size()};
    demux = WebPDemux(&data);
  }
  Demux(const Demux&) = delete;
  Demux& operator=(const Demux&) = delete;
  ~Demux() { WebPDemuxDelete(demux); }
};

// Decodes one WebP bitstream (a whole still file, or an animation frame's) into RGB rows.
void decode_rgb(const std::uint8_t* data, std::size_t size, std::uint8_t* rgb, std::ptrdiff_t stride, int width,
                int height) {
  WebPDecoderConfig config;
  if (WebPInitDecoderConfig(&config) == 0) throw Error(ErrorCode::kInternal, "libwebp version mismatch");
  config.output.colorspace = MODE_RGB;
  config.output.is_external_memory = 1;
  config.output.u.RGBA.rgba = rgb;
  config.output.u.RGBA.stride = static_cast<int>(stride);
  config.output.u.RGBA.size = static_cast<std::size_t>(stride) * static_cast<std::size_t>(height - 1) +
                              static_cast<std::size_t>(width) * 3;
  const VP8StatusCode status = WebPDecode(data, size, &config);
  WebPFreeDecBuffer(&config.output);
  if (status != VP8_STATUS_OK) fail(status);
}

class WebpDecoder final : public FormatDecoder {
 public:
  ImageProbe probe(std::span<const std::uint8_t> bytes) override {
    clear_warnings();
    WebPBitstreamFeatures f{};
    const VP8StatusCode status = WebPGetFeatures(bytes.data(), bytes.size(), &f);
    if (status != VP8_STATUS_OK) fail(status);
    ImageProbe p;
    p.format = ImageFormat::kWebp;
    p.width = f.width;
    p.height = f.height;
    p.alpha = f.has_alpha != 0;
    p.channels = p.alpha ? 4 : 3;
    p.animated = f.has_animation != 0;
    if (p.animated) {  // the canvas, which WebPGetFeatures reads from the VP8X chunk
      const Demux d(bytes);
      if (d.demux == nullptr) corrupt(ImageFormat::kWebp, "cannot parse the animation's chunks");
      p.width = static_cast<int>(WebPDemuxGetI(d.demux, WEBP_FF_CANVAS_WIDTH));
      p.height = static_cast<int>(WebPDemuxGetI(d.demux, WEBP_FF_CANVAS_HEIGHT));
    }
    if (p.width <= 0 || p.height <= 0) corrupt(ImageFormat::kWebp, "the image has no pixels");
    return p;
  }

  std::uint64_t workspace_requirements(const ImageProbe& probe, int out_channels) const override {
    return out_channels == 3 ? 0 : std::uint64_t(probe.width) * static_cast<std::uint64_t>(probe.height) * 3;
  }

  void decode(std::span<const std::uint8_t> bytes, const ImageProbe& probe, ImageView out,
              AlignedBuffer& scratch) override {
    clear_warnings();
    const std::ptrdiff_t row = static_cast<std::ptrdiff_t>(probe.width) * 3;
    ImageView rgb = out;
    if (out.channels != 3) {
      scratch.reserve(static_cast<std::size_t>(workspace_requirements(probe, out.channels)));
      rgb = ImageView{scratch.data(), probe.width, probe.height, 3, row};
    }
    if (!probe.animated) {
      decode_rgb(bytes.data(), bytes.size(), rgb.data, rgb.stride, probe.width, probe.height);
    } else {
      const Demux d(bytes);
      if (d.demux == nullptr) corrupt(ImageFormat::kWebp, "cannot parse the animation's chunks");
      WebPIterator frame{};
      if (WebPDemuxGetFrame(d.demux, 1, &frame) == 0) corrupt(ImageFormat::kWebp, "the animation has no frame");
      const bool inside = frame.x_offset >= 0 && frame.y_offset >= 0 && frame.width > 0 && frame.height > 0 &&
                          frame.x_offset + frame.width <= probe.width && frame.y_offset + frame.height <= probe.height;
      if (!inside) {
        WebPDemuxReleaseIterator(&frame);
        corrupt(ImageFormat::kWebp, "the first frame lies outside the canvas");
      }
      for (int y = 0; y < probe.height; ++y) std::memset(rgb.row(y), 0, static_cast<std::size_t>(row));
      std::uint8_t* at = rgb.row(frame.y_offset) + static_cast<std::ptrdiff_t>(frame.x_offset) * 3;
      const WebPData fragment = frame.fragment;
      const int width = frame.width;
      const int height = frame.height;
      WebPDemuxReleaseIterator(&frame);
      decode_rgb(fragment.bytes, fragment.size, at, rgb.stride, width, height);
    }
    if (out.channels != 3) {
      for (int y = 0; y < probe.height; ++y) store_rgb_row(rgb.row(y), probe.width, out.row(y), out.channels);
    }
  }
};

}  // namespace

std::unique_ptr<FormatDecoder> make_webp_decoder() { return std::make_unique<WebpDecoder>(); }

}  // namespace sluice::stages
