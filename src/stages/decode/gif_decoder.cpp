// GIF through giflib: the first frame, with its local palette or else the global one, placed on
// the canvas as Pillow places it: the canvas is the logical screen, grown to hold a frame that
// reaches past it (Pillow grows it), and the pixels outside the frame take the frame's
// transparent index if it has one, else index 0, looked up in the same palette. A file without
// any palette reads its indices as grey levels, as Pillow's "L" mode does. giflib reads lines in
// file order; an interlaced frame's lines go to their rows as they come, so the workspace is one
// line of indices. giflib prints nothing; its errors become the message.
#include <gif_lib.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "sluice/core/error.hpp"
#include "stages/decode/image_format.hpp"

namespace sluice::stages {

namespace {

struct Input {
  std::span<const std::uint8_t> bytes;
  std::size_t at = 0;
};

int read_input(GifFileType* gif, GifByteType* out, int size) {
  auto* in = static_cast<Input*>(gif->UserData);
  const std::size_t n = std::min<std::size_t>(static_cast<std::size_t>(std::max(size, 0)), in->bytes.size() - in->at);
  std::memcpy(out, in->bytes.data() + in->at, n);
  in->at += n;
  return static_cast<int>(n);
}

[[noreturn]] void fail(int code) {
  const char* text = GifErrorString(code);
  const std::string message = text != nullptr ? text : "giflib error " + std::to_string(code);
  if (code == D_GIF_ERR_READ_FAILED || code == D_GIF_ERR_EOF_TOO_SOON) corrupt(ImageFormat::kGif, "truncated file (" + message + ")");
  corrupt(ImageFormat::kGif, message);
}

// An open giflib decoder standing at the first frame's pixels, with what came before them.
struct FirstFrame {
  Input input;
  GifFileType* gif = nullptr;
  int transparent = -1;  // the first frame's transparent index (its graphic control extension)

  explicit FirstFrame(std::span<const std::uint8_t> bytes) : input{bytes} {
    int error = 0;
    gif = DGifOpen(&input, read_input, &error);
    if (gif == nullptr) fail(error);
  }

  // Reads the records before the first frame's pixels. Not in the constructor: a throw from
  // there would skip the destructor and leak giflib's handle.
  void seek() {
    for (;;) {
      GifRecordType record = UNDEFINED_RECORD_TYPE;
      if (DGifGetRecordType(gif, &record) == GIF_ERROR) fail(gif->Error);
      if (record == IMAGE_DESC_RECORD_TYPE) {
        if (DGifGetImageDesc(gif) == GIF_ERROR) fail(gif->Error);
        return;
      }
      if (record == TERMINATE_RECORD_TYPE) corrupt(ImageFormat::kGif, "the file holds no image");
      if (record != EXTENSION_RECORD_TYPE) fail(D_GIF_ERR_WRONG_RECORD);
      int code = 0;
      GifByteType* block = nullptr;
      if (DGifGetExtension(gif, &code, &block) == GIF_ERROR) fail(gif->Error);
      bool first = true;
      while (block != nullptr) {
        if (code == GRAPHICS_EXT_FUNC_CODE && first) {
          GraphicsControlBlock gcb{};
          if (DGifExtensionToGCB(block[0], block + 1, &gcb) == GIF_OK) transparent = gcb.TransparentColor;
        }
        first = false;
        if (DGifGetExtensionNext(gif, &block) == GIF_ERROR) fail(gif->Error);
      }
    }
  }
  FirstFrame(const FirstFrame&) = delete;
  FirstFrame& operator=(const FirstFrame&) = delete;
  ~FirstFrame() {
    int error = 0;
    if (gif != nullptr) DGifCloseFile(gif, &error);
  }

  // Whether another frame follows the first: its code blocks are skipped (not decompressed) and
  // the next record read. A damaged rest of the file says no; the decode reads the first frame only.
  bool more_frames() {
    int code_size = 0;
    GifByteType* block = nullptr;
    if (DGifGetCode(gif, &code_size, &block) == GIF_ERROR) return false;
    while (block != nullptr) {
      if (DGifGetCodeNext(gif, &block) == GIF_ERROR) return false;
    }
    for (;;) {
      GifRecordType record = UNDEFINED_RECORD_TYPE;
      if (DGifGetRecordType(gif, &record) == GIF_ERROR) return false;
      if (record == IMAGE_DESC_RECORD_TYPE) return true;
      if (record != EXTENSION_RECORD_TYPE) return false;
      int ext = 0;
      if (DGifGetExtension(gif, &ext, &block) == GIF_ERROR) return false;
      while (block != nullptr) {
        if (DGifGetExtensionNext(gif, &block) == GIF_ERROR) return false;
      }
    }
  }

