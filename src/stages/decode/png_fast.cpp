// The whole-image PNG path (png_fast.hpp). The checks libspng makes on the way through the image
// data are made here too, so that what this path accepts libspng accepts with the same pixels:
// every IDAT chunk's CRC and every whole chunk's after it up to IEND (libdeflate's CRC-32 is a
// small share of the decode), the zlib stream's header, blocks and Adler-32 (libdeflate checks
// them: Pillow refuses a PNG whose Adler-32 is wrong, so it cannot be skipped), its length (exactly
// the rows' bytes) and every row's filter type. Anything else goes back to libspng.
#include "stages/decode/png_fast.hpp"

#include <libdeflate.h>

#include <cstring>

#include "stages/decode/png_defilter.hpp"

namespace sluice::stages::png {

namespace {

std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}

// One chunk as the file holds it: `whole` when its data and CRC are all there.
struct Chunk {
  std::size_t at = 0;  // of its length field
  std::uint32_t length = 0;
  bool whole = false;

  bool is(const std::uint8_t* bytes, const char* type) const { return std::memcmp(bytes + at + 4, type, 4) == 0; }
  std::size_t next() const { return at + 12 + std::size_t{length}; }
};

// The chunk at `at`, or none (length 0, not whole, at == size) past the last chunk header.
Chunk chunk_at(std::span<const std::uint8_t> bytes, std::size_t at) {
  Chunk c;
  c.at = at;
  if (at + 8 > bytes.size()) {
    c.at = bytes.size();
    return c;
  }
  c.length = be32(bytes.data() + at);
  c.whole = c.length <= 0x7FFFFFFFu && c.next() <= bytes.size();
  return c;
}

bool crc_matches(std::span<const std::uint8_t> bytes, const Chunk& c) {
  const std::uint8_t* type = bytes.data() + c.at + 4;
  return libdeflate_crc32(0, type, 4 + std::size_t{c.length}) == be32(type + 4 + c.length);
}

// The first IDAT chunk, or none.
Chunk first_image_data(std::span<const std::uint8_t> bytes) {
  Chunk c = chunk_at(bytes, 8);
  while (c.whole && !c.is(bytes.data(), "IDAT")) c = chunk_at(bytes, c.next());
  return c;
}

int bytes_per_pixel(const ImageProbe& probe) { return probe.channels * (probe.bit_depth / 8); }

std::size_t row_bytes(const ImageProbe& probe) {
  return static_cast<std::size_t>(probe.width) * static_cast<std::size_t>(bytes_per_pixel(probe));
}

// Sample i of a row of 8-bit or big-endian 16-bit samples, in 8 bits: 16-bit ones scaled, rounded,
// (v x 255 + 32767) / 65535.
template <int Bytes>
inline std::uint8_t sample(const std::uint8_t* in, int i) {
  if constexpr (Bytes == 1) {
    return in[i];
  } else {
    const unsigned v = (unsigned{in[2 * i]} << 8) | in[2 * i + 1];
    return static_cast<std::uint8_t>((v * 255 + 32767) / 65535);
  }
}

template <int Bytes>
void store_samples(const std::uint8_t* in, int samples, int width, std::uint8_t* out, int out_channels) {
  for (int x = 0; x < width; ++x) {
    const int at = x * samples;
    if (samples <= 2) {  // grey, grey+alpha: the grey
      const std::uint8_t g = sample<Bytes>(in, at);
      if (out_channels == 1) {
        out[x] = g;
      } else {
        out[3 * x] = out[3 * x + 1] = out[3 * x + 2] = g;
      }
      continue;
    }
    const std::uint8_t r = sample<Bytes>(in, at), g = sample<Bytes>(in, at + 1), b = sample<Bytes>(in, at + 2);
    if (out_channels == 1) {
      out[x] = rgb_to_grey(r, g, b);
    } else {
      out[3 * x] = r;
      out[3 * x + 1] = g;
      out[3 * x + 2] = b;
    }
  }
}

}  // namespace

void store_row(const std::uint8_t* in, int samples, int width, std::uint8_t* out, int out_channels) {
  if (samples == 1 && out_channels == 1) {
    std::memcpy(out, in, static_cast<std::size_t>(width));
  } else if (samples == 3) {
    store_rgb_row(in, width, out, out_channels);
  } else {
    store_samples<1>(in, samples, width, out, out_channels);
  }
}

