// PNG's row filters undone (PNG spec, section 9): None, Sub, Up, Average and Paeth, for 1 to 8
// bytes per pixel. Written here rather than taken from libspng or libpng because both defilter row
// by row behind their own inflate, and the whole-image PNG path (png_fast.cpp) inflates the image
// data in one libdeflate call and defilters it afterwards. Internal to src/stages.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sluice::stages::png {

// Undoes `filter` (0 to 4; false for any other value) on one row of `bytes` bytes: `in` is the
// filtered row (its filter byte already taken off), `prior` the previous row unfiltered, or nullptr
// for the first row (PNG's row of zeros), `out` receives the unfiltered row and may be `in`.
// `bpp` is the bytes per complete pixel, rounded up to 1 (1, 2, 3, 4, 6 or 8).
bool defilter_row(int filter, const std::uint8_t* in, const std::uint8_t* prior, std::uint8_t* out,
                  std::size_t bytes, int bpp);

}  // namespace sluice::stages::png
