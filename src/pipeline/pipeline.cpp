// The builder: each method appends a stage to the PipelineSpec. Validation is build()'s job (in
// the stages module, which knows what each stage needs), so chains read in any order here and
// fail together, with one message, when built.
#include "sluice/pipeline/pipeline.hpp"

#include "sluice/pipeline/launcher.hpp"

namespace sluice {

Pipeline Pipeline::from_folder(std::string dir, FolderOptions options) {
  PipelineSpec spec;
  spec.source = spec::Folder{std::move(dir), options.allow_outside_root, options.allow_empty_classes};
  return Pipeline(std::move(spec));
}

Pipeline Pipeline::from_list(std::string list_file, ListOptions options) {
  PipelineSpec spec;
  spec.source = spec::ListFile{std::move(list_file), options.allow_outside_root, std::move(options.remote)};
  return Pipeline(std::move(spec));
}

Pipeline Pipeline::from_items(std::vector<Item> items) {
  PipelineSpec spec;
  spec.source = spec::Items{std::move(items)};
  return Pipeline(std::move(spec));
}

Pipeline Pipeline::from_shards(std::string pattern, ShardOptions options) {
  return from_shards(std::vector<std::string>{std::move(pattern)}, options);
}

Pipeline Pipeline::from_shards(std::vector<std::string> patterns, ShardOptions options) {
  PipelineSpec spec;
  spec.source = spec::Shards{std::move(patterns), options.index, options.shard_by, std::move(options.remote)};
  return Pipeline(std::move(spec));
}

Pipeline& Pipeline::shard(int rank, int world) {
  spec_.shard_rank = rank;
  spec_.shard_world = world;
  return *this;
}

Pipeline& Pipeline::shard_from_launcher() {
  const LauncherRank launched = launcher_rank();
  return shard(launched.rank, launched.world);
}

Pipeline& Pipeline::shuffle_files(std::uint64_t seed) {
  spec_.shuffle_files_seed = seed;
  return *this;
}

Pipeline& Pipeline::read(ReadOptions options) {
  spec_.stages.emplace_back(spec::Read{options});
  return *this;
}

// GCC 12 and later, at -O3, warn that moving spec::Cache's variant<MemoryCache, DiskCache> may read
// DiskCache's string uninitialised when the variant holds a MemoryCache: a known false positive of
// -Wmaybe-uninitialized through std::variant's visitation (boostorg/variant2#55,
// celeritas-project/celeritas#1891 report the same). The move only ever touches the active member.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
Pipeline& Pipeline::cache(MemoryCache options) {
  spec_.stages.emplace_back(spec::Cache{options});
  return *this;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

Pipeline& Pipeline::cache(DiskCache options) {
  spec_.stages.emplace_back(spec::Cache{std::move(options)});
  return *this;
}

Pipeline& Pipeline::decode(DecodeOptions options) {
  spec_.stages.emplace_back(spec::DecodeJpeg{options});
  return *this;
}

Pipeline& Pipeline::decode_jpeg(DecodeOptions options) { return decode(options); }

Pipeline& Pipeline::resize_shorter(int size, ResizeOptions options) {
  spec_.stages.emplace_back(spec::ResizeShorter{size, options});
  return *this;
}

Pipeline& Pipeline::resize(int width, int height, ResizeOptions options) {
  spec_.stages.emplace_back(spec::Resize{width, height, options});
  return *this;
}

Pipeline& Pipeline::center_crop(int width, int height) {
  spec_.stages.emplace_back(spec::CenterCrop{width, height});
  return *this;
}

Pipeline& Pipeline::random_resized_crop(int size, RandomResizedCropOptions options) {
  return random_resized_crop(size, size, std::move(options));
}

Pipeline& Pipeline::random_resized_crop(int width, int height, RandomResizedCropOptions options) {
  spec_.stages.emplace_back(spec::RandomResizedCrop{width, height, options});
  return *this;
}

Pipeline& Pipeline::random_crop(int size, RandomCropOptions options) {
  return random_crop(size, size, options);
}

Pipeline& Pipeline::random_crop(int width, int height, RandomCropOptions options) {
  spec_.stages.emplace_back(spec::RandomCrop{width, height, options});
  return *this;
}

Pipeline& Pipeline::flip_horizontal(double probability, FlipOptions options) {
  spec_.stages.emplace_back(spec::FlipHorizontal{probability, options});
  return *this;
}

Pipeline& Pipeline::flip_vertical(double probability, FlipOptions options) {
  spec_.stages.emplace_back(spec::FlipVertical{probability, options});
  return *this;
}

Pipeline& Pipeline::color_jitter(ColorJitterOptions options) {
  spec_.stages.emplace_back(spec::ColorJitter{options});
  return *this;
}

Pipeline& Pipeline::grayscale(int num_output_channels) {
  spec_.stages.emplace_back(spec::Grayscale{num_output_channels});
  return *this;
}

Pipeline& Pipeline::random_grayscale(double probability, RandomOptions options) {
  spec_.stages.emplace_back(spec::RandomGrayscale{probability, options});
  return *this;
}

Pipeline& Pipeline::random_rotation(FactorRange degrees, RandomRotationOptions options) {
  spec_.stages.emplace_back(spec::RandomRotation{degrees, std::move(options)});
  return *this;
}

Pipeline& Pipeline::random_affine(FactorRange degrees, RandomAffineOptions options) {
  spec_.stages.emplace_back(spec::RandomAffine{degrees, std::move(options)});
  return *this;
}

Pipeline& Pipeline::gaussian_blur(int kernel_width, int kernel_height, FactorRange sigma, RandomOptions options) {
  spec_.stages.emplace_back(spec::GaussianBlur{kernel_width, kernel_height, sigma, options});
  return *this;
}

Pipeline& Pipeline::random_posterize(int bits, double probability, RandomOptions options) {
  spec_.stages.emplace_back(spec::RandomPosterize{bits, probability, options});
  return *this;
}

Pipeline& Pipeline::random_solarize(double threshold, double probability, RandomOptions options) {
  spec_.stages.emplace_back(spec::RandomSolarize{threshold, probability, options});
  return *this;
}

Pipeline& Pipeline::random_invert(double probability, RandomOptions options) {
  spec_.stages.emplace_back(spec::RandomInvert{probability, options});
  return *this;
}

Pipeline& Pipeline::random_autocontrast(double probability, RandomOptions options) {
  spec_.stages.emplace_back(spec::RandomAutocontrast{probability, options});
  return *this;
}

Pipeline& Pipeline::random_equalize(double probability, RandomOptions options) {
  spec_.stages.emplace_back(spec::RandomEqualize{probability, options});
  return *this;
}

Pipeline& Pipeline::random_adjust_sharpness(double sharpness_factor, double probability, RandomOptions options) {
  spec_.stages.emplace_back(spec::RandomAdjustSharpness{sharpness_factor, probability, options});
  return *this;
}

Pipeline& Pipeline::trivial_augment_wide(int num_magnitude_bins, WarpOptions options) {
  spec_.stages.emplace_back(spec::TrivialAugmentWide{num_magnitude_bins, std::move(options)});
  return *this;
}

Pipeline& Pipeline::rand_augment(int num_ops, int magnitude, int num_magnitude_bins, WarpOptions options) {
  spec_.stages.emplace_back(spec::RandAugment{num_ops, magnitude, num_magnitude_bins, std::move(options)});
  return *this;
}

Pipeline& Pipeline::auto_augment(AutoAugmentPolicy policy, WarpOptions options) {
  spec_.stages.emplace_back(spec::AutoAugment{policy, std::move(options)});
  return *this;
}

Pipeline& Pipeline::random_erasing(RandomErasingOptions options) {
  spec_.stages.emplace_back(spec::RandomErasing{std::move(options)});
  return *this;
}

Pipeline& Pipeline::normalize(NormalizeOptions options) {
  spec_.stages.emplace_back(spec::Normalize{std::move(options)});
  return *this;
}

Pipeline& Pipeline::normalize(std::vector<float> mean, std::vector<float> std, Layout layout,
                              DType dtype) {
  return normalize(NormalizeOptions{std::move(mean), std::move(std), layout, dtype});
}

Pipeline& Pipeline::shuffle(std::int64_t buffer, ShuffleOptions options) {
  spec_.stages.emplace_back(spec::Shuffle{buffer, options});
  return *this;
}

Pipeline& Pipeline::batch(int size, BatchOptions options) {
  spec_.stages.emplace_back(spec::Batch{size, options});
  return *this;
}

Pipeline& Pipeline::to_device(DeviceId device, ToDeviceOptions options) {
  spec_.stages.emplace_back(spec::ToDevice{device, options});
  return *this;
}

Pipeline& Pipeline::mixup(double alpha, int num_classes, std::optional<std::uint64_t> seed) {
  spec_.stages.emplace_back(spec::MixUp{alpha, num_classes, seed});
  return *this;
}

Pipeline& Pipeline::cutmix(double alpha, int num_classes, std::optional<std::uint64_t> seed) {
  spec_.stages.emplace_back(spec::CutMix{alpha, num_classes, seed});
  return *this;
}

Pipeline& Pipeline::prefetch(int depth) {
  spec_.stages.emplace_back(spec::Prefetch{depth});
  return *this;
}

}  // namespace sluice
