// PNG: non-interlaced 8- and 16-bit grey, grey+alpha, RGB and RGBA through the whole-image path
// (png_fast.hpp: one libdeflate call, our own defilter), which hands back to libspng any file it
// cannot vouch for; everything else, and row bands, through libspng.
// libspng (docs/decisions/image-formats.md says why not libpng) reads every colour type,
// 1/2/4/8/16-bit samples, palettes and tRNS, Adam7, and an APNG's default image (libspng skips
// the animation chunks). libspng converts everything to 8-bit RGB itself (tRNS and alpha
// dropped, 16-bit samples scaled to 8), which is Pillow's convert("RGB") for 8-bit data.
// A progressive (non-interlaced) image is decoded row by row straight into the output, so its
// workspace is one row at most, and it can be decoded in row bands (begin_rows) when the image does
// not fit its worker's memory; an interlaced one needs the whole image before any row is final.
// libspng reports a CRC mismatch (the image data's too: the chunks after the last row are read),
// a bad zlib stream or a file cut short as an error code and prints nothing. Pillow does not check
// the image data's CRCs; a file whose IDAT CRC is wrong decodes there and fails here
// (docs/reliability.md).
#include <libdeflate.h>
#include <spng.h>

#include <cstring>
#include <memory>
#include <string>

#include "sluice/core/error.hpp"
#include "stages/decode/image_format.hpp"
#include "stages/decode/png_fast.hpp"

namespace sluice::stages {

namespace {

// How rows are asked of libspng. 8-bit grey, RGB and RGBA come as they are stored (SPNG_FMT_PNG:
// libspng hands over the defiltered row without its pixel-by-pixel conversion, and RGB lands in
// the output row directly), and we drop alpha or expand grey; everything else (palettes, tRNS,
// 1/2/4/16 bits, grey+alpha) through libspng's RGB8. Both give Pillow's pixels.
struct Rows {
  int format = SPNG_FMT_RGB8;
  int samples = 3;        // per pixel, in the decoded row
  std::size_t bytes = 0;  // of a decoded row
  bool direct = false;    // the decoded row is the output row
};

Rows rows_of(const ImageProbe& p, int out_channels) {
  Rows r;
  if (p.bit_depth == 8 && !p.palette && (p.channels == 1 || p.channels == 3 || p.channels == 4)) {
    r.format = SPNG_FMT_PNG;
    r.samples = p.channels;
  }
  r.bytes = static_cast<std::size_t>(p.width) * static_cast<std::size_t>(r.samples);
  r.direct = r.samples == out_channels;
  return r;
}

// The most an ancillary chunk (text, ICC profile, EXIF) may take, and all of them together:
// libspng allocates them before the image data, so a lying length must not size an allocation.
constexpr std::size_t kChunkLimit = 16u << 20;
constexpr std::size_t kChunkCacheLimit = 64u << 20;

struct Ctx {
  spng_ctx* ctx = spng_ctx_new(0);
  Ctx() = default;
  Ctx(const Ctx&) = delete;
  Ctx& operator=(const Ctx&) = delete;
  ~Ctx() { spng_ctx_free(ctx); }
};

[[noreturn]] void fail(int code) {
  const std::string message = spng_strerror(code);
  if (code == SPNG_EOF || code == SPNG_IO_EOF) corrupt(ImageFormat::kPng, "truncated file (" + message + ")");
  corrupt(ImageFormat::kPng, message);
}

void check(int code) {
  if (code != 0) fail(code);
}

std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}

// Whether an acTL chunk (an APNG's animation control) comes before the image data: a walk over
// the chunk headers only.
bool has_animation_chunk(std::span<const std::uint8_t> bytes) {
  std::size_t at = 8;
  while (at + 8 <= bytes.size()) {
    const std::uint32_t length = be32(bytes.data() + at);
    const char* type = reinterpret_cast<const char*>(bytes.data() + at + 4);
    if (std::memcmp(type, "acTL", 4) == 0) return true;
    if (std::memcmp(type, "IDAT", 4) == 0 || length > bytes.size()) return false;
    at += std::size_t{length} + 12;
  }
  return false;
}

void open(Ctx& c, std::span<const std::uint8_t> bytes) {
  if (c.ctx == nullptr) throw Error(ErrorCode::kInternal, "spng_ctx_new failed");
  check(spng_set_png_buffer(c.ctx, bytes.data(), bytes.size()));
  check(spng_set_chunk_limits(c.ctx, kChunkLimit, kChunkCacheLimit));
}

class PngDecoder final : public FormatDecoder {
 public:
  ImageProbe probe(std::span<const std::uint8_t> bytes) override {
    clear_warnings();
    pending_.reset();
    rows_.reset();
    auto owned = std::make_unique<Ctx>();
    Ctx& c = *owned;
    open(c, bytes);
    spng_ihdr ihdr{};
    check(spng_get_ihdr(c.ctx, &ihdr));
    ImageProbe p;
    p.format = ImageFormat::kPng;
    p.width = static_cast<int>(ihdr.width);
    p.height = static_cast<int>(ihdr.height);
    p.bit_depth = ihdr.bit_depth;
    p.interlaced = ihdr.interlace_method != 0;
    switch (ihdr.color_type) {
      case SPNG_COLOR_TYPE_GRAYSCALE: p.channels = 1; break;
      case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA: p.channels = 2; p.alpha = true; break;
      case SPNG_COLOR_TYPE_INDEXED: p.channels = 3; p.palette = true; break;
      case SPNG_COLOR_TYPE_TRUECOLOR_ALPHA: p.channels = 4; p.alpha = true; break;
      default: p.channels = 3; break;
    }
    p.animated = has_animation_chunk(bytes);
    if (png::takes(p)) p.coded_bytes = png::image_data_bytes(bytes);
    // tRNS sits between IHDR and IDAT: asking for it reads the chunks up to the image data.
    spng_trns trns{};
    if (spng_get_trns(c.ctx, &trns) == 0) p.alpha = true;
    // Kept for the decode() that usually follows: the header and the chunks before the image data
    // are parsed once (on small images a second parse was a good part of the decode).
    pending_ = std::move(owned);
    pending_data_ = bytes.data();
    pending_size_ = bytes.size();
    p.token = pending_token_ = ++next_token_;
    return p;
  }

