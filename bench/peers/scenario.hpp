// What one comparison measures, shared by every system so they all run the same work: the
// transform (eval, train or cifar), the output size, batch, thread and epoch counts, and the
// torchvision constants the transforms are defined with.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace sluice::bench {

// eval:  Resize(size * 256 / 224) (shorter side) + CenterCrop(size)
// train: RandomResizedCrop(size, scale (0.08, 1), ratio (3/4, 4/3)) + RandomHorizontalFlip(0.5)
// cifar: RandomCrop(size, padding=4) + RandomHorizontalFlip(0.5)
// All three then ToTensor + Normalize(ImageNet mean/std): float32 CHW.
enum class Transform : std::uint8_t { kEval, kTrain, kCifar };

inline constexpr std::array<float, 3> kImageNetMean = {0.485f, 0.456f, 0.406f};
inline constexpr std::array<float, 3> kImageNetStd = {0.229f, 0.224f, 0.225f};

inline constexpr int kCifarPadding = 4;
inline constexpr double kFlipProbability = 0.5;
inline constexpr double kRrcScaleMin = 0.08;
inline constexpr double kRrcScaleMax = 1.0;
inline constexpr double kRrcRatioMin = 3.0 / 4.0;
inline constexpr double kRrcRatioMax = 4.0 / 3.0;
inline constexpr int kRrcTries = 10;  // torchvision's get_params tries this often, then falls back

// How eval and train resize. kAntialiased: each system's default downscaling filter (sluice and
// torchvision: bilinear widened by the scale, Pillow's; OpenCV: INTER_AREA). kBilinear: plain
// 2-tap bilinear without antialiasing in both sluice (ResizeOptions::antialias = false) and
// OpenCV (INTER_LINEAR), so the two compare like for like. cifar does not resize.
enum class Resampling : std::uint8_t { kAntialiased, kBilinear };

struct Scenario {
  Transform transform = Transform::kEval;
  Resampling resampling = Resampling::kAntialiased;
  int size = 224;        // output side
  int batch = 64;
  int threads = 2;       // worker threads every system gets
  int epochs = 2;        // timed epochs, after one untimed warm-up epoch
  std::uint64_t seed = 1;
};

// The eval transform's resize target: 256 for 224, as torchvision's reference scripts scale it.
constexpr int eval_resize_size(int size) { return size * 256 / 224; }

constexpr std::string_view to_string(Transform t) {
  switch (t) {
    case Transform::kEval: return "eval";
    case Transform::kTrain: return "train";
    case Transform::kCifar: return "cifar";
  }
  return "?";
}

constexpr std::optional<Transform> parse_transform(std::string_view name) {
  if (name == "eval") return Transform::kEval;
  if (name == "train") return Transform::kTrain;
  if (name == "cifar") return Transform::kCifar;
  return std::nullopt;
}

// What a loader run reports. images counts the timed epochs only.
struct LoaderResult {
  std::int64_t images = 0;
  double seconds = 0;
  double images_per_sec = 0;
  double checksum = 0;  // the elements the consumer touched, so the work cannot be optimised out
  // The untimed warm-up epoch (epoch 0) timed on its own, and the build before it, where the
  // system reports them (sluice); 0 where it does not.
  double first_epoch_images_per_sec = 0;
  double setup_seconds = 0;
  // The process's CPU seconds (every thread) per image in epoch 0 and in the timed epochs, where
  // the system reports them (sluice): on a shared machine the CPU an image costs moves far less
  // with the load than the wall time does, so their ratio says what epoch 0 pays beyond the rest.
  double first_epoch_cpu_us_per_image = 0;
  double cpu_us_per_image = 0;
};

}  // namespace sluice::bench
