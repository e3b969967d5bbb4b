// The hand-written OpenCV loader: per-image transforms on persistent std::threads filling one
// preallocated batch buffer, synchronised per batch with two std::barrier phases.
#include "opencv_loop.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

namespace sluice::bench {
namespace {

using Clock = std::chrono::steady_clock;

// splitmix64 keyed by (seed, epoch, index): every image's random choices are fixed by its place
// in the epoch, not by which thread happened to take it.
class SampleRng {
 public:
  SampleRng(std::uint64_t seed, std::int64_t epoch, std::int64_t index)
      : state_(seed * 0x9E3779B97F4A7C15ull ^ static_cast<std::uint64_t>(epoch) << 40 ^
               static_cast<std::uint64_t>(index)) {}

  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform(double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1.0p-53;
  }
  int uniform_int(int lo, int hi_inclusive) {  // the range here is tiny: modulo bias is nil
    return lo + static_cast<int>(next() % static_cast<std::uint64_t>(hi_inclusive - lo + 1));
  }
  bool bernoulli(double p) { return uniform(0.0, 1.0) < p; }

 private:
  std::uint64_t state_;
};

// Per-thread images reused from one image to the next: cv::Mat::create keeps the allocation
// while the size is unchanged, and batch planes are Mat headers over the batch buffer.
struct Scratch {
  cv::Mat resized;
  cv::Mat flipped;
  cv::Mat padded;
  std::array<cv::Mat, 3> planes;  // B, G, R (u8)
};

int interpolation_for(cv::Size from, cv::Size to, Resampling resampling) {
  if (resampling == Resampling::kBilinear) return cv::INTER_LINEAR;
  // INTER_AREA is the right filter (and fast) only when shrinking; enlarging wants bilinear.
  return (to.width < from.width && to.height < from.height) ? cv::INTER_AREA : cv::INTER_LINEAR;
}

// (x / 255 - mean) / std == x * scale + bias, per RGB channel.
struct Normaliser {
  std::array<double, 3> scale{};
  std::array<double, 3> bias{};
  Normaliser() {
    for (int c = 0; c < 3; ++c) {
      scale[c] = 1.0 / (255.0 * kImageNetStd[c]);
      bias[c] = -static_cast<double>(kImageNetMean[c]) / kImageNetStd[c];
    }
  }
};

// bgr: size x size, 8UC3, possibly a ROI. Writes RGB planes to out (3 x size x size floats). The
// BGR->RGB swap is folded into the plane order, so it costs no extra pass.
void write_chw(const cv::Mat& bgr, float* out, const Normaliser& norm, Scratch& s) {
  cv::split(bgr, s.planes.data());
  const int h = bgr.rows;
  const int w = bgr.cols;
  for (int c = 0; c < 3; ++c) {
    cv::Mat plane(h, w, CV_32F, out + static_cast<std::ptrdiff_t>(c) * h * w);
    s.planes[2 - c].convertTo(plane, CV_32F, norm.scale[c], norm.bias[c]);
  }
}

// torchvision's RandomResizedCrop.get_params, same arithmetic (int(round(...)) rounds half to
// even in Python, as std::nearbyint does).
cv::Rect random_resized_crop_rect(int width, int height, SampleRng& rng) {
  const double area = static_cast<double>(width) * height;
  const double log_min = std::log(kRrcRatioMin);
  const double log_max = std::log(kRrcRatioMax);
  for (int attempt = 0; attempt < kRrcTries; ++attempt) {
    const double target_area = area * rng.uniform(kRrcScaleMin, kRrcScaleMax);
    const double aspect = std::exp(rng.uniform(log_min, log_max));
    const int w = static_cast<int>(std::nearbyint(std::sqrt(target_area * aspect)));
    const int h = static_cast<int>(std::nearbyint(std::sqrt(target_area / aspect)));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      return {rng.uniform_int(0, width - w), rng.uniform_int(0, height - h), w, h};
    }
  }
  const double in_ratio = static_cast<double>(width) / height;
  int w = width;
  int h = height;
  if (in_ratio < kRrcRatioMin) {
    h = static_cast<int>(std::nearbyint(w / kRrcRatioMin));
  } else if (in_ratio > kRrcRatioMax) {
    w = static_cast<int>(std::nearbyint(h * kRrcRatioMax));
  }
  return {(width - w) / 2, (height - h) / 2, w, h};
}

void transform_one(const std::string& path, const Scenario& sc, std::int64_t epoch,
                   std::int64_t index, float* out, const Normaliser& norm, Scratch& s) {
  // IGNORE_ORIENTATION: PIL, torchvision and sluice do not apply EXIF rotation, so the pixels
  // stay comparable (and the EXIF parse is skipped).
  const cv::Mat bgr = cv::imread(path, cv::IMREAD_COLOR | cv::IMREAD_IGNORE_ORIENTATION);
  if (bgr.empty()) throw std::runtime_error("cv::imread cannot read " + path);
  SampleRng rng(sc.seed, epoch, index);
  const int size = sc.size;
  cv::Mat crop;  // size x size view of the transformed image

  switch (sc.transform) {
    case Transform::kEval: {
      // torchvision Resize(int): shorter side to the target, longer int(target * long / short).
      const int target = eval_resize_size(size);
      const bool wide = bgr.cols >= bgr.rows;
      const int shorter = wide ? bgr.rows : bgr.cols;
      const int longer = wide ? bgr.cols : bgr.rows;
      const int new_long = static_cast<int>(static_cast<double>(target) * longer / shorter);
      const cv::Size to = wide ? cv::Size(new_long, target) : cv::Size(target, new_long);
      cv::resize(bgr, s.resized, to, 0, 0, interpolation_for(bgr.size(), to, sc.resampling));
      const int top = static_cast<int>(std::nearbyint((to.height - size) / 2.0));
      const int left = static_cast<int>(std::nearbyint((to.width - size) / 2.0));
      crop = s.resized(cv::Rect(left, top, size, size));
      break;
    }
    case Transform::kTrain: {
      const cv::Rect r = random_resized_crop_rect(bgr.cols, bgr.rows, rng);
      const cv::Size to(size, size);
      cv::resize(bgr(r), s.resized, to, 0, 0, interpolation_for(r.size(), to, sc.resampling));
      crop = s.resized;
      break;
    }
    case Transform::kCifar: {
      cv::copyMakeBorder(bgr, s.padded, kCifarPadding, kCifarPadding, kCifarPadding,
                         kCifarPadding, cv::BORDER_CONSTANT, cv::Scalar::all(0));
      const int x = rng.uniform_int(0, s.padded.cols - size);
      const int y = rng.uniform_int(0, s.padded.rows - size);
      crop = s.padded(cv::Rect(x, y, size, size));
      break;
    }
  }
  if (sc.transform != Transform::kEval && rng.bernoulli(kFlipProbability)) {
    cv::flip(crop, s.flipped, 1);
    crop = s.flipped;
  }
  write_chw(crop, out, norm, s);
}

class Loop {
 public:
  Loop(const ImageList& list, const Scenario& sc)
      : list_(list), sc_(sc), sample_floats_(std::size_t{3} * sc.size * sc.size),
        batch_(sample_floats_ * sc.batch), labels_(sc.batch),
        start_(sc.threads + 1), done_(sc.threads + 1) {
    for (int t = 0; t < sc_.threads; ++t) workers_.emplace_back([this] { worker_main(); });
  }

