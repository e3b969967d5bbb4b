// Micro benchmark of one whole sample on one core: the fused SampleProgram (read from the page
// cache, header, plan, decode of the scale and region the output needs, resample, normalise to
// float32 CHW) for the eval and train transforms at 224, each iteration the next file of a folder,
// against plain full-size tjDecompress2 (TJFLAG_FASTDCT) of the same files from memory: the decode
// limit's work per image. Variants switch one decode choice at a time, so an A/B of a decode
// setting is a ratio measured in one run, in CPU time per image rather than wall time (the
// machines we measure on are shared).
//
//   SLUICE_BENCH_DATA=/work/corpus/imagenet-like/tune ./build/bench/sample_bench
//       --benchmark_repetitions=3 --benchmark_enable_random_interleaving
//
// items/s = images/s on one core. SLUICE_BENCH_DATA: a folder of JPEGs (class sub-folders or
// flat); default the datasets' wallpaper-crops.
#include <benchmark/benchmark.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <cstdio>  // jpeglib.h needs FILE and size_t declared first
#include <jpeglib.h>

#include "stages/source/item_table.hpp"
#include "stages/program/sample_program.hpp"

namespace {

namespace fs = std::filesystem;
using namespace sluice;
using namespace sluice::stages;

struct Corpus {
  ItemTable items;
  std::vector<std::vector<std::uint8_t>> bytes;  // for the TurboJPEG baseline
  std::vector<int> width, height, pixel_format;
  std::size_t largest = 0;
};

const Corpus& corpus() {
  static const Corpus c = [] {
    const char* env = std::getenv("SLUICE_BENCH_DATA");
    const fs::path dir = env != nullptr && *env != '\0' ? fs::path(env)
                                                        : fs::path(SLUICE_DATASETS_DIR) / "wallpaper-crops";
    Corpus out;
    std::vector<fs::path> paths;
    if (fs::is_directory(dir)) {
      for (const auto& e : fs::recursive_directory_iterator(dir)) {
        std::string ext = e.path().extension().string();
        std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return std::tolower(ch); });
        if (e.is_regular_file() && (ext == ".jpg" || ext == ".jpeg")) paths.push_back(e.path());
      }
    }
    std::sort(paths.begin(), paths.end());
    tjhandle tj = tjInitDecompress();
    for (const fs::path& p : paths) {
      std::ifstream in(p, std::ios::binary);
      std::vector<std::uint8_t> b{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      int w = 0, h = 0, sub = 0, space = 0;
      if (tjDecompressHeader3(tj, b.data(), b.size(), &w, &h, &sub, &space) != 0) continue;
      out.items.add_path(p.string(), 0);
      out.width.push_back(w);
      out.height.push_back(h);
      out.pixel_format.push_back(space == TJCS_CMYK || space == TJCS_YCCK ? TJPF_CMYK : TJPF_RGB);
      out.largest = std::max(out.largest, std::size_t(w) * h * 4);
      out.bytes.push_back(std::move(b));
    }
    tjDestroy(tj);
    out.items.finish();
    return out;
  }();
  return c;
}

enum class Transform { kEval, kTrain };

struct Variant {
  Transform transform = Transform::kEval;
  DecodeOptions decode{.fast_dct = true};
  // One untimed pass first (epoch 0), then the timed ones (epochs 1 on): what the program
  // keeps between epochs (each JPEG's resume points) is then in place, as in a loader's steady
  // state. Without it each timed pass is a first epoch.
  bool warm = false;
};

SampleProgramConfig config_for(const Variant& v) {
  SampleProgramConfig config;
  config.decode = v.decode;
  const ResizeOptions resize{};
  if (v.transform == Transform::kEval) {
    config.geometry = {{spec::ResizeShorter{256, resize}, 1}, {spec::CenterCrop{224, 224}, 2}};
  } else {
    config.geometry = {{spec::RandomResizedCrop{224, 224, {}}, 1}, {spec::FlipHorizontal{0.5, {}}, 2}};
  }
  config.normalize = {.mean = {0.485f, 0.456f, 0.406f}, .std = {0.229f, 0.224f, 0.225f},
                      .layout = Layout::kNCHW, .dtype = DType::kF32};
  config.output = {224, 224};
  return config;
}

void run_program(benchmark::State& state, const Variant& v) {
  const Corpus& c = corpus();
  if (c.items.empty()) return state.SkipWithError("no JPEGs (SLUICE_BENCH_DATA)");
  const SampleProgram program(config_for(v));
  auto ws = program.make_workspace();
  // A batch of 64 slots written in turn, as the loader writes its batch buffer: one reused slot
  // would stay in cache and flatter the normalisation's stores.
  constexpr std::size_t kSlots = 64;
  AlignedBuffer batch(program.sample_bytes() * kSlots);
  std::size_t i = 0;
  std::int64_t epoch = 0;
  if (v.warm) {
    for (std::int64_t item = 0; item < c.items.size(); ++item) {
      program.run(c.items, item, SampleKey{epoch, item, 0}, *ws, batch.data());
    }
    ++epoch;
  }
  std::int64_t warm_ns[StageCounters::kStageCount];
  for (int stage = 0; stage < StageCounters::kStageCount; ++stage) warm_ns[stage] = ws->counters.busy_ns[stage].load();
  for (auto _ : state) {
    std::uint8_t* out = batch.data() + (i % kSlots) * program.sample_bytes();
    program.run(c.items, static_cast<std::int64_t>(i), SampleKey{epoch, static_cast<std::int64_t>(i), 0}, *ws, out);
    benchmark::DoNotOptimize(out);
    if (++i == static_cast<std::size_t>(c.items.size())) {
      i = 0;
      ++epoch;
    }
  }
  state.SetItemsProcessed(state.iterations());
  // Wall time per image of each stage (StageCounters): where the time goes, beside the profile.
  const StageCounters& k = ws->counters;
  for (int stage = 0; stage < StageCounters::kStageCount; ++stage) {
    const double ns = static_cast<double>(k.busy_ns[stage].load() - warm_ns[stage]);
    state.counters[std::string(StageCounters::name(stage)) + "_us"] =
        ns / 1e3 / static_cast<double>(state.iterations());
  }
}

