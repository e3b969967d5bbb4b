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
struct Normalize { NormalizeOptions options; };
struct Shuffle { std::int64_t buffer = 0; ShuffleOptions options; };
struct Batch { int size = 0; BatchOptions options; };
struct Prefetch { int depth = 0; };
struct ToDevice { DeviceId device; ToDeviceOptions options; };

// Every stage, in the order the JSON schema lists them. This list is the stage registry: each
// alternative has one descriptor (src/pipeline/descriptors/) with its name, ordering rule, checks,
// JSON form and geometry, so a new stage is its struct, its entry here and its descriptor file.
using Stage = std::variant<Read, Cache, DecodeJpeg, ResizeShorter, Resize, CenterCrop, RandomResizedCrop,
                           RandomCrop, FlipHorizontal, Normalize, Shuffle, Batch, Prefetch, ToDevice>;

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