  const ColorMapObject* palette() const { return gif->Image.ColorMap != nullptr ? gif->Image.ColorMap : gif->SColorMap; }
};

class GifDecoder final : public FormatDecoder {
 public:
  ImageProbe probe(std::span<const std::uint8_t> bytes) override {
    clear_warnings();
    FirstFrame f(bytes);
    f.seek();
    const GifImageDesc& d = f.gif->Image;
    ImageProbe p;
    p.format = ImageFormat::kGif;
    p.width = std::max<int>(f.gif->SWidth, d.Left + d.Width);
    p.height = std::max<int>(f.gif->SHeight, d.Top + d.Height);
    p.channels = 3;
    p.palette = true;
    p.bit_depth = f.palette() != nullptr ? f.palette()->BitsPerPixel : 8;
    p.alpha = f.transparent >= 0;
    p.interlaced = d.Interlace;
    if (p.width <= 0 || p.height <= 0 || d.Width <= 0 || d.Height <= 0) corrupt(ImageFormat::kGif, "the image has no pixels");
    p.animated = f.more_frames();
    return p;
  }

  std::uint64_t workspace_requirements(const ImageProbe& probe, int /*out_channels*/) const override {
    return static_cast<std::uint64_t>(probe.width) + 256 * 3;  // a line of indices, the palette
  }

  void decode(std::span<const std::uint8_t> bytes, const ImageProbe& probe, ImageView out,
              AlignedBuffer& scratch) override {
    clear_warnings();
    FirstFrame f(bytes);
    f.seek();
    const GifImageDesc& d = f.gif->Image;
    if (std::max<int>(f.gif->SWidth, d.Left + d.Width) != probe.width ||
        std::max<int>(f.gif->SHeight, d.Top + d.Height) != probe.height) {
      throw Error(ErrorCode::kInvalidArgument, "GIF: the probe passed to decode() is of another image");
    }
    scratch.reserve(static_cast<std::size_t>(workspace_requirements(probe, out.channels)));
    std::uint8_t* const line = scratch.data();
    std::uint8_t* const rgb = scratch.data() + probe.width;
    int colors = 256;
    if (const ColorMapObject* map = f.palette()) {
      colors = std::min(map->ColorCount, 256);
      for (int i = 0; i < colors; ++i) {
        rgb[3 * i] = map->Colors[i].Red;
        rgb[3 * i + 1] = map->Colors[i].Green;
        rgb[3 * i + 2] = map->Colors[i].Blue;
      }
    } else {
      for (int i = 0; i < 256; ++i) rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = static_cast<std::uint8_t>(i);
    }
    // Rows the frame does not cover, and the columns beside it, take the background index.
    const auto background = static_cast<std::uint8_t>(f.transparent >= 0 ? f.transparent : 0);
    std::memset(line, background, static_cast<std::size_t>(probe.width));
    for (int y = 0; y < probe.height; ++y) {
      if (y < d.Top || y >= d.Top + d.Height) store_palette_row(line, probe.width, rgb, colors, out.row(y), out.channels);
    }
    // The frame's lines, in file order (four passes when interlaced).
    static constexpr int kStart[4] = {0, 4, 2, 1};
    static constexpr int kStep[4] = {8, 8, 4, 2};
    const int passes = d.Interlace ? 4 : 1;
    for (int pass = 0; pass < passes; ++pass) {
      const int start = d.Interlace ? kStart[pass] : 0;
      const int step = d.Interlace ? kStep[pass] : 1;
      for (int y = start; y < d.Height; y += step) {
        if (DGifGetLine(f.gif, line + d.Left, d.Width) == GIF_ERROR) fail(f.gif->Error);
        store_palette_row(line, probe.width, rgb, colors, out.row(d.Top + y), out.channels);
      }
    }
  }
};

}  // namespace

std::unique_ptr<FormatDecoder> make_gif_decoder() { return std::make_unique<GifDecoder>(); }

}  // namespace sluice::stages
