// Putting an image upright by its EXIF orientation (1 to 8), as Pillow's ImageOps.exif_transpose
// does: 2 mirrors left-right, 3 turns 180 degrees, 4 mirrors top-bottom, 5 transposes, 6 turns 90
// degrees clockwise, 7 transverses, 8 turns 90 degrees counter-clockwise; 5 to 8 swap width and
// height. Each is a swap of the axes (or not) then a mirror of either: upright pixel (x, y) is
// stored pixel (sx, sy) with (u, v) = swap ? (y, x) : (x, y), sx = flip_x ? W-1-u : u,
// sy = flip_y ? H-1-v : v. A rectangle maps to a rectangle, so a region of the upright image is
// a region of the stored one (what lets the decoder still decode only a region), and the
// upright view of a stored region is that region turned the same way.
#pragma once

#include "sluice/detail/core/image.hpp"

namespace sluice::stages {

struct ExifTurn {
  bool swap = false;
  bool flip_x = false;  // in stored coordinates
  bool flip_y = false;
};

// The turn of an orientation; values outside 2..8 keep the image as stored.
ExifTurn exif_turn(int orientation);

// The upright size of an image stored as `stored`.
Size2 upright_size(Size2 stored, int orientation);

// The stored rectangle holding upright rectangle `upright` of an image stored as `stored`.
Rect stored_rect(Rect upright, Size2 stored, int orientation);
// The upright rectangle of stored rectangle `rect` (the inverse of stored_rect).
Rect upright_rect(Rect rect, Size2 stored, int orientation);

// `stored` (any image or region of one, 1 or 3 channels) turned upright into `upright`, whose size
// is upright_size of stored's and whose channels are stored's.
void orient(ConstImageView stored, int orientation, ImageView upright);

}  // namespace sluice::stages
