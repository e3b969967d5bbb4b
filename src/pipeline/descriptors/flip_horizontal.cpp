// flip_horizontal(probability): mirrors the image left to right with that probability
// (torchvision's RandomHorizontalFlip). The schema is the flips' shared one (flip.hpp).
#include "pipeline/descriptors/flip.hpp"

namespace sluice::schema {

template <>
const StageDescriptor& descriptor_for<spec::FlipHorizontal>() {
  return flip::descriptor<spec::FlipHorizontal, &GeometryCanvas::flip>("flip_horizontal");
}

}  // namespace sluice::schema
