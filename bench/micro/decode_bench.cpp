// Micro benchmark of the decode_jpeg kernel (src/stages/jpeg_decoder.*) against plain TurboJPEG on
// the 1,000 wallpaper-crops JPEGs (ImageNet's size spread, median 500x375), each iteration the
// next file, all from memory:
//   tj_full            tjDecompress2, whole image, RGB              (the baseline of the ratios)
//   tj_full_fastdct    the same with TJFLAG_FASTDCT
//   tj_half            tjDecompress2 at 1/2
//   sluice_full        JpegDecoder read_header + decode, whole image, RGB
//   sluice_full_fastdct
//   sluice_half        at 1/2 (DCT scaling)
//   sluice_roi50       the centre region of 50% of the area (libjpeg crop + skip + early stop)
//   sluice_roi50_fastup  the same with fast (nearest) chroma upsampling
//   sluice_half_roi50  both: the centre 50% at 1/2 (a random-resized-crop of a big image)
// Run: ./build/bench/decode_bench --benchmark_repetitions=5 --benchmark_enable_random_interleaving
// (items/s = images/s on one core, medians of the repetitions in the closing table;
// SLUICE_DATASETS overrides the datasets folder)
#include <benchmark/benchmark.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "stages/decode/jpeg_decoder.hpp"
#include "ratio_reporter.hpp"

namespace {

namespace fs = std::filesystem;
using sluice::ImageView;
using sluice::Rect;
using sluice::stages::JpegDecoder;
using sluice::stages::JpegHeader;
using sluice::stages::JpegRequest;

struct File {
  std::vector<std::uint8_t> bytes;
  int width = 0, height = 0;
};

std::vector<File> load_wallpaper_crops() {
  const char* env = std::getenv("SLUICE_DATASETS");
  const fs::path dir = fs::path(env != nullptr && *env != '\0' ? env : SLUICE_DATASETS_DIR) / "wallpaper-crops";
  std::vector<fs::path> paths;
  if (fs::is_directory(dir)) {
    for (const auto& e : fs::directory_iterator(dir)) paths.push_back(e.path());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<File> files;
  tjhandle tj = tjInitDecompress();
  for (const auto& p : paths) {
    std::ifstream in(p, std::ios::binary);
    File f;
    f.bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    int subsamp = 0, space = 0;
    if (tjDecompressHeader3(tj, f.bytes.data(), f.bytes.size(), &f.width, &f.height, &subsamp, &space) == 0) {
      files.push_back(std::move(f));
    }
  }
  tjDestroy(tj);
  return files;
}

const std::vector<File>& files() {
  static const std::vector<File> loaded = load_wallpaper_crops();
  return loaded;
}

std::vector<std::uint8_t>& output() {
  static std::vector<std::uint8_t> buffer = [] {
    std::size_t most = 0;
    for (const File& f : files()) most = std::max(most, static_cast<std::size_t>(f.width) * f.height * 3);
    return std::vector<std::uint8_t>(most);
  }();
  return buffer;
}

void run_turbo(benchmark::State& state, int denom, int flags) {
  if (files().empty()) return state.SkipWithError("wallpaper-crops not found (set SLUICE_DATASETS)");
  tjhandle tj = tjInitDecompress();
  const tjscalingfactor factor{1, denom};
  std::size_t i = 0;
  for (auto _ : state) {
    const File& f = files()[i++ % files().size()];
    const int w = TJSCALED(f.width, factor), h = TJSCALED(f.height, factor);
    if (tjDecompress2(tj, f.bytes.data(), f.bytes.size(), output().data(), w, w * 3, h, TJPF_RGB, flags) != 0) {
      state.SkipWithError(tjGetErrorStr2(tj));
      break;
    }
    benchmark::DoNotOptimize(output().data());
  }
  tjDestroy(tj);
  state.SetItemsProcessed(state.iterations());
}

// area: the fraction of the image the centred region covers (1: whole image).
void run_sluice(benchmark::State& state, int denom, double area, const sluice::DecodeOptions& options) {
  if (files().empty()) return state.SkipWithError("wallpaper-crops not found (set SLUICE_DATASETS)");
  JpegDecoder decoder(options);
  std::size_t i = 0;
  for (auto _ : state) {
    const File& f = files()[i++ % files().size()];
    const std::span<const std::uint8_t> bytes(f.bytes);
    const JpegHeader header = decoder.read_header(bytes);
    JpegRequest request{denom, {}};
    if (area < 1.0) {
      const sluice::Size2 s = JpegDecoder::scaled_size(header, denom);
      const int w = static_cast<int>(std::lround(s.width * std::sqrt(area)));
      const int h = static_cast<int>(std::lround(s.height * std::sqrt(area)));
      request.region = Rect{(s.width - w) / 2, (s.height - h) / 2, w, h};
    }
    const Rect r = decoder.decoded_region(header, request);
    decoder.decode(bytes, header, request, ImageView{output().data(), r.width, r.height, 3, r.width * 3});
    benchmark::DoNotOptimize(output().data());
  }
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::pair<std::string, std::function<void(benchmark::State&)>>> cases = {
      {"tj_full", [](benchmark::State& s) { run_turbo(s, 1, 0); }},
      {"tj_full_fastdct", [](benchmark::State& s) { run_turbo(s, 1, TJFLAG_FASTDCT); }},
      {"tj_half", [](benchmark::State& s) { run_turbo(s, 2, 0); }},
      {"sluice_full", [](benchmark::State& s) { run_sluice(s, 1, 1.0, {}); }},
      {"sluice_full_fastdct", [](benchmark::State& s) { run_sluice(s, 1, 1.0, {.fast_dct = true}); }},
      {"sluice_half", [](benchmark::State& s) { run_sluice(s, 2, 1.0, {}); }},
      {"sluice_roi50", [](benchmark::State& s) { run_sluice(s, 1, 0.5, {}); }},
      {"sluice_roi50_fastup", [](benchmark::State& s) { run_sluice(s, 1, 0.5, {.fast_upsample = true}); }},
      {"sluice_half_roi50", [](benchmark::State& s) { run_sluice(s, 2, 0.5, {}); }},
  };
  for (const auto& [name, fn] : cases) benchmark::RegisterBenchmark(name.c_str(), fn)->MinTime(1.0);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  sluice::bench::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);

  const std::map<std::string, double> rates = reporter.medians();
  const auto base = rates.find("tj_full");
  std::printf("\n%-22s %12s %10s\n", "wallpaper-crops", "images/s", "vs tj_full");
  for (const auto& [name, fn] : cases) {
    const auto it = rates.find(name);
    if (it == rates.end()) continue;  // filtered out
    std::printf("%-22s %12.0f", name.c_str(), it->second);
    if (base != rates.end()) std::printf(" %9.2fx", it->second / base->second);
    std::printf("\n");
  }
  return 0;
}
