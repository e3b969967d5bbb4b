// image_formats_fuzzer: the decode stage's dispatch on first bytes and every format decoder
// behind it (PNG, WebP, GIF, BMP, PNM, TIFF; JPEG's header through JpegDecoder) on crafted files.
//
// Input: [0] flags: bit 0 grey output, bit 1 max_image_pixels 4096 instead of 4M, so that the bomb
//            check is crossed both ways, bit 2 a PNG built from raw rows (below)   [1..] the file.
// A PNG built from raw rows: [1] colour type, [2] bit depth, [3] width, [4] height, [5..] the image
// data before compression (each row's filter byte and its filtered samples): the fuzzer writes the
// IHDR, compresses the data into one IDAT chunk and sets every CRC, so that mutations reach the
// whole-image PNG path's defilter and conversions (stages/decode/png_fast.cpp) instead of failing a
// CRC or the zlib stream's Adler-32.
// Expected: a decoded image or sluice::Error. A finding: a crash, a sanitizer report, a hang
// (libFuzzer's timeout), another exception, kInternal, a probe whose size is not positive or
// passes max_image_pixels, a workspace grown past what its decoder stated, or an EXIF orientation
// (stages/decode/exif.hpp, read from the file and from the bytes as a bare EXIF block) outside
// 1 to 8. A decoded image with an orientation is turned upright (stages/image/orient.hpp).
//
// Seeds: a small image in each format and variant the encoders here write (libspng's encoder,
// libwebp's, libtiff's; BMP, PNM and GIF by hand), JPEG markers and a WebP carrying EXIF blocks,
// so none is checked in.
#include <libdeflate.h>
#include <spng.h>
#include <tiffio.h>
#include <webp/encode.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "fuzz_support.hpp"
#include "sluice/detail/memory/aligned_buffer.hpp"
#include "stages/decode/exif.hpp"
#include "stages/decode/image_decoder.hpp"
#include "stages/decode/jpeg_decoder.hpp"
#include "stages/image/orient.hpp"

