// Micro benchmark of the PNG decode alone, on one core, all files from memory, each iteration the
// next file, on the sets bench/formats/write_sets.py writes (imagenet-photos and cifar10/test as
// PNG, in /tmp/sluice-formats or SLUICE_PNG_SETS):
//   spng_rows     libspng row by row into 8-bit rows as stored, as the decode stage did before its
//                 whole-image path (the ratios' baseline: the old decoder in the same process)
//   spng_rgb8     libspng's whole-image decode to RGB (loader_compare's decode limit for PNG)
//   sluice        the decode stage's kernel (ImageDecoder: probe + decode, the whole-image path)
// Run: ./build/bench/png_decode_bench --benchmark_repetitions=5 --benchmark_enable_random_interleaving
// (items/s = images/s; the closing table has the medians of the repetitions and their ratios).
#include <benchmark/benchmark.h>
#include <spng.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "stages/decode/image_decoder.hpp"
#include "ratio_reporter.hpp"

namespace {

namespace fs = std::filesystem;

struct File {
  std::vector<std::uint8_t> bytes;
  int width = 0, height = 0;
};

struct Set {
  std::vector<File> files;
  std::vector<std::uint8_t> out;  // the largest image, RGB
};

struct SpngFree {
  void operator()(spng_ctx* c) const { spng_ctx_free(c); }
};

const Set& set(const std::string& name) {
  static std::map<std::string, Set> sets;
  auto [it, fresh] = sets.try_emplace(name);
  if (!fresh) return it->second;
  const char* env = std::getenv("SLUICE_PNG_SETS");
  const fs::path dir = fs::path(env != nullptr && *env != '\0' ? env : "/tmp/sluice-formats") / name;
  std::vector<fs::path> paths;
  if (fs::is_directory(dir)) {
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      if (e.is_regular_file()) paths.push_back(e.path());
    }
  }
  std::sort(paths.begin(), paths.end());
  std::size_t most = 0;
  for (const fs::path& p : paths) {
    std::ifstream in(p, std::ios::binary);
    File f;
    f.bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    const std::unique_ptr<spng_ctx, SpngFree> ctx(spng_ctx_new(0));
    spng_ihdr ihdr{};
    if (spng_set_png_buffer(ctx.get(), f.bytes.data(), f.bytes.size()) != 0 || spng_get_ihdr(ctx.get(), &ihdr) != 0) continue;
    f.width = static_cast<int>(ihdr.width);
    f.height = static_cast<int>(ihdr.height);
    most = std::max(most, static_cast<std::size_t>(f.width) * f.height * 4);
    it->second.files.push_back(std::move(f));
  }
  it->second.out.resize(most);
  return it->second;
}

// libspng as the decode stage used it: the header, then rows as stored (8-bit RGB lands as is).
bool spng_rows(const File& f, std::uint8_t* out) {
  const std::unique_ptr<spng_ctx, SpngFree> ctx(spng_ctx_new(0));
  if (spng_set_png_buffer(ctx.get(), f.bytes.data(), f.bytes.size()) != 0) return false;
  spng_ihdr ihdr{};
  if (spng_get_ihdr(ctx.get(), &ihdr) != 0) return false;
  const int format = ihdr.bit_depth == 8 && ihdr.color_type == SPNG_COLOR_TYPE_TRUECOLOR ? SPNG_FMT_PNG : SPNG_FMT_RGB8;
  if (spng_decode_image(ctx.get(), nullptr, 0, format, SPNG_DECODE_PROGRESSIVE) != 0) return false;
  const std::size_t row = static_cast<std::size_t>(f.width) * 3;
  for (int y = 0; y < f.height; ++y) {
    const int code = spng_decode_row(ctx.get(), out + row * y, row);
    if (code != 0 && !(code == SPNG_EOI && y + 1 == f.height)) return false;
  }
  return true;
}

bool spng_rgb8(const File& f, std::uint8_t* out) {
  const std::unique_ptr<spng_ctx, SpngFree> ctx(spng_ctx_new(0));
  if (spng_set_png_buffer(ctx.get(), f.bytes.data(), f.bytes.size()) != 0) return false;
  return spng_decode_image(ctx.get(), out, static_cast<std::size_t>(f.width) * f.height * 3, SPNG_FMT_RGB8, 0) == 0;
}

void run(benchmark::State& state, const std::string& name, const std::function<bool(const File&, std::uint8_t*)>& decode) {
  const Set& s = set(name);
  if (s.files.empty()) return state.SkipWithError(("no PNG files in " + name + " (bench/formats/write_sets.py)").c_str());
  std::uint8_t* out = const_cast<std::uint8_t*>(s.out.data());
  std::size_t i = 0;
  for (auto _ : state) {
    if (!decode(s.files[i++ % s.files.size()], out)) return state.SkipWithError("decode failed");
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations());
}

void run_sluice(benchmark::State& state, const std::string& name) {
  sluice::stages::ImageDecoder decoder(sluice::DecodeOptions{});
  run(state, name, [&decoder](const File& f, std::uint8_t* out) {
    const sluice::stages::ImageProbe p = decoder.probe(f.bytes);
    decoder.decode(f.bytes, p, sluice::ImageView{out, p.width, p.height, 3, static_cast<std::ptrdiff_t>(p.width) * 3});
    return true;
  });
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> sets = {"imagenet-png", "cifar-png"};
  const std::vector<std::string> kinds = {"spng_rows", "spng_rgb8", "sluice"};
  for (const std::string& s : sets) {
    benchmark::RegisterBenchmark((s + "/spng_rows").c_str(), [s](benchmark::State& st) { run(st, s, spng_rows); })->MinTime(1.0);
    benchmark::RegisterBenchmark((s + "/spng_rgb8").c_str(), [s](benchmark::State& st) { run(st, s, spng_rgb8); })->MinTime(1.0);
    benchmark::RegisterBenchmark((s + "/sluice").c_str(), [s](benchmark::State& st) { run_sluice(st, s); })->MinTime(1.0);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  sluice::bench::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf("\n%-24s %12s %14s\n", "PNG decode, one core", "images/s", "vs spng_rows");
  for (const std::string& s : sets) {
    const double base = reporter.median(s + "/spng_rows");
    for (const std::string& k : kinds) {
      const double rate = reporter.median(s + "/" + k);
      if (rate == 0) continue;
      std::printf("%-24s %12.0f", (s + "/" + k).c_str(), rate);
      if (base > 0) std::printf(" %13.2fx", rate / base);
      std::printf("\n");
    }
  }
  return 0;
}