  std::uint64_t workspace_requirements(const ImageProbe& probe, int out_channels) const override {
    const std::uint64_t row = std::uint64_t(probe.width) * 3;
    if (probe.interlaced) return row * static_cast<std::uint64_t>(probe.height);  // whole image, then rows
    if (png::takes(probe)) return png::workspace_requirements(probe);
    const Rows r = rows_of(probe, out_channels);
    return r.direct ? 0 : static_cast<std::uint64_t>(r.bytes);  // one decoded row to convert from
  }

  bool begin_rows(std::span<const std::uint8_t> bytes, const ImageProbe& probe) override {
    clear_warnings();
    rows_.reset();
    if (probe.interlaced) return false;  // Adam7: no row is final before the last pass
    std::unique_ptr<Ctx> owned = take(bytes, probe);
    check(spng_decode_image(owned->ctx, nullptr, 0, rows_of(probe, 3).format, SPNG_DECODE_PROGRESSIVE));
    rows_ = std::move(owned);
    rows_probe_ = probe;
    rows_read_ = 0;
    return true;
  }

  void read_rows(ImageView rows, AlignedBuffer& scratch) override {
    if (!rows_ || rows.width != rows_probe_.width || rows.height > rows_probe_.height - rows_read_) {
      throw Error(ErrorCode::kInvalidArgument, "PNG: read_rows() outside a band decode");
    }
    const Rows r = rows_of(rows_probe_, rows.channels);
    if (!r.direct) scratch.reserve(r.bytes);
    for (int y = 0; y < rows.height; ++y, ++rows_read_) {
      std::uint8_t* target = r.direct ? rows.row(y) : scratch.data();
      const int code = spng_decode_row(rows_->ctx, target, r.bytes);
      if (code != 0 && !(code == SPNG_EOI && rows_read_ + 1 == rows_probe_.height)) {
        rows_.reset();
        fail(code);
      }
      if (!r.direct) png::store_row(target, r.samples, rows.width, rows.row(y), rows.channels);
    }
  }

