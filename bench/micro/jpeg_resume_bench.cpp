// The rows above a crop: libjpeg's skip (jpeg_skip_scanlines, what JpegDecoder does today)
// against a splice at a recorded MCU row (stages/decode/jpeg_resume.hpp), on one core, in CPU
// time per image, each iteration the next baseline file of a folder. The crop is eval's (the
// centre square of 0.875 of the shorter side) or a train-like one (a random crop of 8-100% of
// the area, aspect 3/4-4/3, at a random place; the same ones for every variant); each decode
// stops at the crop's last row, as the sample program's do.
//   skip:        JpegDecoder::decode of the crop's rows
//   splice:      splice_at from points recorded before, the spliced file put together, then decode
//   first_read:  scan_resume_points down to the crop, then as splice (what the first epoch pays)
// and the scanner alone against libjpeg's skip, over every MCU row of each file but the last:
//   rows_scan:          scan_resume_points from the top, tables built per file
//   rows_libjpeg_skip:  jpeg_start_decompress, jpeg_skip_scanlines over the same rows, abort
//   rows_libjpeg_start: jpeg_start_decompress and abort (the skip's set-up, to subtract)
//   rows_splice:        splice_at at every row (counters: the share of rows spliced, and of
//                       splices that appended a DC code)
// and the floor under any loader that decodes these crops with libjpeg-turbo, against the decode
// limit's work:
//   tj_full:         tjDecompress2 of the whole file, fast IDCT (what the limit does per image)
//   tj_eval_scaled:  the same at the smallest M/8 DCT scale (M = 1..8) that keeps the shorter side
//                    >= 256, eval's resize (sluice today scales only by 1/2, 1/4, 1/8): what a
//                    finer DCT scale would save of IDCT, upsampling and colour conversion
// and the entropy decoder in libjpeg-turbo's place (stages/decode/jpeg_huffman.hpp) against
// libjpeg-turbo's own (set_own_huffman, as SLUICE_JPEG_HUFFMAN=libjpeg sets it):
//   full_own_huffman, full_libjpeg_huffman:  JpegDecoder::decode of the whole file, fast IDCT
//   eval_splice_libjpeg_huffman, train_splice_libjpeg_huffman: splice with libjpeg's decoder
//                    (a comparison only: JpegDecoder splices for sluice's decoder alone, SplicedScan)
//   needed_entropy:  jpeg_read_coefficients of the crop's MCU rows only (the file spliced at the
//                    crop's first row, its frame height cut after the crop's last): the Huffman
//                    decoding no loader can skip, since a baseline scan has no column access
//
//   SLUICE_BENCH_DATA=/work/shared/datasets/imagenet-photos ./build/bench/jpeg_resume_bench
//       --benchmark_repetitions=3 --benchmark_enable_random_interleaving
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <jpeglib.h>
#include <turbojpeg.h>

#include "stages/decode/jpeg_decoder.hpp"
#include "stages/decode/jpeg_huffman.hpp"
#include "stages/decode/jpeg_resume.hpp"

