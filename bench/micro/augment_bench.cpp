// Micro benchmark of the augment kernels (src/stages/augment/) on 224x224 RGB images, each kernel's
// cost per image as a fraction of decoding that image's JPEG, both measured in this run:
//   decode_224        JpegDecoder read_header + decode of one imagenette-val JPEG (224x224, RGB)
//   rotate_nearest / rotate_bilinear   F.rotate by 17 degrees
//   affine_nearest / affine_bilinear   F.affine (angle 12, translate (5, -3), scale 1.1, shear 8)
//   rotate_bilinear_scalar / affine_bilinear_scalar   the same two through the scalar reference
//                     kernel (WarpIsa::kScalar); the two above take AVX2 where the CPU has it
//   translate_bilinear / translate_bilinear_scalar   F.affine translate (13, 0), TrivialAugmentWide's
//                     TranslateX: the whole-pixel shift's row copies, and Pillow's engine pixel by pixel
//   blur_3 / blur_23  F.gaussian_blur, kernel 3 (sigma 1) and 23 (sigma 3.5, SimCLR's size)
//   posterize, solarize, invert, autocontrast, equalize, sharpness (factor 1.8)
//   copy              the image copied into the output (what the in-place kernels below include)
//   brightness, contrast, saturation, hue, grayscale   the colour kernels (color.hpp), in place
//                     on the copy: ColorJitter's four adjustments, Grayscale
//   erase_constant / erase_random   RandomErasing's write of a 94x94 rectangle (its mean area at
//                     the default scale) into an f32 CHW sample (erase.hpp)
//   mixup_f32 / cutmix_f32  a batch of 32 samples (f32 NCHW, 3x224x224) mixed in place, per sample
// Each iteration takes the next of the decoded images, so the inputs are real photos.
// Run: ./build/bench/augment_bench --benchmark_repetitions=5 --benchmark_enable_random_interleaving
// (the closing table: the median of the repetitions, per image, and the fraction of decode_224;
// SLUICE_DATASETS overrides the datasets folder)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "stages/augment/affine.hpp"
#include "stages/augment/batch_mix.hpp"
#include "stages/augment/blur.hpp"
#include "stages/augment/color.hpp"
#include "stages/augment/erase.hpp"
#include "stages/augment/point_ops.hpp"
#include "stages/decode/jpeg_decoder.hpp"
#include "ratio_reporter.hpp"

