// PipelineSpec: the plain-data description the builder produces and the runtime executes. Also
// what the JSON spec and the C API map onto, so it stays free of behaviour.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "sluice/pipeline/options.hpp"

namespace sluice {

// One sample of a data set: a file and its class index.
struct Item {
  std::string path;
  std::int32_t label = 0;
};

namespace spec {

// Where the items come from.
struct Folder {
  std::string path;  // class sub-folders; a folder of files alone is one class, label 0
  // Symlinks inside whose targets lie outside `path` are refused unless this is set.
  bool allow_outside_root = false;
  // A class folder without images is refused (as torchvision's ImageFolder does) unless this is
  // set: it would shift every later label silently.
  bool allow_empty_classes = false;
};
struct ListFile {
  std::string path;  // "path<TAB>label" per line; relative paths resolve against its folder
  // Entries that leave the list's folder (climbing out with "..", an absolute path elsewhere, a
  // symlink whose target is elsewhere) are refused unless this is set.
  bool allow_outside_root = false;
  RemoteOptions remote;  // a list file or entries named by URL (ListOptions::remote)
};
struct Items {
  std::vector<Item> items;
};
// Uncompressed tar shards (WebDataset's layout: key.jpg + key.cls), src/stages/tar/tar_source.hpp.
struct Shards {
  // "train-{000000..000146}.tar", "shards/*.tar": brace ranges and lists, then globs, expanded
  // in order (a glob's matches sorted); every name must be a regular file.
  std::vector<std::string> patterns;
  ShardIndex index = ShardIndex::kBesideShard;
  ShardBy shard_by = ShardBy::kShards;
  RemoteOptions remote;  // for patterns that are URLs
};
using Source = std::variant<Folder, ListFile, Items, Shards>;

struct Read { ReadOptions options; };
struct Cache { std::variant<MemoryCache, DiskCache> store; };
struct DecodeJpeg { DecodeOptions options; };
struct ResizeShorter { int size = 0; ResizeOptions options; };
struct Resize { int width = 0; int height = 0; ResizeOptions options; };
struct CenterCrop { int width = 0; int height = 0; };
struct RandomResizedCrop { int width = 0; int height = 0; RandomResizedCropOptions options; };
struct RandomCrop { int width = 0; int height = 0; RandomCropOptions options; };
struct FlipHorizontal { double probability = 0.5; FlipOptions options; };
struct FlipVertical { double probability = 0.5; FlipOptions options; };
// Pixel ops: run on the u8 sample at the output size, after the resampling, in the chain's order.
struct ColorJitter { ColorJitterOptions options; };
struct Grayscale { int num_output_channels = 1; };  // 1, or 3 (the grey level in each)
struct RandomGrayscale { double probability = 0.1; RandomOptions options; };
struct RandomRotation { FactorRange degrees; RandomRotationOptions options; };
struct RandomAffine { FactorRange degrees; RandomAffineOptions options; };
struct GaussianBlur { int kernel_width = 3; int kernel_height = 3; FactorRange sigma{0.1, 2.0}; RandomOptions options; };
struct RandomPosterize { int bits = 0; double probability = 0.5; RandomOptions options; };
struct RandomSolarize { double threshold = 0; double probability = 0.5; RandomOptions options; };
struct RandomInvert { double probability = 0.5; RandomOptions options; };
struct RandomAutocontrast { double probability = 0.5; RandomOptions options; };
struct RandomEqualize { double probability = 0.5; RandomOptions options; };
struct RandomAdjustSharpness { double sharpness_factor = 1; double probability = 0.5; RandomOptions options; };
// The automatic policies: torchvision's op tables, magnitude bins and signed draws.
struct TrivialAugmentWide { int num_magnitude_bins = 31; WarpOptions options; };
struct RandAugment { int num_ops = 2; int magnitude = 9; int num_magnitude_bins = 31; WarpOptions options; };
struct AutoAugment { AutoAugmentPolicy policy = AutoAugmentPolicy::kImageNet; WarpOptions options; };
// After normalize(): on the normalised sample in its batch slot.
struct RandomErasing { RandomErasingOptions options; };
struct Normalize { NormalizeOptions options; };
struct Shuffle { std::int64_t buffer = 0; ShuffleOptions options; };
struct Batch { int size = 0; BatchOptions options; };
struct Prefetch { int depth = 0; };
struct ToDevice { DeviceId device; ToDeviceOptions options; };
// Batch-level mixing after batch(), torchvision.transforms.v2.MixUp / CutMix: the labels become
// soft, f32 (N, num_classes) (docs/decisions/batch-mix-labels.md).
struct MixUp { double alpha = 1.0; int num_classes = 0; std::optional<std::uint64_t> seed; };
struct CutMix { double alpha = 1.0; int num_classes = 0; std::optional<std::uint64_t> seed; };

// Every stage, in the order the JSON schema lists them. This list is the stage registry: each
// alternative has one descriptor (src/pipeline/descriptors/) with its name, ordering rule, checks,
// JSON form and geometry, so a new stage is its struct, its entry here and its descriptor file.
using Stage = std::variant<Read, Cache, DecodeJpeg, ResizeShorter, Resize, CenterCrop, RandomResizedCrop,
                           RandomCrop, FlipHorizontal, FlipVertical, ColorJitter, Grayscale, RandomGrayscale,
                           RandomRotation, RandomAffine, GaussianBlur, RandomPosterize, RandomSolarize, RandomInvert,
                           RandomAutocontrast, RandomEqualize, RandomAdjustSharpness, TrivialAugmentWide, RandAugment,
                           AutoAugment, Normalize, RandomErasing, Shuffle, Batch, Prefetch, ToDevice, MixUp, CutMix>;

// The stage's name as the builder method spells it ("decode", "random_crop"), for messages and stats.
const char* name_of(const Stage& stage);

}  // namespace spec

struct PipelineSpec {
  spec::Source source = spec::Items{};
  int shard_rank = 0;
  int shard_world = 1;
  std::optional<std::uint64_t> shuffle_files_seed;  // set: file order reshuffled every epoch
  std::vector<spec::Stage> stages;
};

}  // namespace sluice
