// The whole-image PNG path: for non-interlaced 8- and 16-bit grey, grey+alpha, RGB and RGBA (what
// photographs and data sets written by Pillow, OpenCV and the like are), the image data (every
// IDAT chunk together) is inflated in one libdeflate call into a buffer of its exact size
// ((row bytes + 1) x height), then defiltered (png_defilter.hpp) and converted to the output in one
// pass per row (16-bit samples scaled to 8, rounded). zlib's inflate behind libspng took about 40% of a PNG's decode and libspng's
// row-by-row defilter another quarter (docs/performance.md). Everything else (palettes, 1/2/4/16
// bits, Adam7, row bands) stays on libspng (png_decoder.cpp). Internal to src/stages.
#pragma once

#include <cstdint>
#include <span>

#include "sluice/detail/core/image.hpp"
#include "sluice/detail/memory/aligned_buffer.hpp"
#include "stages/decode/image_format.hpp"

struct libdeflate_decompressor;

namespace sluice::stages::png {

// The bytes of a PNG's image data: the lengths of its first run of IDAT chunks, summed (each
// counted only as far as the file holds it).
std::uint64_t image_data_bytes(std::span<const std::uint8_t> bytes);

// A defiltered row of 1 (grey), 2 (grey+alpha), 3 (RGB) or 4 (RGBA) 8-bit samples into 3 or 1
// output channels, as Pillow's convert("RGB") and convert("L") give it: grey replicated, alpha
// dropped, RGB to grey with Pillow's weights.
void store_row(const std::uint8_t* in, int samples, int width, std::uint8_t* out, int out_channels);

// Whether the whole-image path reads this image, and the workspace it takes then: the inflated
// rows, plus room to join the IDAT chunks (probe.coded_bytes) when there are several.
bool takes(const ImageProbe& probe);
std::uint64_t workspace_requirements(const ImageProbe& probe);

// Decodes the image into `out` (probe's size, 1 or 3 channels) through the whole-image path.
// False, with `out` in any state, when the file is not one this path can vouch for: a CRC of an
// IDAT chunk or a chunk after it that does not match, a zlib stream that is damaged, fails its
// Adler-32, or does not give exactly the rows' bytes, an unknown filter type, or no room in the
// budget for the workspace. The caller then decodes it with libspng, so a damaged file is
// accepted or refused, with libspng's message, exactly as before this path existed.
bool decode_whole(std::span<const std::uint8_t> bytes, const ImageProbe& probe, ImageView out,
                  AlignedBuffer& scratch, libdeflate_decompressor& inflater);

}  // namespace sluice::stages::png