std::uint64_t image_data_bytes(std::span<const std::uint8_t> bytes) {
  std::uint64_t total = 0;
  for (Chunk c = first_image_data(bytes); c.at < bytes.size() && c.is(bytes.data(), "IDAT");
       c = chunk_at(bytes, c.next())) {
    if (!c.whole) return total + std::min<std::uint64_t>(c.length, bytes.size() - c.at - 8);
    total += c.length;
  }
  return total;
}

bool takes(const ImageProbe& probe) {
  return probe.format == ImageFormat::kPng && (probe.bit_depth == 8 || probe.bit_depth == 16) && !probe.interlaced &&
         !probe.palette &&
         probe.channels >= 1 && probe.channels <= 4;
}

std::uint64_t workspace_requirements(const ImageProbe& probe) {
  const std::uint64_t rows = (std::uint64_t{row_bytes(probe)} + 1) * static_cast<std::uint64_t>(probe.height);
  return rows + probe.coded_bytes;
}

bool decode_whole(std::span<const std::uint8_t> bytes, const ImageProbe& probe, ImageView out,
                  AlignedBuffer& scratch, libdeflate_decompressor& inflater) {
  if (!takes(probe)) return false;
  // The IDAT chunks (consecutive: libspng refuses any other chunk between them), CRCs checked.
  const Chunk first = first_image_data(bytes);
  std::size_t chunks = 0;
  std::size_t coded = 0;
  Chunk c = first;
  for (; c.at < bytes.size() && c.is(bytes.data(), "IDAT"); c = chunk_at(bytes, c.next()), ++chunks) {
    if (!c.whole || !crc_matches(bytes, c)) return false;
    coded += c.length;
  }
  if (chunks == 0) return false;
  // The chunks after the image data, up to IEND: libspng reads them and refuses a CRC mismatch.
  for (; c.whole && !c.is(bytes.data(), "IEND"); c = chunk_at(bytes, c.next())) {
    if (!crc_matches(bytes, c)) return false;
  }
  if (c.whole && !crc_matches(bytes, c)) return false;

  const std::size_t stride = row_bytes(probe) + 1;
  const std::size_t rows = stride * static_cast<std::size_t>(probe.height);
  if (!scratch.try_reserve(rows + (chunks > 1 ? coded : 0))) return false;
  const std::uint8_t* stream = bytes.data() + first.at + 8;
  if (chunks > 1) {  // joined: libdeflate takes one buffer
    std::uint8_t* joined = scratch.data() + rows;
    std::size_t at = 0;
    for (Chunk i = first; at < coded; i = chunk_at(bytes, i.next())) {
      std::memcpy(joined + at, bytes.data() + i.at + 8, i.length);
      at += i.length;
    }
    stream = joined;
  }
  // No actual-size pointer: libdeflate then fails unless the stream gives exactly `rows` bytes.
  if (libdeflate_zlib_decompress(&inflater, stream, coded, scratch.data(), rows, nullptr) != LIBDEFLATE_SUCCESS) {
    return false;
  }

  // Each row defiltered straight into the output where it is the output's layout (RGB to RGB,
  // grey to grey), else in place and converted while it is in cache.
  const int bpp = bytes_per_pixel(probe);
  const bool direct = probe.channels == out.channels && probe.bit_depth == 8;
  const std::size_t n = row_bytes(probe);
  const std::uint8_t* prior = nullptr;
  for (int y = 0; y < probe.height; ++y) {
    std::uint8_t* raw = scratch.data() + stride * static_cast<std::size_t>(y);
    std::uint8_t* target = direct ? out.row(y) : raw + 1;
    if (!defilter_row(raw[0], raw + 1, prior, target, n, bpp)) return false;
    if (probe.bit_depth == 16) {
      store_samples<2>(target, probe.channels, probe.width, out.row(y), out.channels);
    } else if (!direct) {
      store_row(target, probe.channels, probe.width, out.row(y), out.channels);
    }
    prior = target;
  }
  return true;
}

}  // namespace sluice::stages::png