void BM_tj_full_fastdct(benchmark::State& state) {
  const Corpus& c = corpus();
  if (c.items.empty()) return state.SkipWithError("no JPEGs (SLUICE_BENCH_DATA)");
  tjhandle tj = tjInitDecompress();
  std::vector<std::uint8_t> out(c.largest);
  std::size_t i = 0;
  for (auto _ : state) {
    tjDecompress2(tj, c.bytes[i].data(), c.bytes[i].size(), out.data(), c.width[i], 0, c.height[i],
                  c.pixel_format[i], TJFLAG_FASTDCT);
    benchmark::DoNotOptimize(out.data());
    i = (i + 1) % static_cast<std::size_t>(c.items.size());
  }
  tjDestroy(tj);
  state.SetItemsProcessed(state.iterations());
}

// Entropy decoding alone (jpeg_read_coefficients: Huffman decode into the coefficient arrays, no
// IDCT, upsampling or colour conversion): the part of every decode that no DCT scale or region
// avoids, so the floor under any loader that decodes these files with libjpeg-turbo.
void BM_entropy_only(benchmark::State& state) {
  const Corpus& c = corpus();
  if (c.items.empty()) return state.SkipWithError("no JPEGs (SLUICE_BENCH_DATA)");
  jpeg_decompress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_decompress(&cinfo);
  std::size_t i = 0;
  for (auto _ : state) {
    jpeg_mem_src(&cinfo, c.bytes[i].data(), c.bytes[i].size());
    jpeg_read_header(&cinfo, TRUE);
    benchmark::DoNotOptimize(jpeg_read_coefficients(&cinfo));
    jpeg_abort_decompress(&cinfo);
    i = (i + 1) % static_cast<std::size_t>(c.items.size());
  }
  jpeg_destroy_decompress(&cinfo);
  state.SetItemsProcessed(state.iterations());
}

// Whole passes over the corpus, so every file weighs the same in every variant.
std::int64_t passes(int n) { return static_cast<std::int64_t>(corpus().items.size()) * n; }

}  // namespace

BENCHMARK(BM_tj_full_fastdct)->Iterations(passes(1));
BENCHMARK(BM_entropy_only)->Iterations(passes(1));
BENCHMARK_CAPTURE(run_program, eval, Variant{})->Iterations(passes(1));
BENCHMARK_CAPTURE(run_program, eval_fast_upsample_when_shrunk,
                  Variant{.decode = {.fast_dct = true, .fast_upsample_when_shrunk = true}})
    ->Iterations(passes(1));
BENCHMARK_CAPTURE(run_program, eval_fast_upsample, Variant{.decode = {.fast_dct = true, .fast_upsample = true}})
    ->Iterations(passes(1));
BENCHMARK_CAPTURE(run_program, eval_no_dct_scaling, Variant{.decode = {.fast_dct = true, .dct_scaling = false}})
    ->Iterations(passes(1));
BENCHMARK_CAPTURE(run_program, eval_no_roi, Variant{.decode = {.fast_dct = true, .roi = false}})->Iterations(passes(1));
BENCHMARK_CAPTURE(run_program, eval_fast_upsample_when_shrunk_steady,
                  Variant{.decode = {.fast_dct = true, .fast_upsample_when_shrunk = true}, .warm = true})
    ->Iterations(passes(1));
BENCHMARK_CAPTURE(run_program, train, Variant{.transform = Transform::kTrain})->Iterations(passes(1));
BENCHMARK_CAPTURE(run_program, train_fast_upsample_when_shrunk,
                  Variant{.transform = Transform::kTrain,
                          .decode = {.fast_dct = true, .fast_upsample_when_shrunk = true}})
    ->Iterations(passes(1));
BENCHMARK_CAPTURE(run_program, train_fast_upsample_when_shrunk_steady,
                  Variant{.transform = Transform::kTrain,
                          .decode = {.fast_dct = true, .fast_upsample_when_shrunk = true},
                          .warm = true})
    ->Iterations(passes(1));
BENCHMARK_CAPTURE(run_program, train_fast_upsample,
                  Variant{.transform = Transform::kTrain, .decode = {.fast_dct = true, .fast_upsample = true}})
    ->Iterations(passes(1));
BENCHMARK_CAPTURE(run_program, train_no_dct_scaling,
                  Variant{.transform = Transform::kTrain, .decode = {.fast_dct = true, .dct_scaling = false}})
    ->Iterations(passes(1));

BENCHMARK_MAIN();
