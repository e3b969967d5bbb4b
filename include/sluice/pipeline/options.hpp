// Options of each stage and of build(): structs with named fields and defaults that suit
// ImageNet-style training, so a call site says only what it changes:
//   .decode_jpeg({.color = sluice::Color::kGrey})
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sluice/core/device_id.hpp"
#include "sluice/core/dtype.hpp"
#include "sluice/core/units.hpp"

namespace sluice {

class MemoryBudget;  // sluice/memory/budget.hpp

// BuildOptions::threads = sluice::autotune lets the runtime choose the parallelism.
inline constexpr int autotune = -1;

// What a bad sample does: kFail throws sluice::Error on the consumer's thread; kSkip replaces the
// sample with another from the same epoch (chosen from the seed), counts it and keeps batches full.
enum class OnError : std::uint8_t { kFail, kSkip };

enum class Color : std::uint8_t { kRGB, kGrey };

// How the decode stage turns an image: kAsStored keeps the pixels as the file stores them (what
// torchvision's ImageFolder gives); kExif applies a JPEG's or WebP's EXIF orientation (1 to 8) as
// Pillow's ImageOps.exif_transpose does, before the image ops, which then see the upright image.
enum class Orientation : std::uint8_t { kAsStored, kExif };

// kBilinear: triangle filter; when downscaling with antialias its support widens with the scale
// (Pillow's and torchvision's antialiased bilinear). kArea: box filter, the average of the source
// area each output pixel covers (OpenCV's INTER_AREA, Pillow's BOX).
enum class Filter : std::uint8_t { kBilinear, kArea };

// Pipeline::from_folder(dir, {...}).
struct FolderOptions {
  // Follow symlinks (to files or folders) whose targets lie outside `dir`. Off by default: a
  // data set handed over by someone else should not reach files beside or above it.
  bool allow_outside_root = false;
  // Keep a class folder without images as a class with no samples. Off by default, as in
  // torchvision's ImageFolder: an empty folder (a shard output put inside the data set) would
  // shift every later label silently.
  bool allow_empty_classes = false;
};

// Shards and lists named by URL (s3://bucket/key, https://..., http://...): the local folder
// their copies are kept in and how S3 requests are signed (docs/remote.md).
struct RemoteOptions {
  // A folder of sluice's own files (one that holds other files is refused). Empty:
  // $XDG_CACHE_HOME/sluice/remote, else ~/.cache/sluice/remote.
  std::string cache_dir;
  // The folder's bytes at most: copies of shards this data set does not name are evicted, least
  // recently used first; shards that need more than this fail build().
  std::uint64_t cache_limit = 20_GiB;
  bool anonymous = false;  // unsigned S3 requests (a public bucket); else credentials as the AWS CLI finds them
  double timeout_s = 30;   // no byte for this long: the request failed (it is retried)
  int retries = 6;         // attempts after the first, with exponential backoff and jitter
};

// Pipeline::from_list(file, {...}).
struct ListOptions {
  // Accept entries that leave the list's folder: climbing out with "..", absolute paths
  // elsewhere, symlinks whose targets are elsewhere. Off by default: a list handed over by
  // someone else should not reach files beside or above its data set.
  bool allow_outside_root = false;
  // A list file named by URL (s3://, http(s)://) and entries that are object URLs are fetched
  // into the remote cache folder in build(), as remote shards are (docs/remote.md).
  RemoteOptions remote;
};

// Where a tar shard's index (its members' offsets, built by reading the tar's headers on the first
// open) is kept between runs.
enum class ShardIndex : std::uint8_t {
  // "<shard>.sluice-idx" beside each shard whose file and folder are writable (neither
  // chmod'ed read-only, even for root); read back while the shard keeps its size and mtime. A
  // file of that name that is not sluice's index is never overwritten.
  kBesideShard,
  kMemoryOnly,  // rebuilt on every open, never written
};

// How shard(rank, world) splits tar shards among ranks (docs/distributed.md).
enum class ShardBy : std::uint8_t {
  // Each rank reads a contiguous run of the epoch's shard-ordered samples: whole shards, except
  // the ones at its run's ends (locality; remote shards need it). A state resumed at another
  // world size delivers the rest of the epoch exactly once, split anew among the new ranks.
  kShards,
  // Round robin over the epoch's samples, as for files: the same global steps at every world
  // size, every rank reading members of every shard.
  kSamples,
};

// Pipeline::from_shards(pattern, {...}).
struct ShardOptions {
  ShardIndex index = ShardIndex::kBesideShard;
  ShardBy shard_by = ShardBy::kShards;
  RemoteOptions remote;
};

struct ReadOptions {
  std::uint64_t max_file_size = 1_GiB;  // larger files are bad input (kTooLarge)
};

struct DecodeOptions {
  Color color = Color::kRGB;                    // greyscale and CMYK inputs are converted
  bool fast_dct = false;                        // libjpeg's fast integer IDCT: faster, less exact
  bool fast_upsample = false;                   // nearest chroma upsampling instead of fancy
  // Nearest (merged) chroma upsampling only for samples the resampler shrinks anyway on both axes
  // with antialiasing (its filter then spans at least one chroma sample of a 4:2:0 file, so the
  // fancy upsampler's interpolation is averaged away); fancy upsampling for the others. Faster
  // (docs/performance.md); colours at sharp chroma edges move by a few levels.
  bool fast_upsample_when_shrunk = false;
  bool dct_scaling = true;                      // decode at 1/2, 1/4, 1/8 when the output allows
  bool roi = true;                              // decode only the rows and columns a crop needs
  // libjpeg warnings ("N extraneous bytes before marker", "premature end of data segment",
  // "inconsistent progression sequence") are errors. Off: a file whose every row is there is
  // decoded, as Pillow decodes it, and counted in Stats::recovered with its first warning. A file
  // that ends before its last row (or scan) fails either way. See docs/reliability.md.
  bool strict = false;
  std::uint64_t max_image_pixels = 128'000'000; // larger headers are bad input (kTooLarge)
  Orientation orientation = Orientation::kAsStored;
};

struct ResizeOptions {
  Filter filter = Filter::kBilinear;
  bool antialias = true;  // widen the filter when downscaling; off: plain 2-tap bilinear
};

// torchvision's RandomResizedCrop: area fraction in [scale_min, scale_max], aspect ratio
// log-uniform in [ratio_min, ratio_max], 10 tries, then a center crop clamped to the ratio range.
struct RandomResizedCropOptions {
  double scale_min = 0.08;
  double scale_max = 1.0;
  double ratio_min = 3.0 / 4.0;
  double ratio_max = 4.0 / 3.0;
  ResizeOptions resize{};
  std::optional<std::uint64_t> seed;  // default: BuildOptions::seed
};

// torchvision's RandomCrop(size, padding, fill): pad every side, then crop at a random offset.
struct RandomCropOptions {
  int padding = 0;
  std::uint8_t fill = 0;
  std::optional<std::uint64_t> seed;
};

struct FlipOptions {
  std::optional<std::uint64_t> seed;
};

// The seed of a random stage whose only option it is.
struct RandomOptions {
  std::optional<std::uint64_t> seed;  // default: BuildOptions::seed
};

// A closed range [min, max] a value is drawn from uniformly, per sample.
struct FactorRange {
  double min = 0;
  double max = 0;
  friend bool operator==(const FactorRange&, const FactorRange&) = default;
};

// torchvision's ColorJitter: each factor drawn from its range per sample, the four adjustments
// applied in a random order (torchvision's fn_idx permutation), each with Pillow's arithmetic. A
// range of [1, 1] (brightness, contrast, saturation) or [0, 0] (hue) leaves that adjustment out,
// as torchvision's None does. ColorJitter(brightness=b) is the range [max(0, 1 - b), 1 + b]
// (contrast and saturation alike), hue=h is [-h, h] with h <= 0.5.
struct ColorJitterOptions {
  FactorRange brightness{1, 1};
  FactorRange contrast{1, 1};
  FactorRange saturation{1, 1};
  FactorRange hue{0, 0};
  std::optional<std::uint64_t> seed;
};

// How a warp samples: torchvision's InterpolationMode.NEAREST (the default of its RandomRotation,
// RandomAffine and the automatic policies) or BILINEAR, with Pillow's arithmetic.
enum class WarpFilter : std::uint8_t { kNearest, kBilinear };

// A warp's sampling and the value of the pixels it brings in from outside the image.
struct WarpOptions {
  WarpFilter interpolation = WarpFilter::kNearest;
  std::vector<std::uint8_t> fill;  // one value, or one per channel; empty: 0
  std::optional<std::uint64_t> seed;
};

// torchvision's RandomRotation(degrees, interpolation, expand=False, center, fill).
struct RandomRotationOptions {
  std::optional<double> center_x;  // the fixed point in pixels; default the image's centre
  std::optional<double> center_y;
  WarpOptions warp;
};

// torchvision's RandomAffine: the angle drawn from the stage's degrees; a translation of at most
// translate_x * width and translate_y * height pixels each way (rounded as torchvision does); a
// scale and shears drawn from their ranges ([1, 1] and [0, 0]: none).
struct RandomAffineOptions {
  double translate_x = 0;
  double translate_y = 0;
  FactorRange scale{1, 1};
  FactorRange shear_x{0, 0};  // degrees
  FactorRange shear_y{0, 0};
  std::optional<double> center_x;
  std::optional<double> center_y;
  WarpOptions warp;
};

// torchvision's AutoAugment policies learned on ImageNet and on CIFAR-10.
enum class AutoAugmentPolicy : std::uint8_t { kImageNet, kCifar10 };

// torchvision's RandomErasing, on the normalised sample in its batch slot (torchvision applies it
// after Normalize): with `probability`, a rectangle of area fraction in `scale` and aspect ratio
// log-uniform in `ratio` (10 tries, else nothing) takes `value`.
struct RandomErasingOptions {
  double probability = 0.5;
  FactorRange scale{0.02, 0.33};
  FactorRange ratio{0.3, 3.3};
  // One value for every channel, or one per channel; empty: torchvision's value="random" (a
  // standard normal value per element).
  std::vector<float> value{0.0F};
  std::optional<std::uint64_t> seed;
};

// (x / 255 - mean[c]) / std[c], mean and std in [0, 1] units as torchvision writes them. Empty
// mean and std: no normalisation (x / 255 for float outputs, the raw byte for u8).
struct NormalizeOptions {
  std::vector<float> mean;
  std::vector<float> std;
  Layout layout = Layout::kNCHW;
  DType dtype = DType::kF32;  // u8, f32, f16 or bf16
};

struct ShuffleOptions {
  std::optional<std::uint64_t> seed;
};

// .cache(MemoryCache{}) after read() keeps encoded files, after decode_jpeg() decoded images,
// in memory, inside the memory budget: what fits stays, the rest is read each epoch.
struct MemoryCache {
  std::uint64_t max_bytes = 0;  // its share of the budget; 0: whatever the budget leaves
};

// .cache(DiskCache{"/var/tmp/train.cache"}): the same on local disk, reused by later runs.
// Entries are keyed by path, size and mtime and checksummed; see docs/decisions/disk-cache.md.
struct DiskCache {
  std::string path;
  std::uint64_t max_bytes = 0;  // 0: bounded by the disk only
};

// .to_device(sluice::cuda(0), {...}): batches assembled in page-locked memory, copied to the device
// asynchronously on their own stream, handed over with an event (the consumer's stream waits on
// it; the host does not). See docs/device.md.
struct ToDeviceOptions {
  // Ship u8 over the bus and normalise, cast and transpose on the device with the normalize()
  // stage's mean, std, layout and dtype: 2-4x fewer bytes on the bus.
  bool normalize_on_device = false;
  // The consumer's stream (a cudaStream_t); nullptr: the legacy default stream.
  void* stream = nullptr;
  // With sluice::host(): run the transfer ring anyway (its host backend copies with memcpy). It
  // exercises the device path's slot life without a GPU, for tests; otherwise to_device(host())
  // changes nothing.
  bool stage_through_ring = false;
};

struct BatchOptions {
  bool drop_last = false;  // drop the partial last batch of an epoch instead of emitting it short
};

struct BuildOptions {
  std::uint64_t memory_budget = 0;  // bytes every buffer of the pipeline fits in; 0: no limit
  int threads = autotune;           // worker threads, or sluice::autotune (all cores, and the
                                    // autotuner sets samples in flight and prefetch depth)
  // Fixed samples in flight (submitted to workers and not finished); 0: a whole batch (at least
  // two per thread), which the autotuner may raise but never lowers.
  int samples_in_flight = 0;
  OnError on_error = OnError::kFail;
  std::uint64_t seed = 0;           // every random choice derives from it
  bool ordered = true;              // false: batches in completion order (not deterministic)
  // A larger budget this pipeline's is a part of (a training job's, sluice/train/job_plan.hpp):
  // every reservation counts in both; memory_budget then caps this pipeline alone (0: only the
  // larger budget's limit), and build() fails when the pipeline's minimum does not fit what the
  // larger budget has left. The pipeline's caches give memory back to any part of it (the
  // trainer's allocator too). Stopping the loader cancels only the pipeline's own part.
  std::shared_ptr<MemoryBudget> job_budget;
  // to_device(cuda(i)): the device memory of the transfer ring's slots is reserved here as
  // MemoryUse::kDeviceBatches (a training job's device budget); null: not accounted.
  std::shared_ptr<MemoryBudget> device_budget;
  // Asked every 50 ms or so while build() waits on the network (remote shards, lists and their
  // objects, docs/remote.md): true ends build() with Error(kCancelled). Python's build() and the
  // C API's stop callback look for Ctrl-C here. Empty: build() fetches to the end.
  std::function<bool()> stop;
};

}  // namespace sluice
