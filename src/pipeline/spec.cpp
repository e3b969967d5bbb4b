// Stage names, as the builder methods spell them, for messages and statistics.
#include "sluice/pipeline/spec.hpp"

namespace sluice::spec {

namespace {
struct NameOf {
  const char* operator()(const Read&) const { return "read"; }
  const char* operator()(const Cache&) const { return "cache"; }
  const char* operator()(const DecodeJpeg&) const { return "decode_jpeg"; }
  const char* operator()(const ResizeShorter&) const { return "resize_shorter"; }
  const char* operator()(const Resize&) const { return "resize"; }
  const char* operator()(const CenterCrop&) const { return "center_crop"; }
  const char* operator()(const RandomResizedCrop&) const { return "random_resized_crop"; }
  const char* operator()(const RandomCrop&) const { return "random_crop"; }
  const char* operator()(const FlipHorizontal&) const { return "flip_horizontal"; }
  const char* operator()(const Normalize&) const { return "normalize"; }
  const char* operator()(const Shuffle&) const { return "shuffle"; }
  const char* operator()(const Batch&) const { return "batch"; }
  const char* operator()(const Prefetch&) const { return "prefetch"; }
  const char* operator()(const ToDevice&) const { return "to_device"; }
};
}  // namespace

const char* name_of(const Stage& stage) { return std::visit(NameOf{}, stage); }

}  // namespace sluice::spec
