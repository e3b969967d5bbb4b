// EXIF orientation: finding the block in a JPEG, WebP or PNG file (a TIFF file is one) and reading
// tag 0x0112 from its first IFD, every read bounded by the block (exif.hpp).
#include "stages/decode/exif.hpp"

#include <algorithm>
#include <cstring>

namespace sluice::stages {

namespace {

constexpr std::uint16_t kOrientationTag = 0x0112;

std::uint32_t be16(const std::uint8_t* p) { return static_cast<std::uint32_t>(p[0] << 8 | p[1]); }
std::uint32_t le32(const std::uint8_t* p) {
  return std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 | std::uint32_t{p[3]} << 24;
}

// The TIFF block's byte order.
struct Reader {
  std::span<const std::uint8_t> b;
  bool little;
  std::uint32_t u16(std::size_t at) const {
    return little ? static_cast<std::uint32_t>(b[at] | b[at + 1] << 8) : be16(&b[at]);
  }
  std::uint32_t u32(std::size_t at) const {
    return little ? le32(&b[at]) : (u16(at) << 16 | u16(at + 2));
  }
};

// What an orientation entry says, read as Pillow 9.4 reads an IFD entry and exif_transpose then
// looks it up: the first of its values (Pillow takes the first of several, with a warning) when it
// equals an integer (SBYTE, SHORT, LONG, SSHORT, SLONG, IFD, LONG8; RATIONAL, SRATIONAL, FLOAT and
// DOUBLE when the number is whole: 6.0 finds 6 in Pillow's table); kNoTurn for a value the lookup
// cannot find (BYTE and UNDEFINED come back as bytes, ASCII as text); kSkip for an entry Pillow
// skips (an unknown type, no values, values past the block's end), which leaves an earlier one.
constexpr long long kNoTurn = -1;
constexpr long long kSkip = -2;

int unit_of(std::uint32_t type) {
  switch (type) {
    case 1: case 2: case 6: case 7: return 1;
    case 3: case 8: return 2;
    case 4: case 9: case 11: case 13: return 4;
    case 5: case 10: case 12: case 16: return 8;
    default: return 0;
  }
}

// A whole number from 1 to 8 as itself, anything else as kNoTurn.
long long whole(double v) {
  return v >= 1 && v <= 8 && v == static_cast<double>(static_cast<int>(v)) ? static_cast<long long>(v) : kNoTurn;
}

long long entry_value(const Reader& r, std::size_t entry) {
  const std::uint32_t type = r.u16(entry + 2);
  const std::uint64_t count = r.u32(entry + 4);
  const int unit = unit_of(type);
  if (unit == 0 || count == 0) return kSkip;
  std::size_t at = entry + 8;
  if (count * static_cast<std::uint64_t>(unit) > 4) {
    at = r.u32(entry + 8);
    if (at > r.b.size() || count * static_cast<std::uint64_t>(unit) > r.b.size() - at) return kSkip;
  }
  switch (type) {
    case 6: return static_cast<std::int8_t>(r.b[at]);
    case 3: return r.u16(at);
    case 8: return static_cast<std::int16_t>(r.u16(at));
    case 4: case 13: return r.u32(at);
    case 9: return static_cast<std::int32_t>(r.u32(at));
    case 16: {
      const std::uint64_t v = r.little ? (std::uint64_t{r.u32(at + 4)} << 32 | r.u32(at))
                                       : (std::uint64_t{r.u32(at)} << 32 | r.u32(at + 4));
      return v <= 8 ? static_cast<long long>(v) : kNoTurn;
    }
    case 5: case 10: {
      const double num = type == 5 ? double(r.u32(at)) : double(static_cast<std::int32_t>(r.u32(at)));
      const double den = type == 5 ? double(r.u32(at + 4)) : double(static_cast<std::int32_t>(r.u32(at + 4)));
      return den == 0 ? kNoTurn : whole(num / den);
    }
    case 11: {
      const std::uint32_t bits = r.u32(at);
      float f = 0;
      std::memcpy(&f, &bits, sizeof f);
      return whole(f);
    }
    case 12: {
      const std::uint64_t bits = r.little ? (std::uint64_t{r.u32(at + 4)} << 32 | r.u32(at))
                                          : (std::uint64_t{r.u32(at)} << 32 | r.u32(at + 4));
      double d = 0;
      std::memcpy(&d, &bits, sizeof d);
      return whole(d);
    }
    default: return kNoTurn;  // BYTE, UNDEFINED: bytes; ASCII: text
  }
}

}  // namespace

namespace {

// The orientation tag of the first IFD of TIFF data (an EXIF block without its prefix, or a whole
// TIFF file, which is the same structure).
int tiff_orientation(std::span<const std::uint8_t> block) {
  if (block.size() < 8) return 1;
  Reader r{block, false};
  if (block[0] == 'I' && block[1] == 'I') {
    r.little = true;
  } else if (block[0] != 'M' || block[1] != 'M') {
    return 1;
  }
  if (r.u16(2) != 42) return 1;
  const std::uint32_t ifd = r.u32(4);
  if (ifd > block.size() - 2) return 1;
  const std::uint32_t entries = r.u16(ifd);
  // Entries are read until the block ends, as Pillow reads them; a later orientation entry
  // replaces an earlier one, as in Pillow's dictionary.
  int orientation = 1;
  for (std::uint32_t i = 0; i < entries; ++i) {
    const std::size_t entry = std::size_t{ifd} + 2 + std::size_t{i} * 12;
    if (entry + 12 > block.size()) break;
    if (r.u16(entry) != kOrientationTag) continue;
    const long long v = entry_value(r, entry);
    if (v != kSkip) orientation = v >= 1 && v <= 8 ? static_cast<int>(v) : 1;
  }
  return orientation;
}

}  // namespace

int exif_block_orientation(std::span<const std::uint8_t> block) {
  static constexpr std::uint8_t kPrefix[] = {'E', 'x', 'i', 'f', 0, 0};
  if (block.size() >= sizeof kPrefix && std::memcmp(block.data(), kPrefix, sizeof kPrefix) == 0) {
    block = block.subspan(sizeof kPrefix);
  }
  return tiff_orientation(block);
}

namespace {

// JPEG: the markers before the first scan, each with its length; the first APP1 "Exif\0\0".
int jpeg_orientation(std::span<const std::uint8_t> f) {
  std::size_t at = 2;
  while (at + 4 <= f.size()) {
    if (f[at] != 0xFF) return 1;
    const std::uint8_t marker = f[at + 1];
    if (marker == 0xFF) {  // a fill byte
      ++at;
      continue;
    }
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD8)) {  // markers without a length
      at += 2;
      continue;
    }
    if (marker == 0xDA || marker == 0xD9) return 1;  // the scan (or the end) before any EXIF
    const std::size_t length = be16(&f[at + 2]);
    if (length < 2) return 1;
    const std::size_t end = at + 2 + length;
    if (marker == 0xE1) {
      const std::span<const std::uint8_t> segment = f.subspan(at + 4, std::min(end, f.size()) - (at + 4));
      static constexpr std::uint8_t kExif[] = {'E', 'x', 'i', 'f', 0, 0};
      if (segment.size() >= sizeof kExif && std::memcmp(segment.data(), kExif, sizeof kExif) == 0) {
        return exif_block_orientation(segment);
      }
    }
    at = end;
  }
  return 1;
}