namespace {

namespace fs = std::filesystem;
using sluice::ConstImageView;
using sluice::ImageView;
using namespace sluice::stages;  // NOLINT: the kernels under test

constexpr int kSide = 224;
constexpr std::size_t kImageBytes = kSide * kSide * 3;

struct Data {
  std::vector<std::vector<std::uint8_t>> jpegs;   // 224x224 RGB JPEGs
  std::vector<std::vector<std::uint8_t>> pixels;  // the same, decoded
};

const Data& data() {
  static const Data loaded = [] {
    Data d;
    const char* env = std::getenv("SLUICE_DATASETS");
    const fs::path dir = fs::path(env != nullptr && *env != '\0' ? env : SLUICE_DATASETS_DIR) / "imagenette-val";
    std::vector<fs::path> paths;
    if (fs::is_directory(dir)) {
      for (const auto& e : fs::recursive_directory_iterator(dir)) {
        if (e.is_regular_file()) paths.push_back(e.path());
      }
    }
    std::sort(paths.begin(), paths.end());
    JpegDecoder decoder(sluice::DecodeOptions{});
    for (const auto& p : paths) {
      if (d.jpegs.size() == 256) break;
      std::ifstream in(p, std::ios::binary);
      std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      try {
        const JpegHeader header = decoder.read_header(bytes);
        if (header.width != kSide || header.height != kSide || header.components != 3) continue;
        std::vector<std::uint8_t> px(kImageBytes);
        decoder.decode(bytes, header, JpegRequest{1, {}}, ImageView{px.data(), kSide, kSide, 3, kSide * 3});
        d.jpegs.push_back(std::move(bytes));
        d.pixels.push_back(std::move(px));
      } catch (const std::exception&) {
        continue;  // a greyscale or odd file: not in the sample
      }
    }
    return d;
  }();
  return loaded;
}

void run_decode(benchmark::State& state) {
  if (data().jpegs.empty()) return state.SkipWithError("imagenette-val not found (set SLUICE_DATASETS)");
  JpegDecoder decoder(sluice::DecodeOptions{});
  std::vector<std::uint8_t> out(kImageBytes);
  std::size_t i = 0;
  for (auto _ : state) {
    const auto& bytes = data().jpegs[i++ % data().jpegs.size()];
    const JpegHeader header = decoder.read_header(bytes);
    decoder.decode(bytes, header, JpegRequest{1, {}}, ImageView{out.data(), kSide, kSide, 3, kSide * 3});
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
}

// kernel(src, dst, workspace): one image through one kernel.
using Kernel = std::function<void(ConstImageView, ImageView, std::span<std::byte>)>;

void run_kernel(benchmark::State& state, const Kernel& kernel) {
  if (data().pixels.empty()) return state.SkipWithError("imagenette-val not found (set SLUICE_DATASETS)");
  std::vector<std::uint8_t> out(kImageBytes);
  // The blur's scratch, or an f32 sample for the erase kernels, whichever is larger.
  std::vector<std::byte> workspace(std::max(gaussian_blur_workspace_bytes({kSide, kSide}, 3, {23, 23, 3.5, 3.5}),
                                            kImageBytes * sizeof(float)));
  std::size_t i = 0;
  for (auto _ : state) {
    const auto& px = data().pixels[i++ % data().pixels.size()];
    kernel(ConstImageView(px.data(), kSide, kSide, 3, kSide * 3), ImageView{out.data(), kSide, kSide, 3, kSide * 3},
           workspace);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
}

// One batch of 32 f32 samples mixed in place per iteration; items are samples.
void run_batch_mix(benchmark::State& state, BatchMixKind kind) {
  constexpr int kSamples = 32;
  std::vector<float> batch(static_cast<std::size_t>(kSamples) * kImageBytes);
  for (std::size_t i = 0; i < batch.size(); ++i) batch[i] = static_cast<float>(i % 251) / 251.0f;
  const BatchBuffer buffer{batch.data(), sluice::DType::kF32, sluice::Layout::kNCHW, kSamples, 3, kSide, kSide};
  std::vector<std::byte> workspace(batch_mix_workspace_bytes(buffer));
  const BatchMixParams params{kind, 1.0, 1000};
  std::int64_t index = 0;
  for (auto _ : state) {
    const BatchMixDraw draw = draw_batch_mix(params, 1, 0, index++, {kSide, kSide});
    mix_batch(buffer, params, draw, workspace);
    benchmark::DoNotOptimize(batch.data());
  }
  state.SetItemsProcessed(state.iterations() * kSamples);
}

}  // namespace

int main(int argc, char** argv) {
  const auto nearest = WarpInterpolation::kNearest;
  const auto bilinear = WarpInterpolation::kBilinear;
  const AffineParams affine_params{12, 5, -3, 1.1, 8, 0};
  const std::vector<std::pair<std::string, Kernel>> kernels = {
      {"rotate_nearest", [=](auto s, auto d, auto) { rotate(s, d, 17, nearest); }},
      {"rotate_bilinear", [=](auto s, auto d, auto) { rotate(s, d, 17, bilinear); }},
      {"affine_nearest", [=](auto s, auto d, auto) { affine(s, d, affine_params, nearest); }},
      {"affine_bilinear", [=](auto s, auto d, auto) { affine(s, d, affine_params, bilinear); }},
      {"rotate_bilinear_scalar", [=](auto s, auto d, auto) {
         warp_affine(s, d, rotation_matrix(17, {s.width, s.height}), bilinear, {}, WarpIsa::kScalar);
       }},
      {"affine_bilinear_scalar", [=](auto s, auto d, auto) {
         warp_affine(s, d, affine_matrix(affine_params, {s.width, s.height}), bilinear, {}, WarpIsa::kScalar);
       }},
      {"translate_bilinear", [=](auto s, auto d, auto) { affine(s, d, {0, 13, 0}, bilinear); }},
      {"translate_bilinear_scalar", [=](auto s, auto d, auto) {
         warp_affine(s, d, affine_matrix({0, 13, 0}, {s.width, s.height}), bilinear, {}, WarpIsa::kScalar);
       }},
      {"blur_3", [](auto s, auto d, auto w) { gaussian_blur(s, d, {3, 3, 1.0, 1.0}, w); }},
      {"blur_23", [](auto s, auto d, auto w) { gaussian_blur(s, d, {23, 23, 3.5, 3.5}, w); }},
      {"posterize", [](auto s, auto d, auto) { posterize(s, d, 4); }},
      {"solarize", [](auto s, auto d, auto) { solarize(s, d, 128); }},
      {"invert", [](auto s, auto d, auto) { invert(s, d); }},
      {"autocontrast", [](auto s, auto d, auto) { autocontrast(s, d); }},
      {"equalize", [](auto s, auto d, auto) { equalize(s, d); }},
      {"sharpness", [](auto s, auto d, auto w) { adjust_sharpness(s, d, 1.8f, w); }},
      {"copy", [](auto s, auto d, auto) { std::memcpy(d.data, s.data, kImageBytes); }},
      {"brightness", [](auto s, auto d, auto) { std::memcpy(d.data, s.data, kImageBytes); adjust_brightness(d, 1.3); }},
      {"contrast", [](auto s, auto d, auto) { std::memcpy(d.data, s.data, kImageBytes); adjust_contrast(d, 0.7); }},
      {"saturation", [](auto s, auto d, auto) { std::memcpy(d.data, s.data, kImageBytes); adjust_saturation(d, 1.4); }},
      {"hue", [](auto s, auto d, auto) { std::memcpy(d.data, s.data, kImageBytes); adjust_hue(d, 0.1); }},
      {"grayscale", [](auto s, auto d, auto) { std::memcpy(d.data, s.data, kImageBytes); grayscale(d); }},
      {"erase_constant", [](auto, auto d, auto w) {
         const SlotSample slot{w.data(), sluice::DType::kF32, sluice::Layout::kNCHW, 3, {kSide, kSide}};
         const float zero[] = {0.0f};
         erase_constant(slot, {50, 60, 94, 94}, zero);
         benchmark::DoNotOptimize(d.data);
       }},
      {"erase_random", [](auto, auto d, auto w) {
         const SlotSample slot{w.data(), sluice::DType::kF32, sluice::Layout::kNCHW, 3, {kSide, kSide}};
         sluice::CounterRng rng(1, 2, 3);
         erase_random(slot, {50, 60, 94, 94}, rng);
         benchmark::DoNotOptimize(d.data);
       }},
  };
  benchmark::RegisterBenchmark("decode_224", run_decode)->MinTime(0.5);
  for (const auto& [name, fn] : kernels) {
    benchmark::RegisterBenchmark(name.c_str(), [fn = fn](benchmark::State& s) { run_kernel(s, fn); })->MinTime(0.5);
  }
  const std::vector<std::pair<std::string, BatchMixKind>> mixes = {{"mixup_f32", BatchMixKind::kMixUp},
                                                                   {"cutmix_f32", BatchMixKind::kCutMix}};
  for (const auto& [name, kind] : mixes) {
    benchmark::RegisterBenchmark(name.c_str(), [kind = kind](benchmark::State& s) { run_batch_mix(s, kind); })->MinTime(0.5);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  sluice::bench::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);

  const std::map<std::string, double> rates = reporter.medians();
  const auto base = rates.find("decode_224");
  std::printf("\n%-22s %12s %14s\n", "224x224 RGB", "images/s", "x decode time");
  if (base != rates.end()) std::printf("%-22s %12.0f %14.3f\n", "decode_224", base->second, 1.0);
  for (const auto& [name, fn] : kernels) {
    const auto it = rates.find(name);
    if (it == rates.end()) continue;  // filtered out
    std::printf("%-22s %12.0f", name.c_str(), it->second);
    if (base != rates.end()) std::printf(" %14.3f", base->second / it->second);
    std::printf("\n");
  }
  for (const auto& [name, kind] : mixes) {
    const auto it = rates.find(name);
    if (it == rates.end()) continue;
    std::printf("%-22s %12.0f", name.c_str(), it->second);
    if (base != rates.end()) std::printf(" %14.3f", base->second / it->second);
    std::printf("  (per sample of a 32-sample f32 batch)\n");
  }
  return 0;
}
