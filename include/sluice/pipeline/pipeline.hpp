// The pipeline builder: a fluent description of where samples come from and what happens to them.
// build() returns a Loader, the running pipeline (sluice/runtime/loader.hpp, which the runtime
// module defines; include it or sluice/sluice.hpp to call build()).
//
//   auto loader = sluice::Pipeline::from_folder("train")
//       .shuffle_files(seed).read().decode_jpeg()
//       .random_resized_crop(224).flip_horizontal(0.5)
//       .normalize({.mean = {...}, .std = {...}}).batch(256)
//       .build({.threads = sluice::autotune});
//   for (sluice::Batch& b : loader.epoch(e)) step(b);
//
// The builder only records a PipelineSpec; build() validates it (bad configuration fails there,
// naming what to change) and hands it to the runtime, which defines build() and Loader.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "sluice/memory/budget.hpp"
#include "sluice/pipeline/options.hpp"
#include "sluice/pipeline/spec.hpp"

namespace sluice {

class Loader;

// What build() would demand of the memory budget at least, by use, and what a memory cache of the
// whole data set would take: computed as build() computes its minimum (a few files probed for
// their size and JPEG header) without building anything, so a training job can plan its memory
// before any data is read (sluice/train/job_plan.hpp).
struct PipelineMemoryPlan {
  std::array<std::uint64_t, kPipelineUseCount> minimum{};  // by MemoryUse
  std::uint64_t slot_bytes = 0;   // one slot of the batch ring (page-locked with to_device)
  int min_slots = 0;              // the ring at its shallowest depth (in `minimum`)
  int start_slots = 0;            // the ring at the depth it starts with when the budget has room
  std::int64_t items = 0;         // in the data set
  // A memory cache of every item: decoded images (estimated from the probed headers' mean size)
  // and encoded files (from the probed files' mean size).
  std::uint64_t decoded_set_bytes = 0;
  std::uint64_t encoded_set_bytes = 0;
  int probed = 0;                 // files whose header was read
  std::string explain;            // as build()'s error says it: "ring 3 x ... = ..."

  std::uint64_t minimum_bytes() const;
};

class Pipeline {
 public:
  // Only regular files are listed (a FIFO, socket or device named .jpg is not); symlinks whose
  // targets leave `dir` are refused unless FolderOptions::allow_outside_root says otherwise.
  static Pipeline from_folder(std::string dir, FolderOptions options = {});
  // Relative entries that climb out of the list's folder with ".." are refused unless
  // ListOptions::allow_outside_root says otherwise.
  static Pipeline from_list(std::string list_file, ListOptions options = {});
  static Pipeline from_items(std::vector<Item> items);
  // Uncompressed tar shards holding key.jpg + key.cls (an integer label) or key.class (a class
  // name; labels = indices of the sorted names) per sample, e.g. "train-{000000..000146}.tar" or
  // "shards/*.tar". Images are read in place with pread at their offset; each shard's index is
  // built on first open (docs/shards.md). With shuffle_files(seed) the shard order and the order
  // within each shard are shuffled every epoch; shard(rank, world) gives each rank a contiguous
  // run of the epoch's shard-ordered samples (whole shards when there are at least as many shards
  // as ranks), or with {.shard_by = ShardBy::kSamples} every world-th sample as for files
  // (docs/distributed.md). A damaged member (cut, bad header checksum) is a bad sample, named shard:member.
  static Pipeline from_shards(std::string pattern, ShardOptions options = {});
  static Pipeline from_shards(std::vector<std::string> patterns, ShardOptions options = {});
  // from_shards({"a-*.tar", "b.tar"}): without it, two string literals in braces could also be a
  // std::string's (first, last) and the call would be ambiguous.
  static Pipeline from_shards(std::initializer_list<std::string> patterns, ShardOptions options = {}) {
    return from_shards(std::vector<std::string>(patterns), options);
  }
  explicit Pipeline(PipelineSpec spec) : spec_(std::move(spec)) {}

