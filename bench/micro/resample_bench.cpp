// Micro benchmark of the resize kernel (src/stages/resample.*), every kernel set on the same
// geometries in one run, then the SIMD/scalar ratios:
//   resize   500x375 RGB -> 224x224, antialiased bilinear (ImageNet's median image, one sample)
//   crop     341x256 region of 500x375 -> 224x224 (a random-resized-crop sample)
//   padcrop  32x32 RGB pad 4 + crop 32 (CIFAR's RandomCrop): the identity copy path
//   grey     500x375 grey -> 224x224
//   hpass    341x256 RGB or grey -> 224x256: the horizontal pass alone (y is a copy)
// "+setup" rows build the tap tables inside the loop too: the pipeline sets up once per sample.
// Run: ./build/bench/resample_bench  (items/s = images/s on one core)
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "stages/image/resample.hpp"
#include "stages/image/resample_kernels.hpp"
#include "ratio_reporter.hpp"

namespace {

using sluice::ConstImageView;
using sluice::Filter;
using sluice::ImageView;
using sluice::stages::AxisMap;
using sluice::stages::ResampleIsa;
using sluice::stages::ResampleParams;
using sluice::stages::Resampler;
using sluice::stages::ResamplerTestPeer;

struct Source {
  int width, height, channels;
  std::vector<std::uint8_t> pixels;
};

// Smooth gradients plus noise, like a photo as far as the kernel can tell (it is data-oblivious).
Source make_source(int width, int height, int channels) {
  Source s{width, height, channels,
           std::vector<std::uint8_t>(static_cast<std::size_t>(width) * height * channels)};
  std::mt19937 rng(7);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < channels; ++c) {
        const int v = (x * (3 + c) + y * 2) % 256 + static_cast<int>(rng() % 16) - 8;
        s.pixels[(static_cast<std::size_t>(y) * width + x) * channels + c] =
            static_cast<std::uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
      }
    }
  }
  return s;
}

struct Case {
  std::string name;
  Source source;
  ResampleParams params;
};

std::vector<Case> make_cases() {
  const auto resize = [](int in, int out) {
    return AxisMap{0.0, static_cast<double>(in) / out, out, 0, in};
  };
  std::vector<Case> cases;
  cases.push_back({"resize_500x375_rgb_to_224",
                   make_source(500, 375, 3),
                   {resize(500, 224), resize(375, 224), 3, Filter::kBilinear, true, 0}});
  cases.push_back({"crop_341x256_rgb_to_224",
                   make_source(500, 375, 3),
                   {AxisMap{60, 341.0 / 224, 224, 60, 401}, AxisMap{40, 256.0 / 224, 224, 40, 296},
                    3, Filter::kBilinear, true, 0}});
  cases.push_back(
      {"padcrop_32x32_rgb",
       make_source(32, 32, 3),
       {AxisMap{-3, 1, 32, 0, 32}, AxisMap{2, 1, 32, 0, 32}, 3, Filter::kBilinear, true, 0}});
  cases.push_back({"resize_500x375_grey_to_224",
                   make_source(500, 375, 1),
                   {resize(500, 224), resize(375, 224), 1, Filter::kBilinear, true, 0}});
  cases.push_back({"hpass_341x256_rgb_to_224x256",
                   make_source(341, 256, 3),
                   {resize(341, 224), AxisMap{0, 1, 256, 0, 256}, 3, Filter::kBilinear, true, 0}});
  cases.push_back({"hpass_341x256_grey_to_224x256",
                   make_source(341, 256, 1),
                   {resize(341, 224), AxisMap{0, 1, 256, 0, 256}, 1, Filter::kBilinear, true, 0}});
  return cases;
}

void run_case(benchmark::State& state, const Case& c, ResampleIsa isa, bool with_setup) {
  Resampler r;
  ResamplerTestPeer::set_isa(r, isa);
  r.setup(c.params);
  std::vector<std::uint8_t> scratch(r.scratch_bytes());
  const ResampleParams& p = c.params;
  std::vector<std::uint8_t> dst(static_cast<std::size_t>(p.x.out_size) * p.y.out_size * p.channels);
  const ConstImageView src(c.source.pixels.data(), c.source.width, c.source.height,
                           c.source.channels, c.source.width * c.source.channels);
  const ImageView out{dst.data(), p.x.out_size, p.y.out_size, p.channels,
                      p.x.out_size * p.channels};
  for (auto _ : state) {
    if (with_setup) r.setup(p);
    r.run(src, 0, 0, out, scratch);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(dst.size()));
}

}  // namespace

int main(int argc, char** argv) {
  static const std::vector<Case> cases = make_cases();
  std::vector<ResampleIsa> sets{ResampleIsa::kScalar};
  for (ResampleIsa isa : {ResampleIsa::kSse41, ResampleIsa::kAvx2}) {
    if (ResamplerTestPeer::supported(isa)) sets.push_back(isa);
  }
  std::vector<std::string> rows;
  for (const Case& c : cases) {
    for (bool with_setup : {false, true}) {
      const std::string row = c.name + (with_setup ? "+setup" : "");
      rows.push_back(row);
      for (ResampleIsa isa : sets) {
        benchmark::RegisterBenchmark(
            (row + "/" + to_string(isa)).c_str(),
            [&c, isa, with_setup](benchmark::State& s) { run_case(s, c, isa, with_setup); });
      }
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  sluice::bench::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);

  std::printf("\n%-34s %14s", "images/s (one core)", "scalar");
  for (std::size_t i = 1; i < sets.size(); ++i)
    std::printf(" %14s %8s", to_string(sets[i]), "ratio");
  std::printf("\n");
  for (const std::string& row : rows) {
    const double scalar = reporter.median(row + "/scalar");
    if (scalar == 0) continue;  // filtered out
    std::printf("%-34s %14.0f", row.c_str(), scalar);
    for (std::size_t i = 1; i < sets.size(); ++i) {
      const double rate = reporter.median(row + "/" + to_string(sets[i]));
      if (rate == 0) continue;
      std::printf(" %14.0f %7.2fx", rate, rate / scalar);
    }
    std::printf("\n");
  }
  return 0;
}