// WebP: RIFF chunks after "WEBP", each padded to an even size; the first "EXIF".
int webp_orientation(std::span<const std::uint8_t> f) {
  std::size_t at = 12;
  while (at + 8 <= f.size()) {
    const std::size_t size = le32(&f[at + 4]);
    const std::size_t begin = at + 8;
    if (std::memcmp(&f[at], "EXIF", 4) == 0) {
      return exif_block_orientation(f.subspan(begin, std::min(size, f.size() - begin)));
    }
    if (size > f.size() - begin) return 1;
    at = begin + size + (size & 1);
  }
  return 1;
}

std::uint32_t be32(const std::uint8_t* p) { return be16(p) << 16 | be16(p + 2); }

// PNG: the eXIf chunk as Pillow 9.4's exif_transpose finds it on an opened file. Its data is the
// TIFF block without the "Exif\0\0" prefix (Pillow adds the prefix and takes it off again, so a
// chunk that carries one itself is not TIFF data there either). The chunks before the image data
// are read when the file opens, a later eXIf replacing an earlier one; only when none of them is
// an eXIf does getexif() read the rest of the file (up to IEND, or an APNG's next frame), where
// again the last one counts.
int png_orientation(std::span<const std::uint8_t> f) {
  std::span<const std::uint8_t> before;
  std::span<const std::uint8_t> after;
  bool image_data = false;
  std::size_t at = 8;
  while (at + 8 <= f.size()) {
    const std::size_t length = be32(&f[at]);
    const std::uint8_t* type = &f[at + 4];
    if (std::memcmp(type, "IEND", 4) == 0 || (image_data && std::memcmp(type, "fcTL", 4) == 0)) break;
    if (length > f.size() - (at + 8)) break;  // cut short: Pillow's read of it fails
    if (std::memcmp(type, "IDAT", 4) == 0) {
      if (!before.empty()) break;  // found when the file opened: the rest is not read
      image_data = true;
    }
    if (std::memcmp(type, "eXIf", 4) == 0) (image_data ? after : before) = f.subspan(at + 8, length);
    at += 12 + length;
  }
  return tiff_orientation(before.empty() ? after : before);
}

}  // namespace

int exif_orientation(std::span<const std::uint8_t> file) {
  if (file.size() >= 4 && file[0] == 0xFF && file[1] == 0xD8) return jpeg_orientation(file);
  if (file.size() >= 12 && std::memcmp(file.data(), "RIFF", 4) == 0 && std::memcmp(file.data() + 8, "WEBP", 4) == 0) {
    return webp_orientation(file);
  }
  static constexpr std::uint8_t kPng[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (file.size() >= 8 && std::memcmp(file.data(), kPng, sizeof kPng) == 0) return png_orientation(file);
  // TIFF: the Orientation tag of the first IFD, which Pillow's getexif() reads from the file itself.
  if (file.size() >= 4 && (std::memcmp(file.data(), "II*\0", 4) == 0 || std::memcmp(file.data(), "MM\0*", 4) == 0)) {
    return tiff_orientation(file);
  }
  return 1;
}

}  // namespace sluice::stages