  // Keeps items i with i % world == rank of each epoch's order: disjoint slices covering the set
  // (every rank must use the same seed), so global step s (every rank's s-th batch) is the same at
  // any world size for the same global batch (batch x world). Tar shards: a contiguous run of the
  // epoch's order per rank instead, unless ShardBy::kSamples (from_shards). Every rank yields
  // the same number of batches: without drop_last a rank short of samples repeats some in its
  // last batch (Batch::padding()); with drop_last the end that does not fill a batch on every
  // rank is dropped.
  Pipeline& shard(int rank, int world);
  // shard(rank, world) with the rank and world size the launcher (mpirun, srun) gave this process
  // (launcher_rank(), launcher.hpp); rank 0 of 1 when started without one. Read when called.
  Pipeline& shard_from_launcher();
  Pipeline& shuffle_files(std::uint64_t seed);
  Pipeline& read(ReadOptions options = {});
  // After read(): caches encoded files; after decode_jpeg(): decoded images (then every crop is
  // taken from the cached full image, with no region decode or DCT scaling).
  Pipeline& cache(MemoryCache options);
  Pipeline& cache(DiskCache options);
  // Decodes each file by its first bytes, whatever its name: JPEG, PNG, WebP, GIF, BMP, PNM, TIFF.
  Pipeline& decode(DecodeOptions options = {});
  // The same stage (its older name).
  Pipeline& decode_jpeg(DecodeOptions options = {});
  Pipeline& resize_shorter(int size, ResizeOptions options = {});
  Pipeline& resize(int width, int height, ResizeOptions options = {});
  Pipeline& center_crop(int size) { return center_crop(size, size); }
  Pipeline& center_crop(int width, int height);
  Pipeline& random_resized_crop(int size, RandomResizedCropOptions options = {});
  Pipeline& random_resized_crop(int width, int height, RandomResizedCropOptions options = {});
  Pipeline& random_crop(int size, RandomCropOptions options = {});
  Pipeline& random_crop(int width, int height, RandomCropOptions options = {});
  Pipeline& flip_horizontal(double probability = 0.5, FlipOptions options = {});
  Pipeline& flip_vertical(double probability = 0.5, FlipOptions options = {});
  // torchvision's ColorJitter, Grayscale and RandomGrayscale with Pillow's arithmetic: run on the
  // sample at its output size, after the crops and resizes (which must come before them; flips may
  // come anywhere).
  Pipeline& color_jitter(ColorJitterOptions options);
  Pipeline& grayscale(int num_output_channels = 1);
  Pipeline& random_grayscale(double probability = 0.1, RandomOptions options = {});
  // torchvision's RandomRotation (degrees [min, max]), RandomAffine, GaussianBlur, the random point
  // ops and the automatic policies, with Pillow's arithmetic: pixel ops like the colour ops.
  Pipeline& random_rotation(FactorRange degrees, RandomRotationOptions options = {});
  Pipeline& random_affine(FactorRange degrees, RandomAffineOptions options = {});
  Pipeline& gaussian_blur(int kernel_width, int kernel_height, FactorRange sigma = {0.1, 2.0}, RandomOptions options = {});
  Pipeline& random_posterize(int bits, double probability = 0.5, RandomOptions options = {});
  Pipeline& random_solarize(double threshold, double probability = 0.5, RandomOptions options = {});
  Pipeline& random_invert(double probability = 0.5, RandomOptions options = {});
  Pipeline& random_autocontrast(double probability = 0.5, RandomOptions options = {});
  Pipeline& random_equalize(double probability = 0.5, RandomOptions options = {});
  Pipeline& random_adjust_sharpness(double sharpness_factor, double probability = 0.5, RandomOptions options = {});
  Pipeline& trivial_augment_wide(int num_magnitude_bins = 31, WarpOptions options = {});
  Pipeline& rand_augment(int num_ops = 2, int magnitude = 9, int num_magnitude_bins = 31, WarpOptions options = {});
  Pipeline& auto_augment(AutoAugmentPolicy policy = AutoAugmentPolicy::kImageNet, WarpOptions options = {});
  Pipeline& normalize(NormalizeOptions options = {});
  Pipeline& normalize(std::vector<float> mean, std::vector<float> std, Layout layout,
                      DType dtype);
  // After normalize(): torchvision's RandomErasing on the normalised sample.
  Pipeline& random_erasing(RandomErasingOptions options = {});
  Pipeline& shuffle(std::int64_t buffer, ShuffleOptions options = {});
  Pipeline& batch(int size, BatchOptions options = {});
  Pipeline& prefetch(int depth);
  // Batches go to `device` (after batch()); sluice::cuda(i) without a usable GPU fails at build().
  Pipeline& to_device(DeviceId device, ToDeviceOptions options = {});
  // Batch-level MixUp / CutMix (after batch(); torchvision.transforms.v2's): each batch mixes with
  // itself rolled by one, with one Beta(alpha, alpha) weight per batch, and its labels become f32
  // (N, num_classes). Both in one pipeline: each batch picks one (docs/decisions/batch-mix-labels.md).
  Pipeline& mixup(double alpha, int num_classes, std::optional<std::uint64_t> seed = {});
  Pipeline& cutmix(double alpha, int num_classes, std::optional<std::uint64_t> seed = {});

  const PipelineSpec& spec() const { return spec_; }

  // Validates and starts the pipeline's runtime. Throws sluice::Error(kInvalidArgument) with a
  // message naming the stage and what to change. Defined by the runtime module.
  Loader build(const BuildOptions& options = {}) const;
  // What build(options) would need (see PipelineMemoryPlan), without building. Validates as
  // build() does. Defined by the runtime module.
  PipelineMemoryPlan plan_memory(const BuildOptions& options = {}) const;

 private:
  PipelineSpec spec_;
};

}  // namespace sluice
