// flip_vertical(probability): mirrors the image top to bottom with that probability
// (torchvision's RandomVerticalFlip). The rows are written bottom-up, so like flip_horizontal it
// costs nothing and is exact; the schema is the flips' shared one (flip.hpp).
#include "pipeline/descriptors/flip.hpp"

namespace sluice::schema {

template <>
const StageDescriptor& descriptor_for<spec::FlipVertical>() {
  return flip::descriptor<spec::FlipVertical, &GeometryCanvas::flip_vertical>("flip_vertical");
}

}  // namespace sluice::schema