  ~Loop() {
    stop_ = true;
    start_.arrive_and_wait();
    for (std::thread& t : workers_) t.join();
  }

  // One epoch; returns the images delivered and adds the touched elements to checksum.
  std::int64_t epoch(std::int64_t e, double& checksum) {
    const auto n = static_cast<std::int64_t>(list_.entries.size());
    std::int64_t images = 0;
    for (std::int64_t first = 0; first < n; first += sc_.batch) {
      epoch_ = e;
      first_ = first;
      count_ = static_cast<int>(std::min<std::int64_t>(sc_.batch, n - first));
      next_.store(0, std::memory_order_relaxed);
      start_.arrive_and_wait();  // workers fill the batch ...
      done_.arrive_and_wait();   // ... and it is complete
      if (error_) std::rethrow_exception(error_);
      // The consumer touches each batch, as a training step would read it.
      checksum += batch_[0] + labels_[count_ - 1];
      images += count_;
    }
    return images;
  }

 private:
  void worker_main() {
    Scratch scratch;
    const Normaliser norm;
    for (;;) {
      start_.arrive_and_wait();
      if (stop_) return;
      for (int i = next_.fetch_add(1, std::memory_order_relaxed); i < count_;
           i = next_.fetch_add(1, std::memory_order_relaxed)) {
        const std::int64_t index = first_ + i;
        const ImageEntry& entry = list_.entries[static_cast<std::size_t>(index)];
        try {
          transform_one(entry.path, sc_, epoch_, index, batch_.data() + i * sample_floats_,
                        norm, scratch);
          labels_[static_cast<std::size_t>(i)] = entry.label;
        } catch (...) {
          const std::lock_guard<std::mutex> lock(error_mutex_);
          if (!error_) error_ = std::current_exception();
        }
      }
      done_.arrive_and_wait();
    }
  }

  const ImageList& list_;
  const Scenario sc_;
  const std::size_t sample_floats_;
  std::vector<float> batch_;          // (batch, 3, size, size), allocated once
  std::vector<std::int32_t> labels_;  // (batch)
  // Written by the caller before start_, read by the workers after it: the barrier orders them.
  std::int64_t epoch_ = 0;
  std::int64_t first_ = 0;
  int count_ = 0;
  bool stop_ = false;
  std::atomic<int> next_{0};
  std::barrier<> start_;
  std::barrier<> done_;
  std::mutex error_mutex_;
  std::exception_ptr error_;
  std::vector<std::thread> workers_;
};

}  // namespace

LoaderResult run_opencv_loop(const ImageList& list, const Scenario& scenario) {
  const int previous_threads = cv::getNumThreads();
  cv::setNumThreads(1);
  LoaderResult result;
  try {
    Loop loop(list, scenario);
    loop.epoch(0, result.checksum);  // warm-up: page cache, threads, scratch allocations
    const Clock::time_point start = Clock::now();
    for (int e = 1; e <= scenario.epochs; ++e) result.images += loop.epoch(e, result.checksum);
    result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  } catch (...) {
    cv::setNumThreads(previous_threads);
    throw;
  }
  cv::setNumThreads(previous_threads);
  result.images_per_sec = static_cast<double>(result.images) / result.seconds;
  return result;
}

}  // namespace sluice::bench
