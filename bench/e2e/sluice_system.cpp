// sluice's loaders for the three scenarios, through the public header alone.
#include "sluice_system.hpp"

#include <time.h>

#include <chrono>
#include <stdexcept>

#include <sluice/sluice.hpp>

namespace sluice::bench {
namespace {

using Clock = std::chrono::steady_clock;

// CPU seconds of every thread of this process so far.
double process_cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

}  // namespace

sluice::Pipeline make_sluice_pipeline(const std::string& dir, const Scenario& sc, EncodedFiles files) {
  const sluice::NormalizeOptions normalize{
      .mean = {kImageNetMean.begin(), kImageNetMean.end()},
      .std = {kImageNetStd.begin(), kImageNetStd.end()},
      .layout = sluice::Layout::kNCHW,
      .dtype = sluice::DType::kF32};
  sluice::Pipeline pipe = sluice::Pipeline::from_folder(dir);
  pipe.read();
  // Keeping the encoded files in memory is what the decode limit does (it preloads them).
  if (files == EncodedFiles::kInMemory) pipe.cache(sluice::MemoryCache{});
  // The fast IDCT (tf.data's default), and merged chroma upsampling where the resize shrinks the
  // sample anyway: the decode settings of a loader tuned for speed.
  pipe.decode_jpeg({.fast_dct = true, .fast_upsample_when_shrunk = true});
  const sluice::ResizeOptions resize{.filter = sluice::Filter::kBilinear,
                                     .antialias = sc.resampling == Resampling::kAntialiased};
  switch (sc.transform) {
    case Transform::kEval:
      pipe.resize_shorter(eval_resize_size(sc.size), resize).center_crop(sc.size);
      break;
    case Transform::kTrain:
      // RandomResizedCropOptions' defaults are torchvision's: scale (0.08, 1), ratio (3/4, 4/3).
      pipe.random_resized_crop(sc.size, {.resize = resize}).flip_horizontal(kFlipProbability);
      break;
    case Transform::kCifar:
      pipe.random_crop(sc.size, {.padding = kCifarPadding}).flip_horizontal(kFlipProbability);
      break;
  }
  pipe.normalize(normalize).batch(sc.batch);
  return pipe;
}

LoaderResult run_sluice(const std::string& dir, const Scenario& sc, std::int64_t expected_images,
                        EncodedFiles files) {
  const Clock::time_point build_start = Clock::now();
  sluice::Loader loader = make_sluice_pipeline(dir, sc, files).build(
      {.threads = sc.threads, .seed = sc.seed});
  const double setup_seconds = std::chrono::duration<double>(Clock::now() - build_start).count();
  if (loader.samples_per_epoch() != expected_images) {
    throw std::runtime_error("sluice sees " + std::to_string(loader.samples_per_epoch()) +
                             " images in " + dir + ", the other systems " +
                             std::to_string(expected_images));
  }

  LoaderResult result;
  result.setup_seconds = setup_seconds;
  // Touching one element and the last label of each batch keeps the consumer honest (the batch
  // must really be there) without adding work the peers do not also do.
  auto run_epoch = [&](std::int64_t e) {
    std::int64_t images = 0;
    for (sluice::Batch& b : loader.epoch(e)) {
      result.checksum += b.data().as<const float>()[0] + b.labels()[b.labels().size() - 1];
      images += b.size();
    }
    return images;
  };
  // Epoch 0 is the warm-up the other systems get too, timed on its own: what a user's first epoch
  // costs (worker start-up, first touch of every buffer) against the steady state that follows.
  const Clock::time_point first_start = Clock::now();
  const double first_cpu = process_cpu_seconds();
  const std::int64_t first_images = run_epoch(0);
  result.first_epoch_images_per_sec =
      static_cast<double>(first_images) / std::chrono::duration<double>(Clock::now() - first_start).count();
  result.first_epoch_cpu_us_per_image = 1e6 * (process_cpu_seconds() - first_cpu) / static_cast<double>(first_images);
  const Clock::time_point start = Clock::now();
  const double cpu = process_cpu_seconds();
  for (int e = 1; e <= sc.epochs; ++e) result.images += run_epoch(e);
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result.images_per_sec = static_cast<double>(result.images) / result.seconds;
  result.cpu_us_per_image = 1e6 * (process_cpu_seconds() - cpu) / static_cast<double>(result.images);
  return result;
}

}  // namespace sluice::bench