  void end_rows() override {
    if (!rows_ || rows_read_ != rows_probe_.height) {
      rows_.reset();
      throw Error(ErrorCode::kInvalidArgument, "PNG: end_rows() before the last row");
    }
    const std::unique_ptr<Ctx> done = std::move(rows_);
    finish(*done);
  }

  // The whole-image path where it takes the file (png_fast.hpp); else, interlaced: the whole
  // image in RGB, then its rows; else the rows as they come.
  void decode(std::span<const std::uint8_t> bytes, const ImageProbe& probe, ImageView out,
              AlignedBuffer& scratch) override {
    if (png::takes(probe) && png::decode_whole(bytes, probe, out, scratch, inflater())) {
      clear_warnings();
      rows_.reset();
      pending_.reset();
      return;
    }
    if (!probe.interlaced) {
      begin_rows(bytes, probe);
      read_rows(out, scratch);
      end_rows();
      return;
    }
    clear_warnings();
    rows_.reset();
    std::unique_ptr<Ctx> owned = take(bytes, probe);
    const std::size_t row = static_cast<std::size_t>(probe.width) * 3;
    const std::size_t size = row * static_cast<std::size_t>(probe.height);
    scratch.reserve(size);
    check(spng_decode_image(owned->ctx, scratch.data(), size, SPNG_FMT_RGB8, 0));
    for (int y = 0; y < probe.height; ++y) store_rgb_row(scratch.data() + row * y, probe.width, out.row(y), out.channels);
    finish(*owned);
  }

 private:
  libdeflate_decompressor& inflater() {
    if (!inflater_) {
      inflater_.reset(libdeflate_alloc_decompressor());
      if (!inflater_) throw Error(ErrorCode::kInternal, "libdeflate_alloc_decompressor failed");
    }
    return *inflater_;
  }

  // The image data ends with its zlib stream, before the last IDAT chunk's CRC: reading on to
  // IEND checks it (a file that merely lacks IEND still decodes, as in Pillow).
  static void finish(Ctx& c) {
    const int code = spng_decode_chunks(c.ctx);
    if (code == SPNG_ECHUNK_CRC) fail(code);
  }

  // The context probe() left for these bytes and this probe, else a fresh one.
  std::unique_ptr<Ctx> take(std::span<const std::uint8_t> bytes, const ImageProbe& probe) {
    std::unique_ptr<Ctx> owned = std::move(pending_);
    if (!owned || probe.token == 0 || probe.token != pending_token_ || pending_data_ != bytes.data() ||
        pending_size_ != bytes.size()) {
      owned = std::make_unique<Ctx>();
      open(*owned, bytes);
    }
    return owned;
  }

  struct FreeInflater {
    void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
  };
  std::unique_ptr<libdeflate_decompressor, FreeInflater> inflater_;
  // A band decode in progress.
  std::unique_ptr<Ctx> rows_;
  ImageProbe rows_probe_;
  int rows_read_ = 0;
  // The context probe() left, with the bytes and token it belongs to.
  std::unique_ptr<Ctx> pending_;
  const std::uint8_t* pending_data_ = nullptr;
  std::size_t pending_size_ = 0;
  std::uint64_t pending_token_ = 0;
  std::uint64_t next_token_ = 0;
};

}  // namespace

std::unique_ptr<FormatDecoder> make_png_decoder() { return std::make_unique<PngDecoder>(); }

}  // namespace sluice::stages