namespace {

namespace fs = std::filesystem;
using namespace sluice;
using namespace sluice::stages;

struct File {
  std::vector<std::uint8_t> bytes;
  ScanLayout layout;
  std::vector<ResumePoint> points;  // every row's
  Rect eval, train;                 // crop rows (full width)
};

std::vector<std::uint8_t> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

const std::vector<File>& files() {
  static const std::vector<File> all = [] {
    const char* env = std::getenv("SLUICE_BENCH_DATA");
    const fs::path dir = env != nullptr && *env != '\0' ? fs::path(env) : fs::path(SLUICE_DATASETS_DIR) / "imagenet-photos";
    std::vector<fs::path> paths;
    if (fs::is_directory(dir)) {
      for (const auto& e : fs::recursive_directory_iterator(dir)) {
        if (e.is_regular_file() && e.path().extension() == ".jpg") paths.push_back(e.path());
      }
    }
    std::sort(paths.begin(), paths.end());
    std::mt19937 rng(29);
    std::vector<File> out;
    for (const fs::path& p : paths) {
      File f;
      f.bytes = read_file(p);
      if (!parse_scan_layout(f.bytes, f.layout)) continue;
      if (scan_resume_points(f.bytes, f.layout, f.layout.mcu_rows - 1, f.points) != f.layout.mcu_rows) continue;
      const int w = f.layout.width, h = f.layout.height;
      const int side = std::min(w, h) * 7 / 8;
      f.eval = {0, (h - side) / 2, w, side};
      std::uniform_real_distribution<double> area(0.08, 1.0), ratio(0.75, 4.0 / 3.0), where(0.0, 1.0);
      const double a = area(rng) * w * h, r = ratio(rng);
      const int ch = std::clamp(static_cast<int>(std::sqrt(a / r)), 1, h);
      f.train = {0, static_cast<int>(where(rng) * (h - ch)), w, ch};
      out.push_back(std::move(f));
    }
    return out;
  }();
  return all;
}

enum class Mode { kSkip, kSplice, kFirstRead };

void run(benchmark::State& state, bool train, Mode mode, bool own_huffman = true) {
  set_own_huffman(own_huffman);
  const auto& all = files();
  if (all.empty()) return state.SkipWithError("no baseline JPEGs (SLUICE_BENCH_DATA)");
  DecodeOptions options;
  options.fast_upsample = true;  // eval and train shrink most photographs (fast_upsample_when_shrunk)
  options.fast_dct = true;
  JpegDecoder decoder(options);
  std::vector<std::uint8_t> pixels, spliced;
  std::vector<ResumePoint> points;
  Splice splice;
  std::size_t i = 0;
  std::int64_t splices = 0;
  const OwnHuffmanCounts before = own_huffman_counts();
  for (auto _ : state) {
    const File& f = all[i++ % all.size()];
    const Rect crop = train ? f.train : f.eval;
    std::span<const std::uint8_t> jpeg = f.bytes;
    int y = crop.y;
    const int row = crop.y / f.layout.mcu_height;
    if (mode != Mode::kSkip && row > 0) {
      const std::vector<ResumePoint>* at = &f.points;
      if (mode == Mode::kFirstRead) {
        points.clear();
        scan_resume_points(jpeg, f.layout, row, points);
        at = &points;
      }
      if (splice_at(jpeg, f.layout, row, (*at)[static_cast<std::size_t>(row)], splice)) {
        spliced.assign(splice.head.begin(), splice.head.end());
        spliced.insert(spliced.end(), f.bytes.begin() + splice.tail_offset, f.bytes.end());
        jpeg = spliced;
        y -= splice.first_row;
        ++splices;
      }
    }
    const JpegHeader h = decoder.read_header(jpeg);
    JpegRequest request;
    request.region = {0, y, h.width, crop.height};
    const Rect r = decoder.decoded_region(h, request);
    pixels.resize(static_cast<std::size_t>(r.width) * r.height * 3);
    decoder.decode(jpeg, h, request, ImageView{pixels.data(), r.width, r.height, 3, static_cast<std::ptrdiff_t>(r.width) * 3});
    benchmark::DoNotOptimize(pixels.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["spliced"] = static_cast<double>(splices) / static_cast<double>(state.iterations());
  // The share of decodes that began with sluice's entropy decoder, and of those that gave up.
  const OwnHuffmanCounts after = own_huffman_counts();
  const auto per_image = [&](std::uint64_t n) { return static_cast<double>(n) / static_cast<double>(state.iterations()); };
  state.counters["own_huffman"] = per_image(after.installed - before.installed);
  state.counters["gave_up"] = per_image(after.gave_up - before.gave_up);
  set_own_huffman(true);
}

// A libjpeg decompress object with its standard error manager, destroyed with the scope.
struct Decompressor {
  jpeg_decompress_struct cinfo{};
  jpeg_error_mgr err{};
  Decompressor() {
    cinfo.err = jpeg_std_error(&err);
    jpeg_create_decompress(&cinfo);
  }
  ~Decompressor() { jpeg_destroy_decompress(&cinfo); }
  Decompressor(const Decompressor&) = delete;
  Decompressor& operator=(const Decompressor&) = delete;
};

// JpegDecoder::decode of the whole file with fast IDCT, with either entropy decoder.
void full(benchmark::State& state, bool own_huffman) {
  const auto& all = files();
  if (all.empty()) return state.SkipWithError("no baseline JPEGs (SLUICE_BENCH_DATA)");
  set_own_huffman(own_huffman);
  DecodeOptions options;
  options.fast_dct = true;
  JpegDecoder decoder(options);
  std::vector<std::uint8_t> pixels;
  std::size_t i = 0;
  for (auto _ : state) {
    const File& f = all[i++ % all.size()];
    const JpegHeader h = decoder.read_header(f.bytes);
    pixels.resize(static_cast<std::size_t>(h.width) * h.height * 3);
    decoder.decode(f.bytes, h, {}, ImageView{pixels.data(), h.width, h.height, 3, static_cast<std::ptrdiff_t>(h.width) * 3});
    benchmark::DoNotOptimize(pixels.data());
  }
  set_own_huffman(true);
  state.SetItemsProcessed(state.iterations());
}

void rows(benchmark::State& state, int mode) {
  const auto& all = files();
  if (all.empty()) return state.SkipWithError("no baseline JPEGs (SLUICE_BENCH_DATA)");
  Decompressor d;
  jpeg_decompress_struct& cinfo = d.cinfo;
  std::vector<ResumePoint> points;
  std::size_t i = 0;
  std::int64_t rows_done = 0;
  for (auto _ : state) {
    const File& f = all[i++ % all.size()];
    const int last = f.layout.mcu_rows - 1;
    if (mode == 0) {
      points.clear();
      rows_done += scan_resume_points(f.bytes, f.layout, last, points) - 1;
      benchmark::DoNotOptimize(points.data());
      continue;
    }
    jpeg_mem_src(&cinfo, f.bytes.data(), static_cast<unsigned long>(f.bytes.size()));
    jpeg_read_header(&cinfo, TRUE);
    jpeg_start_decompress(&cinfo);
    if (mode == 1) rows_done += jpeg_skip_scanlines(&cinfo, static_cast<JDIMENSION>(last * f.layout.mcu_height)) / f.layout.mcu_height;
    jpeg_abort_decompress(&cinfo);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["mcu_rows"] = static_cast<double>(rows_done) / static_cast<double>(state.iterations());
}

void tj_decode(benchmark::State& state, bool scaled) {
  const auto& all = files();
  if (all.empty()) return state.SkipWithError("no baseline JPEGs (SLUICE_BENCH_DATA)");
  tjhandle tj = tjInitDecompress();
  std::vector<std::uint8_t> out;
  std::size_t i = 0;
  for (auto _ : state) {
    const File& f = all[i++ % all.size()];
    int m = 8;
    while (scaled && m > 1 && (std::min(f.layout.width, f.layout.height) * (m - 1) + 7) / 8 >= 256) --m;
    const int w = (f.layout.width * m + 7) / 8, h = (f.layout.height * m + 7) / 8;
    out.resize(static_cast<std::size_t>(w) * h * 3);
    tjDecompress2(tj, f.bytes.data(), f.bytes.size(), out.data(), w, 0, h, TJPF_RGB, TJFLAG_FASTDCT);
    benchmark::DoNotOptimize(out.data());
  }
  tjDestroy(tj);
  state.SetItemsProcessed(state.iterations());
}

void needed_entropy(benchmark::State& state, bool train) {
  const auto& all = files();
  if (all.empty()) return state.SkipWithError("no baseline JPEGs (SLUICE_BENCH_DATA)");
  Decompressor d;
  jpeg_decompress_struct& cinfo = d.cinfo;
  std::vector<std::uint8_t> cut;
  Splice splice;
  std::size_t i = 0;
  double share = 0;  // the crop rows' entropy-coded bytes over the whole scan's
  for (auto _ : state) {
    state.PauseTiming();
    const File& f = all[i++ % all.size()];
    const Rect crop = train ? f.train : f.eval;
    const int mh = f.layout.mcu_height;
    const int first = crop.y / mh, last = (crop.y + crop.height - 1) / mh;
    int from = 0;
    if (first > 0 && splice_at(f.bytes, f.layout, first, f.points[static_cast<std::size_t>(first)], splice)) {
      cut.assign(splice.head.begin(), splice.head.end());
      cut.insert(cut.end(), f.bytes.begin() + splice.tail_offset, f.bytes.end());
      from = first;
    } else {
      cut = f.bytes;
    }
    const int height = std::min(f.layout.height - from * mh, (last + 1 - from) * mh);
    cut[f.layout.height_offset] = static_cast<std::uint8_t>(height >> 8);
    cut[f.layout.height_offset + 1] = static_cast<std::uint8_t>(height & 0xFF);
    const std::uint32_t end =
        last + 1 < f.layout.mcu_rows ? f.points[static_cast<std::size_t>(last) + 1].byte : static_cast<std::uint32_t>(f.bytes.size());
    if (last + 1 < f.layout.mcu_rows) {  // end the data after the byte where the next row starts
      std::size_t at = end + 1 + (f.bytes[end] == 0xFF ? 1 : 0);
      if (from > 0) at = at - splice.tail_offset + splice.head.size();
      cut.resize(at);
      cut.insert(cut.end(), {0xFF, 0xD9});
    }
    share += static_cast<double>(end - f.points[static_cast<std::size_t>(from)].byte) /
             static_cast<double>(f.bytes.size() - f.layout.scan_offset);
    state.ResumeTiming();
    jpeg_mem_src(&cinfo, cut.data(), static_cast<unsigned long>(cut.size()));
    jpeg_read_header(&cinfo, TRUE);
    benchmark::DoNotOptimize(jpeg_read_coefficients(&cinfo));
    jpeg_abort_decompress(&cinfo);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["scan_share"] = share / static_cast<double>(state.iterations());
}

// splice_at at every MCU row of each file but the first: its time per row, and the share of rows
// it splices and of splices that append a DC code (jpeg_resume.hpp, AppendedDcCode).
void BM_rows_splice(benchmark::State& state) {
  const auto& all = files();
  if (all.empty()) return state.SkipWithError("no baseline JPEGs (SLUICE_BENCH_DATA)");
  Splice splice;
  std::size_t i = 0;
  std::int64_t rows = 0, spliced = 0, appended = 0;
  for (auto _ : state) {
    const File& f = all[i++ % all.size()];
    for (int row = 1; row < f.layout.mcu_rows; ++row) {
      ++rows;
      if (!splice_at(f.bytes, f.layout, row, f.points[static_cast<std::size_t>(row)], splice)) continue;
      ++spliced;
      appended += splice.appended.any() ? 1 : 0;
    }
  }
  state.SetItemsProcessed(rows);
  state.counters["spliced"] = static_cast<double>(spliced) / static_cast<double>(std::max<std::int64_t>(rows, 1));
  state.counters["appended"] = static_cast<double>(appended) / static_cast<double>(std::max<std::int64_t>(spliced, 1));
}

std::int64_t passes() { return static_cast<std::int64_t>(std::max<std::size_t>(files().size(), 1)); }

void BM_eval_skip(benchmark::State& s) { run(s, false, Mode::kSkip); }
void BM_eval_splice(benchmark::State& s) { run(s, false, Mode::kSplice); }
void BM_eval_first_read(benchmark::State& s) { run(s, false, Mode::kFirstRead); }
void BM_train_skip(benchmark::State& s) { run(s, true, Mode::kSkip); }
void BM_train_splice(benchmark::State& s) { run(s, true, Mode::kSplice); }
void BM_train_first_read(benchmark::State& s) { run(s, true, Mode::kFirstRead); }
void BM_eval_splice_libjpeg_huffman(benchmark::State& s) { run(s, false, Mode::kSplice, false); }
void BM_train_splice_libjpeg_huffman(benchmark::State& s) { run(s, true, Mode::kSplice, false); }
void BM_full_own_huffman(benchmark::State& s) { full(s, true); }
void BM_full_libjpeg_huffman(benchmark::State& s) { full(s, false); }
void BM_rows_scan(benchmark::State& s) { rows(s, 0); }
void BM_rows_libjpeg_skip(benchmark::State& s) { rows(s, 1); }
void BM_rows_libjpeg_start(benchmark::State& s) { rows(s, 2); }
void BM_tj_full(benchmark::State& s) { tj_decode(s, false); }
void BM_tj_eval_scaled(benchmark::State& s) { tj_decode(s, true); }
void BM_eval_needed_entropy(benchmark::State& s) { needed_entropy(s, false); }
void BM_train_needed_entropy(benchmark::State& s) { needed_entropy(s, true); }
BENCHMARK(BM_tj_full)->Iterations(passes());
BENCHMARK(BM_full_own_huffman)->Iterations(passes());
BENCHMARK(BM_full_libjpeg_huffman)->Iterations(passes());
BENCHMARK(BM_eval_splice_libjpeg_huffman)->Iterations(passes());
BENCHMARK(BM_train_splice_libjpeg_huffman)->Iterations(passes());
BENCHMARK(BM_tj_eval_scaled)->Iterations(passes());
BENCHMARK(BM_eval_needed_entropy)->Iterations(passes());
BENCHMARK(BM_train_needed_entropy)->Iterations(passes());
BENCHMARK(BM_rows_scan)->Iterations(passes());
BENCHMARK(BM_rows_libjpeg_skip)->Iterations(passes());
BENCHMARK(BM_rows_libjpeg_start)->Iterations(passes());
BENCHMARK(BM_rows_splice)->Iterations(passes());
BENCHMARK(BM_eval_skip)->Iterations(passes());
BENCHMARK(BM_eval_splice)->Iterations(passes());
BENCHMARK(BM_eval_first_read)->Iterations(passes());
BENCHMARK(BM_train_skip)->Iterations(passes());
BENCHMARK(BM_train_splice)->Iterations(passes());
BENCHMARK(BM_train_first_read)->Iterations(passes());

}  // namespace

BENCHMARK_MAIN();