namespace sluice::fuzz {

namespace {

using Bytes = std::vector<std::uint8_t>;
constexpr int kW = 13, kH = 11;

Bytes pixels(int channels) {
  Bytes p(static_cast<std::size_t>(kW) * kH * channels);
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<std::uint8_t>(i * 37 + (i / 7) * 11);
  return p;
}

void le(Bytes& out, std::uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

Bytes png(int color_type, int depth, bool interlace) {
  spng_ctx* ctx = spng_ctx_new(SPNG_CTX_ENCODER);
  spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1);
  spng_ihdr ihdr{kW, kH, static_cast<std::uint8_t>(depth), static_cast<std::uint8_t>(color_type), 0, 0,
                 static_cast<std::uint8_t>(interlace ? 1 : 0)};
  spng_set_ihdr(ctx, &ihdr);
  int channels = color_type == 2 ? 3 : color_type == 6 ? 4 : color_type == 4 ? 2 : 1;
  if (color_type == 3) {
    spng_plte plte{};
    plte.n_entries = 16;
    for (int i = 0; i < 16; ++i) plte.entries[i] = {static_cast<std::uint8_t>(i * 16), static_cast<std::uint8_t>(255 - i * 16), 40, 255};
    spng_set_plte(ctx, &plte);
  }
  const std::size_t row = (static_cast<std::size_t>(kW) * channels * depth + 7) / 8;
  Bytes img = pixels(static_cast<int>(row * kH / kW + 1));
  img.resize(row * kH);
  if (color_type == 3) for (auto& b : img) b &= depth == 8 ? 15 : 0xFF;
  spng_encode_image(ctx, img.data(), img.size(), SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
  std::size_t size = 0;
  int error = 0;
  auto* out = static_cast<std::uint8_t*>(spng_get_png_buffer(ctx, &size, &error));
  Bytes bytes(out, out + (out != nullptr ? size : 0));
  std::free(out);
  spng_ctx_free(ctx);
  return bytes;
}

Bytes webp(bool lossless, bool alpha) {
  const Bytes p = pixels(alpha ? 4 : 3);
  std::uint8_t* out = nullptr;
  std::size_t size = 0;
  if (alpha) {
    size = lossless ? WebPEncodeLosslessRGBA(p.data(), kW, kH, kW * 4, &out) : WebPEncodeRGBA(p.data(), kW, kH, kW * 4, 80, &out);
  } else {
    size = lossless ? WebPEncodeLosslessRGB(p.data(), kW, kH, kW * 3, &out) : WebPEncodeRGB(p.data(), kW, kH, kW * 3, 80, &out);
  }
  Bytes bytes(out, out + size);
  WebPFree(out);
  return bytes;
}

Bytes bmp(int bits, std::uint32_t compression) {
  const std::uint32_t stride = (kW * bits + 31) / 32 * 4;
  const int colors = bits <= 8 ? 1 << bits : 0;
  Bytes data;
  if (compression == 1) {  // RLE8: a run and a literal per row, end of line, end of bitmap
    for (int y = 0; y < kH; ++y) {
      data.insert(data.end(), {5, static_cast<std::uint8_t>(y), 0, 4, 1, 2, 3, 4, 1, 9, 0, 3, 7, 8, 9, 0, 0, 0});
    }
    data.insert(data.end(), {0, 1});
  } else {
    const Bytes p = pixels(static_cast<int>(stride * kH / kW + 1));
    data.assign(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(stride) * kH);
  }
  Bytes out{'B', 'M'};
  const std::uint32_t offset = 14 + 40 + 4 * colors;
  le(out, offset + static_cast<std::uint32_t>(data.size()), 4);
  le(out, 0, 4);
  le(out, offset, 4);
  le(out, 40, 4);
  le(out, kW, 4);
  le(out, kH, 4);
  le(out, 1, 2);
  le(out, static_cast<std::uint32_t>(bits), 2);
  le(out, compression, 4);
  le(out, static_cast<std::uint32_t>(data.size()), 4);
  le(out, 0, 4);
  le(out, 0, 4);
  le(out, static_cast<std::uint32_t>(colors), 4);
  le(out, 0, 4);
  for (int i = 0; i < colors; ++i) le(out, static_cast<std::uint32_t>(i * 0x010203), 4);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

Bytes pnm(const char* kind, int maxval) {
  const int channels = kind[1] == '3' || kind[1] == '6' ? 3 : 1;
  std::string head = std::string(kind) + "\n# seed\n" + std::to_string(kW) + " " + std::to_string(kH) + "\n";
  if (kind[1] != '1' && kind[1] != '4') head += std::to_string(maxval) + "\n";
  Bytes out(head.begin(), head.end());
  const Bytes p = pixels(channels);
  if (kind[1] <= '3') {
    std::string text;
    for (std::size_t i = 0; i < p.size(); ++i) text += std::to_string(kind[1] == '1' ? p[i] & 1 : p[i] % (maxval + 1)) + " ";
    out.insert(out.end(), text.begin(), text.end());
  } else if (kind[1] == '4') {
    out.insert(out.end(), p.begin(), p.begin() + (kW + 7) / 8 * kH);
  } else {
    for (const std::uint8_t v : p) {
      if (maxval > 255) out.push_back(0);
      out.push_back(static_cast<std::uint8_t>(v % (maxval + 1)));
    }
  }
  return out;
}

// A GIF whose indices are all literal codes (a clear code before the table would grow).
Bytes gif(bool interlace, bool local) {
  Bytes out{'G', 'I', 'F', '8', '9', 'a'};
  le(out, kW, 2);
  le(out, kH, 2);
  out.insert(out.end(), {static_cast<std::uint8_t>(local ? 0x00 : 0xF3), 0, 0});
  const auto palette = [&out] {
    for (int i = 0; i < 16; ++i) out.insert(out.end(), {static_cast<std::uint8_t>(i * 16), 30, static_cast<std::uint8_t>(255 - i)});
  };
  if (!local) palette();
  out.insert(out.end(), {0x21, 0xF9, 4, 1, 0, 0, 3, 0, 0x2C});
  le(out, 0, 2);
  le(out, 0, 2);
  le(out, kW, 2);
  le(out, kH, 2);
  out.push_back(static_cast<std::uint8_t>((local ? 0x83 : 0) | (interlace ? 0x40 : 0)));
  if (local) palette();
  const int min_size = 4, clear = 16, end = 17, size = 5;
  std::vector<int> codes{clear};
  int run = 0;
  for (int i = 0; i < kW * kH; ++i) {
    if (run == 12) {
      codes.push_back(clear);
      run = 0;
    }
    codes.push_back(i % 16);
    ++run;
  }
  codes.push_back(end);
  Bytes packed;
  std::uint32_t acc = 0;
  int bits = 0;
  for (const int c : codes) {
    acc |= static_cast<std::uint32_t>(c) << bits;
    bits += size;
    while (bits >= 8) {
      packed.push_back(static_cast<std::uint8_t>(acc));
      acc >>= 8;
      bits -= 8;
    }
  }
  if (bits > 0) packed.push_back(static_cast<std::uint8_t>(acc));
  out.push_back(min_size);
  for (std::size_t i = 0; i < packed.size(); i += 255) {
    const std::size_t n = std::min<std::size_t>(255, packed.size() - i);
    out.push_back(static_cast<std::uint8_t>(n));
    out.insert(out.end(), packed.begin() + static_cast<std::ptrdiff_t>(i), packed.begin() + static_cast<std::ptrdiff_t>(i + n));
  }
  out.insert(out.end(), {0, 0x3B});
  return out;
}

Bytes tiff(std::uint16_t compression, std::uint16_t photometric, int channels, bool tiled) {
  const std::filesystem::path path = scratch() / "seed.tif";
  TIFF* t = TIFFOpen(path.c_str(), "w");
  TIFFSetField(t, TIFFTAG_IMAGEWIDTH, kW);
  TIFFSetField(t, TIFFTAG_IMAGELENGTH, kH);
  TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, 8);
  TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, channels);
  TIFFSetField(t, TIFFTAG_PHOTOMETRIC, photometric);
  TIFFSetField(t, TIFFTAG_COMPRESSION, compression);
  TIFFSetField(t, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
  if (photometric == PHOTOMETRIC_PALETTE) {
    std::vector<std::uint16_t> map(256);
    for (int i = 0; i < 256; ++i) map[static_cast<std::size_t>(i)] = static_cast<std::uint16_t>(i * 257);
    TIFFSetField(t, TIFFTAG_COLORMAP, map.data(), map.data(), map.data());
  }
  const Bytes p = pixels(channels);
  if (tiled) {
    TIFFSetField(t, TIFFTAG_TILEWIDTH, 16);
    TIFFSetField(t, TIFFTAG_TILELENGTH, 16);
    Bytes tile(static_cast<std::size_t>(16) * 16 * channels);
    for (int y = 0; y < kH; ++y) std::memcpy(tile.data() + static_cast<std::size_t>(y) * 16 * channels, p.data() + static_cast<std::size_t>(y) * kW * channels, static_cast<std::size_t>(kW) * channels);
    TIFFWriteTile(t, tile.data(), 0, 0, 0, 0);
  } else {
    TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, compression == COMPRESSION_JPEG ? 16 : 4);  // JPEG strips: whole MCUs
    for (int y = 0; y < kH; ++y) TIFFWriteScanline(t, const_cast<std::uint8_t*>(p.data()) + static_cast<std::size_t>(y) * kW * channels, static_cast<std::uint32_t>(y), 0);
  }
  TIFFClose(t);
  std::ifstream in(path, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// An EXIF block (a TIFF header and one IFD) whose orientation entry says `orientation`.
Bytes exif_block(bool little, int orientation) {
  Bytes b{'E', 'x', 'i', 'f', 0, 0};
  const auto put = [&](std::uint32_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) b.push_back(static_cast<std::uint8_t>(v >> (8 * (little ? i : bytes - 1 - i))));
  };
  const std::uint8_t order = little ? 'I' : 'M';
  b.insert(b.end(), {order, order});
  put(42, 2);
  put(8, 4);
  put(2, 2);  // two entries: an unrelated one, then the orientation
  put(0x010F, 2);
  put(2, 2);
  put(4, 4);
  put(0, 4);
  put(0x0112, 2);
  put(3, 2);
  put(1, 4);
  put(static_cast<std::uint32_t>(orientation), 2);
  put(0, 2);
  put(0, 4);
  return b;
}

// The markers of a JPEG before its scan, with an EXIF segment (and a second one Pillow ignores).
Bytes jpeg_markers(int orientation) {
  Bytes out{0xFF, 0xD8, 0xFF, 0xE0, 0, 4, 'J', 'F'};
  for (const Bytes& block : {exif_block(false, orientation), exif_block(true, 3)}) {
    out.insert(out.end(), {0xFF, 0xE1, static_cast<std::uint8_t>((block.size() + 2) >> 8), static_cast<std::uint8_t>(block.size() + 2)});
    out.insert(out.end(), block.begin(), block.end());
  }
  out.insert(out.end(), {0xFF, 0xD9});
  return out;
}

// A lossy WebP in its extended form with an EXIF chunk (without the "Exif\0\0" prefix, as Pillow
// writes it).
Bytes webp_exif(int orientation) {
  const Bytes simple = webp(false, false);
  Bytes block = exif_block(true, orientation);
  block.erase(block.begin(), block.begin() + 6);
  Bytes out{'R', 'I', 'F', 'F', 0, 0, 0, 0, 'W', 'E', 'B', 'P', 'V', 'P', '8', 'X'};
  le(out, 10, 4);
  out.insert(out.end(), {0x08, 0, 0, 0});  // flags: EXIF
  le(out, kW - 1, 3);
  le(out, kH - 1, 3);
  out.insert(out.end(), simple.begin() + 12, simple.end());
  out.insert(out.end(), {'E', 'X', 'I', 'F'});
  le(out, static_cast<std::uint32_t>(block.size()), 4);
  out.insert(out.end(), block.begin(), block.end());
  if (block.size() % 2 != 0) out.push_back(0);
  const std::uint32_t riff = static_cast<std::uint32_t>(out.size() - 8);
  for (int i = 0; i < 4; ++i) out[4 + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(riff >> (8 * i));
  return out;
}

}  // namespace

void be32(Bytes& out, std::uint32_t v) {
  for (int i = 3; i >= 0; --i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

void png_chunk(Bytes& out, const char* type, const Bytes& data) {
  be32(out, static_cast<std::uint32_t>(data.size()));
  const std::size_t start = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  be32(out, libdeflate_crc32(0, out.data() + start, data.size() + 4));
}

// The PNG a raw-rows input describes (the input's layout is at the top).
Bytes png_of_rows(std::span<const std::uint8_t> in) {
  if (in.size() < 4) return {};
  Bytes out{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  Bytes ihdr;
  be32(ihdr, in[2]);
  be32(ihdr, in[3]);
  ihdr.insert(ihdr.end(), {in[1], in[0], 0, 0, 0});
  png_chunk(out, "IHDR", ihdr);
  const std::span<const std::uint8_t> rows = in.subspan(4);
  libdeflate_compressor* c = libdeflate_alloc_compressor(1);
  Bytes idat(libdeflate_zlib_compress_bound(c, rows.size()));
  idat.resize(libdeflate_zlib_compress(c, rows.data(), rows.size(), idat.data(), idat.size()));
  libdeflate_free_compressor(c);
  png_chunk(out, "IDAT", idat);
  png_chunk(out, "IEND", {});
  return out;
}

// A raw-rows input: kW x kH, every filter type in turn, samples of a pattern.
Bytes raw_rows(int color_type, int depth) {
  const int samples = color_type == 2 ? 3 : color_type == 6 ? 4 : color_type == 4 ? 2 : 1;
  const std::size_t row = (static_cast<std::size_t>(kW) * samples * depth + 7) / 8;
  Bytes out{static_cast<std::uint8_t>(color_type), static_cast<std::uint8_t>(depth), kW, kH};
  for (int y = 0; y < kH; ++y) {
    out.push_back(static_cast<std::uint8_t>(y % 5));
    for (std::size_t i = 0; i < row; ++i) out.push_back(static_cast<std::uint8_t>(i * 29 + static_cast<std::size_t>(y) * 7));
  }
  return out;
}

void write_seeds(const std::filesystem::path& folder) {
  const auto seed = [&folder](const std::string& name, Bytes file) {
    for (const std::uint8_t flags : {0, 1}) {
      Bytes input{flags};
      input.insert(input.end(), file.begin(), file.end());
      write_seed(folder, name + (flags ? "-grey" : ""), input);
    }
  };
  seed("png-rgb", png(2, 8, false));
  seed("png-rgba16", png(6, 16, false));
  seed("png-grey2-adam7", png(0, 2, true));
  seed("png-palette4", png(3, 4, false));
  seed("png-grey-alpha", png(4, 8, true));
  seed("webp-lossy", webp(false, false));
  seed("webp-lossless-alpha", webp(true, true));
  seed("bmp-24", bmp(24, 0));
  seed("bmp-4", bmp(4, 0));
  seed("bmp-16", bmp(16, 0));
  seed("bmp-rle8", bmp(8, 1));
  seed("pnm-p1", pnm("P1", 1));
  seed("pnm-p3", pnm("P3", 200));
  seed("pnm-p4", pnm("P4", 1));
  seed("pnm-p6-16", pnm("P6", 1000));
  seed("gif-global", gif(false, false));
  seed("gif-local-interlaced", gif(true, true));
  seed("tiff-lzw-rgb", tiff(COMPRESSION_LZW, PHOTOMETRIC_RGB, 3, false));
  seed("tiff-deflate-tiled", tiff(COMPRESSION_ADOBE_DEFLATE, PHOTOMETRIC_RGB, 3, true));
  seed("tiff-packbits-cmyk", tiff(COMPRESSION_PACKBITS, PHOTOMETRIC_SEPARATED, 4, false));
  seed("tiff-palette", tiff(COMPRESSION_NONE, PHOTOMETRIC_PALETTE, 1, false));
  seed("tiff-grey-jpeg", tiff(COMPRESSION_JPEG, PHOTOMETRIC_MINISBLACK, 1, false));
  seed("jpeg-exif-6", jpeg_markers(6));
  seed("webp-exif-8", webp_exif(8));
  seed("webp-exif-3", webp_exif(3));
  seed("exif-block-5", exif_block(false, 5));
  for (const auto& [color, depth] : {std::pair{2, 8}, std::pair{6, 8}, std::pair{0, 8}, std::pair{4, 8},
                                     std::pair{2, 16}, std::pair{4, 16}}) {
    Bytes input{4};  // flags: a PNG built from raw rows
    const Bytes rows = raw_rows(color, depth);
    input.insert(input.end(), rows.begin(), rows.end());
    write_seed(folder, "png-rows-" + std::to_string(color) + "-" + std::to_string(depth), input);
  }
}

}  // namespace sluice::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sluice;
  if (size < 1) return 0;
  const std::uint8_t flags = data[0];
  std::span<const std::uint8_t> file(data + 1, size - 1);
  fuzz::Bytes built;
  if ((flags & 4) != 0) {
    built = fuzz::png_of_rows(file);
    file = built;
  }
  DecodeOptions options;
  options.color = (flags & 1) != 0 ? Color::kGrey : Color::kRGB;
  // Small enough that a lying header cannot make the fuzzer allocate gigabytes of output.
  options.max_image_pixels = (flags & 2) != 0 ? 4096 : (1u << 22);
  MemoryBudget budget(std::uint64_t{1} << 31);  // declared first: it outlives the workspace it accounts
  stages::ImageDecoder decoder(options);
  stages::JpegDecoder jpeg(options);
  decoder.attach(budget, MemoryUse::kDecodeBuffers, 0);
  const int orientation = stages::exif_orientation(file);
  if (orientation < 1 || orientation > 8) fuzz::finding("exif", "an orientation outside 1 to 8");
  if (const int bare = stages::exif_block_orientation(file); bare < 1 || bare > 8) {
    fuzz::finding("exif", "a block's orientation outside 1 to 8");
  }
  try {
    const stages::ImageProbe probe = stages::probe_image(file, jpeg, decoder);
    if (probe.width <= 0 || probe.height <= 0) fuzz::finding("probe", "a size that is not positive");
    if (std::uint64_t(probe.width) * std::uint64_t(probe.height) > options.max_image_pixels) {
      fuzz::finding("probe", "an image above max_image_pixels");
    }
    if (probe.format == stages::ImageFormat::kJpeg) return 0;  // decode_fuzzer covers the JPEG decode
    const std::uint64_t stated = decoder.workspace_requirements(probe);
    const int ch = decoder.channels();
    std::vector<std::uint8_t> out(static_cast<std::size_t>(probe.width) * probe.height * ch);
    decoder.decode(file, probe, ImageView{out.data(), probe.width, probe.height, ch, static_cast<std::ptrdiff_t>(probe.width) * ch});
    if (budget.used() > AlignedBuffer::rounded_capacity(static_cast<std::size_t>(stated))) {
      fuzz::finding("workspace", "grew past what the decoder stated");
    }
    if (orientation != 1) {
      const Size2 up = stages::upright_size({probe.width, probe.height}, orientation);
      std::vector<std::uint8_t> upright(out.size());
      stages::orient(ConstImageView(out.data(), probe.width, probe.height, ch, static_cast<std::ptrdiff_t>(probe.width) * ch),
                     orientation, ImageView{upright.data(), up.width, up.height, ch, static_cast<std::ptrdiff_t>(up.width) * ch});
    }
  } catch (const Error& e) {
    fuzz::check_error(e, "image_formats");
  }
  return 0;
}
