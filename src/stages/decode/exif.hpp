// The EXIF orientation a file carries, read the way Pillow's Image.getexif() reads it, for the
// decode stage's DecodeOptions::orientation (kExif): a JPEG's first APP1 segment that starts with
// "Exif\0\0", a WebP's first EXIF chunk, a PNG's eXIf chunk (which one: exif.cpp), and a TIFF
// file's own first IFD. The block is a small TIFF file; the orientation is tag 0x0112 of its first
// IFD. Internal to src/stages.
//
// Bad input is ignored, as Pillow ignores it: a block whose header is not TIFF's, an IFD outside
// the block, an orientation that is not an integer from 1 to 8 give 1 (as stored) and the image
// decodes as stored; entries are read until the block ends, so an orientation before a cut still
// counts, as in Pillow (tests/reference/exif_orientation.py holds each case to Pillow). Nothing here allocates; every read is
// checked against the block's end (fuzz/image_formats_fuzzer.cpp runs it on every input).
#pragma once

#include <cstdint>
#include <span>

namespace sluice::stages {

// The orientation (1 to 8, 1 when there is none or it cannot be read) of a JPEG, WebP, PNG or TIFF
// file; 1 for any other bytes.
int exif_orientation(std::span<const std::uint8_t> file);

// The orientation in one EXIF block (with or without its "Exif\0\0" prefix).
int exif_block_orientation(std::span<const std::uint8_t> block);

}  // namespace sluice::stages
