// decode_fuzzer: the libFuzzer target over decode_jpeg and the image ops. Each input is
// kParamBytes of parameters followed by the bytes of a would-be JPEG; the parameters choose a
// chain of image ops, the decode and normalize options, a DCT scale and a region, so one input
// drives the same paths a pipeline does:
//
//   1. the fused SampleProgram (read through an in-memory FileOps, header, geometry plan, DCT
//      scale, region decode when it pays, resample, normalize into the batch slot), with one
//      workspace per decode setting kept across inputs as a worker keeps it across samples;
//   2. the kernels one by one with a fresh decoder: read_header, a whole decode and a region
//      decode of the chosen scale into buffers that end on a PROT_NONE page (libjpeg-turbo is not
//      instrumented, so ASan would not see it write past our buffers; the guard page does), the
//      region compared with the whole image where both decoded cleanly (the decoder promises
//      equal pixels), then plan_geometry, Resampler and NormalizeKernel into exact-size buffers;
//   3. when the header does not parse, the same geometry, resample and normalize on a synthetic
//      image whose size comes from the parameters, so the image ops get fuzzed even while the
//      mutator has broken the JPEG.
//
// sluice::Error is the expected outcome of bad bytes. A finding (the target aborts) is: a crash
// or a sanitizer report, any other exception, an Error with kInternal, a kernel refusing the
// setup the plan gave it (a "resample:", "normalize:" or "decode output" kInvalidArgument), a
// resampler footprint outside the image, a region decode that differs from the whole one, or a
// decode with sluice's entropy decoder (stages/decode/jpeg_huffman.hpp) that differs from the same
// decode with libjpeg-turbo's (pixels, error or warnings).
// max_image_pixels is 512x512, so absurd headers are rejected before anything is allocated.
//
// Input layout, for writing seeds by hand (fuzz/make_corpus.sh does it for the datasets):
//   [0]  op chain (bits 0-2), flip first/last (3-4), area filter (5), no antialias (6),
//        square output (7)      [1] [2] output width, height: 1 + b % 48
//   [3]  the chain's extra parameter (resize size, padding, crop, scale range)
//   [4]  decode: grey (bit 0), fast_dct, fast_upsample, no dct_scaling, no roi, not strict;
//        bit 6: run the sample again through row bands and compare; bit 7: EXIF orientation
//        applied (the turned decode: a stored region, turned upright, stages/image/orient.hpp)
//   [5]  normalize: dtype (bits 0-1: u8 f32 f16 bf16), NCHW (2), mean/std (3-7)
//   [6]  DCT scale (bits 0-1), skip attempt (2-3), epoch (4-7), the kernel paths' ISA (6-7)
//   [7]  item
//   [8..11] the region for the kernel path (or the synthetic image's size), stride padding
//   [12..]  the file's bytes
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sluice/core/error.hpp"
#include "stages/source/file_ops.hpp"
#include "stages/image/geometry.hpp"
#include "stages/decode/jpeg_decoder.hpp"
#include "stages/decode/jpeg_huffman.hpp"
#include "stages/image/normalize.hpp"
#include "stages/image/resample.hpp"
#include "stages/image/resample_kernels.hpp"
#include "stages/program/sample_program.hpp"
#include "stages/source/source.hpp"

namespace {

using namespace sluice;
using namespace sluice::stages;

constexpr std::size_t kParamBytes = 12;
constexpr std::uint64_t kMaxImagePixels = 512 * 512;
constexpr int kMaxOut = 48;                       // output sides are 1..kMaxOut
constexpr std::size_t kArenaBytes = 16u << 20;    // > 512x512x3 with any stride padding below

[[noreturn]] void finding(const char* what, const std::string& detail) {
  std::fprintf(stderr, "decode_fuzzer: %s: %s\n", what, detail.c_str());
  std::abort();
}

// Errors that mean bad input (fine) versus a broken invariant (a finding).
void check_error(const Error& e, const char* where) {
  if (e.code() == ErrorCode::kInternal) finding(where, e.what());
}
void check_program_error(const Error& e, const char* where = "SampleProgram") {
  check_error(e, where);
  // The fused program sets its kernels up from one plan; a kernel refusing what it was handed
  // means the plan, the region or the buffers disagree, whatever the bytes were.
  const std::string& cause = e.cause();
  if (e.code() == ErrorCode::kInvalidArgument &&
      (cause.rfind("resample:", 0) == 0 || cause.rfind("decode output", 0) == 0 ||
       cause.rfind("normalize:", 0) == 0 || cause.find("header passed to decode") != std::string::npos)) {
    finding(where, std::string("a kernel refused its setup: ") + e.what());
  }
}

// The parameter bytes, decoded. Every field is in a range the pipeline's build() accepts.
struct Params {
  std::uint8_t b[kParamBytes];
  int chain() const { return b[0] & 7; }
  bool flip_first() const { return (b[0] & 0x18) == 0x08; }
  bool flip_last() const { return (b[0] & 0x18) == 0x10; }
  Filter filter() const { return (b[0] & 0x20) != 0 ? Filter::kArea : Filter::kBilinear; }
  bool antialias() const { return (b[0] & 0x40) == 0; }
  int out_width() const { return 1 + b[1] % kMaxOut; }
  int out_height() const { return (b[0] & 0x80) != 0 ? out_width() : 1 + b[2] % kMaxOut; }
  int aux() const { return b[3]; }
  int denom() const { return 1 << (b[6] & 3); }
  SampleKey key() const { return SampleKey{b[6] >> 4, b[7], static_cast<std::uint32_t>((b[6] >> 2) & 3)}; }
  // The kernel sets the kernel paths run (the program always takes the fastest): machines
  // without AVX2 run the SSE4.1 or scalar ones, which this one would otherwise never execute.
  ResampleIsa isa() const {
    static constexpr ResampleIsa kIsas[] = {ResampleIsa::kAuto, ResampleIsa::kScalar, ResampleIsa::kSse41,
                                            ResampleIsa::kAvx2};
    return kIsas[b[6] >> 6];
  }
};

DecodeOptions decode_options(const Params& p) {
  DecodeOptions d;
  d.color = (p.b[4] & 1) != 0 ? Color::kGrey : Color::kRGB;
  d.fast_dct = (p.b[4] & 2) != 0;
  d.fast_upsample = (p.b[4] & 4) != 0;
  d.dct_scaling = (p.b[4] & 8) == 0;
  d.roi = (p.b[4] & 16) == 0;
  d.strict = (p.b[4] & 32) == 0;  // bit 5 was accept_warnings: corpora keep their meaning
  d.max_image_pixels = kMaxImagePixels;
  d.orientation = (p.b[4] & 128) != 0 ? Orientation::kExif : Orientation::kAsStored;
  return d;
}

NormalizeOptions normalize_options(const Params& p, int channels) {
  NormalizeOptions n;
  static constexpr DType kTypes[] = {DType::kU8, DType::kF32, DType::kF16, DType::kBF16};
  n.dtype = kTypes[p.b[5] & 3];
  n.layout = (p.b[5] & 4) != 0 ? Layout::kNCHW : Layout::kNHWC;
  if (n.dtype != DType::kU8 && (p.b[5] & 8) != 0) {
    const float spread = 0.05f + static_cast<float>(p.b[5] >> 4) / 16.0f;
    if (channels == 3 && (p.b[5] & 16) != 0) {
      n.mean = {0.485f, 0.456f, 0.406f};
      n.std = {0.229f * spread, 0.224f, 0.225f};
    } else {
      n.mean = {0.5f};
      n.std = {spread};
    }
  }
  return n;
}

// The op chains users write, ending in a fixed size (what batch() needs).
std::vector<GeometryStep> make_chain(const Params& p) {
  const int w = p.out_width();
  const int h = p.out_height();
  const ResizeOptions resize{p.filter(), p.antialias()};
  std::vector<GeometryOp> ops;
  if (p.flip_first()) ops.push_back(spec::FlipHorizontal{0.5, {}});
  switch (p.chain()) {
    case 0:  // eval: resize_shorter then center_crop
      ops.push_back(spec::ResizeShorter{std::max(w, h) + p.aux() % 32, resize});
      ops.push_back(spec::CenterCrop{w, h});
      break;
    case 1: {  // train: random_resized_crop
      spec::RandomResizedCrop op{w, h, {}};
      op.options.resize = resize;
      if ((p.aux() & 1) != 0) op.options.scale_min = 0.001 + (p.aux() >> 1) / 128.0;
      if ((p.aux() & 2) != 0) op.options.ratio_max = 1.0 + (p.aux() >> 2);
      ops.push_back(op);
      break;
    }
    case 2:  // cifar: random_crop with padding
      ops.push_back(spec::RandomCrop{w, h, {p.aux() % 9, static_cast<std::uint8_t>(p.aux()), {}}});
      break;
    case 3:
      ops.push_back(spec::Resize{w, h, resize});
      break;
    case 4:  // a crop alone, padding when larger than the image
      ops.push_back(spec::CenterCrop{w, h});
      break;
    case 5:  // crop then resize: the filter stays inside the crop
      ops.push_back(spec::CenterCrop{1 + p.aux(), 1 + (p.aux() * 7) % 256});
      ops.push_back(spec::Resize{w, h, resize});
      break;
    case 6:  // resize then a padded random crop
      ops.push_back(spec::Resize{w + p.aux() % 8, h + (p.aux() >> 3) % 8, resize});
      ops.push_back(spec::RandomCrop{w, h, {(p.aux() >> 6), 0, {}}});
      break;
    default:  // two resizes compose; then a random resized crop of that
      ops.push_back(spec::ResizeShorter{1 + p.aux(), resize});
      ops.push_back(spec::RandomResizedCrop{w, h, {}});
      break;
  }
  if (p.flip_last()) ops.push_back(spec::FlipHorizontal{0.5, {}});
  std::vector<GeometryStep> steps;
  for (std::size_t i = 0; i < ops.size(); ++i) steps.push_back(GeometryStep{ops[i], 0x5151 + i * p.b[7]});
  return steps;
}

// One "file" in memory behind the FileOps seam: read_file runs unchanged on the fuzz bytes.
class MemoryFile final : public FileOps {
 public:
  static constexpr int kFd = 1000;
  void set(std::span<const std::uint8_t> bytes) { bytes_ = bytes; }
  int open(const char*, int, mode_t) override { return kFd; }
  int close(int) override { return 0; }
  ssize_t pread(int, void* buffer, std::size_t count, off_t offset) override {
    const auto start = static_cast<std::size_t>(offset);
    if (start >= bytes_.size()) return 0;
    const std::size_t n = std::min(count, bytes_.size() - start);
    std::memcpy(buffer, bytes_.data() + start, n);
    return static_cast<ssize_t>(n);
  }
  int fstat(int, struct stat* st) override {
    *st = {};
    st->st_mode = S_IFREG | 0644;
    st->st_size = static_cast<off_t>(bytes_.size());
    return 0;
  }

 private:
  std::span<const std::uint8_t> bytes_;
};

// Memory whose end touches a PROT_NONE page: tail(n) returns n bytes ending at the guard, so a
// write one byte past them faults even from uninstrumented code (libjpeg-turbo).
class GuardedArena {
 public:
  GuardedArena() {
    page_ = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    void* p = mmap(nullptr, kArenaBytes + page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) finding("mmap", std::strerror(errno));
    base_ = static_cast<std::uint8_t*>(p);
    if (mprotect(base_ + kArenaBytes, page_, PROT_NONE) != 0) finding("mprotect", std::strerror(errno));
  }
  std::uint8_t* tail(std::size_t n) {
    if (n > kArenaBytes) finding("arena", "buffer of " + std::to_string(n) + " bytes");
    return base_ + kArenaBytes - n;
  }

 private:
  std::uint8_t* base_ = nullptr;
  std::size_t page_ = 0;
};

// An image view of width x height x channels ending at the arena's guard page, rows `pad` bytes
// apart beyond their pixels.
ImageView guarded_view(GuardedArena& arena, Rect r, int channels, int pad) {
  const std::ptrdiff_t stride = static_cast<std::ptrdiff_t>(r.width) * channels + pad;
  const std::size_t bytes = static_cast<std::size_t>(stride) * (r.height - 1) + static_cast<std::size_t>(r.width) * channels;
  return ImageView{arena.tail(bytes), r.width, r.height, channels, stride};
}

// Resample `source` (pixels `region` of the image at 1/denom) per the plan and normalize it.
void resample_and_normalize(const SampleGeometry& plan, ConstImageView source, Rect region, const Params& p) {
  const int ch = source.channels;
  Resampler resampler;
  if (ResamplerTestPeer::supported(p.isa())) ResamplerTestPeer::set_isa(resampler, p.isa());
  resampler.setup(ResampleParams{plan.x, plan.y, ch, plan.filter, plan.antialias, plan.fill});
  const Rect fp = resampler.footprint();
  // The plan's valid source range lies inside the image, so the taps must too: the fused
  // program asks the decoder for exactly this rectangle.
  if (fp.width > 0 && (fp.x < region.x || fp.y < region.y || fp.x + fp.width > region.x + region.width ||
                       fp.y + fp.height > region.y + region.height)) {
    finding("footprint", "outside the image");
  }
  std::vector<std::uint8_t> scratch(resampler.scratch_bytes());
  std::vector<std::uint8_t> resized(static_cast<std::size_t>(plan.out.width) * plan.out.height * ch);
  const ImageView target{resized.data(), plan.out.width, plan.out.height, ch,
                         static_cast<std::ptrdiff_t>(plan.out.width) * ch};
  resampler.run(source, region.x, region.y, target, scratch);
  NormalizeKernel normalize;
  normalize.setup(normalize_options(p, ch), ch);
  if (p.isa() == ResampleIsa::kScalar) normalize.use_scalar_kernels();
  std::vector<std::uint8_t> out(normalize.sample_bytes(plan.out));
  normalize.run(target, plan.flip, out.data());
}

// Path 1b: the same sample on a workspace whose decoded-image share is one page, in a budget with
// nothing else free, so every larger region goes through the row-band path; it must give the
// sample the whole-region path gave.
// The one item every path runs: fuzz.jpg, which the fuzzer's file system serves.
const stages::ItemTable& fuzz_item() {
  static const stages::Dataset one = stages::load_dataset(spec::Items{{Item{"fuzz.jpg", 0}}});
  return one.items;
}

void run_in_bands(const SampleProgram& program, const Params& p, const std::vector<std::uint8_t>& whole) {
  struct Tight {
    std::unique_ptr<MemoryBudget> budget;
    std::unique_ptr<SampleProgram::Workspace> ws;
  };
  static std::map<int, Tight> tight;
  Tight& t = tight[p.b[4] & (63 | 128)];
  if (!t.ws) {
    const WorkspaceShare share{.file = 4 << 20, .decoded = 4096, .resized = 1 << 20, .scratch = 1 << 20,
                               .decoder = {.planes = 1 << 20, .coefficients = 4 << 20}};
    t.budget = std::make_unique<MemoryBudget>(share.total());
    t.ws = program.make_workspace(*t.budget, share);
  }
  std::vector<std::uint8_t> out(program.sample_bytes());
  try {
    program.run(fuzz_item(), 0, p.key(), *t.ws, out.data());
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kTooLarge) return;  // a band of one row did not fit one page
    finding("row bands", std::string("failed where the whole region decoded: ") + e.what());
  }
  if (out != whole) {
    // Which side depends on what its workspace held before: run both again on fresh ones.
    std::vector<std::uint8_t> fresh_whole(program.sample_bytes());
    std::vector<std::uint8_t> fresh_bands(program.sample_bytes());
    auto plain = program.make_workspace();
    program.run(fuzz_item(), 0, p.key(), *plain, fresh_whole.data());
    const WorkspaceShare share{.file = 4 << 20, .decoded = 4096, .resized = 1 << 20, .scratch = 1 << 20,
                               .decoder = {.planes = 1 << 20, .coefficients = 4 << 20}};
    MemoryBudget budget(share.total());
    auto banded = program.make_workspace(budget, share);
    program.run(fuzz_item(), 0, p.key(), *banded, fresh_bands.data());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < out.size(); ++i) differ += out[i] != whole[i];
    finding("row bands", "the sample differs from the whole-region path's in " + std::to_string(differ) + " of " +
                             std::to_string(out.size()) + " bytes; fresh whole == whole: " +
                             std::to_string(fresh_whole == whole) + ", fresh bands == bands: " +
                             std::to_string(fresh_bands == out) + ", fresh bands == fresh whole: " +
                             std::to_string(fresh_bands == fresh_whole));
  }
}

// Path 1: the fused program, as a worker runs it.
void run_program(std::span<const std::uint8_t> jpeg, const Params& p) {
  static MemoryFile file;
  static std::map<int, std::unique_ptr<SampleProgram::Workspace>> workspaces;
  file.set(jpeg);
  SampleProgramConfig config;
  config.decode = decode_options(p);
  config.geometry = make_chain(p);
  const int channels = config.decode.color == Color::kGrey ? 1 : 3;
  config.normalize = normalize_options(p, channels);
  config.output = {p.out_width(), p.out_height()};
  config.file_ops = &file;
  const SampleProgram program(std::move(config));
  auto& ws = workspaces[p.b[4] & (63 | 128)];
  if (!ws) ws = program.make_workspace();
  std::vector<std::uint8_t> out(program.sample_bytes());
  try {
    program.run(fuzz_item(), 0, p.key(), *ws, out.data());
  } catch (const Error& e) {
    check_program_error(e);
    return;
  }
  if ((p.b[4] & 64) != 0) run_in_bands(program, p, out);
}

// What one decode gave, for comparing the two entropy decoders.
struct Outcome {
  bool ok = false;
  ErrorCode code = ErrorCode::kInternal;
  std::string cause;
  int warnings = 0;
  std::vector<std::uint8_t> pixels;
  bool operator==(const Outcome&) const = default;
};

Outcome decode_with(std::span<const std::uint8_t> jpeg, const DecodeOptions& options, const JpegRequest& request,
                    bool own_huffman) {
  set_own_huffman(own_huffman);
  Outcome o;
  JpegDecoder decoder(options);
  try {
    const JpegHeader header = decoder.read_header(jpeg);
    const Rect r = decoder.decoded_region(header, request);
    const int ch = decoder.channels();
    o.pixels.resize(static_cast<std::size_t>(r.width) * r.height * ch);
    decoder.decode(jpeg, header, request,
                   ImageView{o.pixels.data(), r.width, r.height, ch, static_cast<std::ptrdiff_t>(r.width) * ch});
    o.ok = true;
  } catch (const Error& e) {
    check_error(e, "decode (entropy decoders compared)");
    o.code = e.code();
    o.cause = e.cause();
    o.pixels.clear();
  }
  o.warnings = decoder.warnings().count;
  set_own_huffman(true);
  return o;
}

// sluice's entropy decoder and libjpeg-turbo's give the same outcome for this request.
void compare_entropy_decoders(std::span<const std::uint8_t> jpeg, const DecodeOptions& options,
                              const JpegRequest& request) {
  const Outcome own = decode_with(jpeg, options, request, true);
  const Outcome stock = decode_with(jpeg, options, request, false);
  if (!(own == stock)) {
    finding("own Huffman decoder", "differs from libjpeg's: ok " + std::to_string(own.ok) + "/" +
                                       std::to_string(stock.ok) + ", warnings " + std::to_string(own.warnings) +
                                       "/" + std::to_string(stock.warnings) + ", cause '" + own.cause + "' / '" +
                                       stock.cause + "'");
  }
}

// Path 2: the kernels by hand, on guarded buffers.
bool run_kernels(std::span<const std::uint8_t> jpeg, const Params& p) {
  static GuardedArena whole_arena;
  static GuardedArena region_arena;
  const DecodeOptions options = decode_options(p);
  JpegDecoder decoder(options);
  JpegHeader header;
  try {
    header = decoder.read_header(jpeg);
  } catch (const Error& e) {
    check_error(e, "read_header");
    return false;
  }
  const int denom = p.denom();
  const int ch = decoder.channels();
  const Size2 scaled = JpegDecoder::scaled_size(header, denom);
  const int pad = (p.b[11] & 0x80) != 0 ? (p.b[11] & 63) : 0;

  std::optional<ImageView> whole;
  const JpegRequest whole_request{denom, Rect{}};
  try {
    const Rect r = decoder.decoded_region(header, whole_request);
    if (r != Rect{0, 0, scaled.width, scaled.height}) finding("decoded_region", "whole image is not the image");
    const ImageView out = guarded_view(whole_arena, r, ch, pad);
    decoder.decode(jpeg, header, whole_request, out);
    whole = out;
  } catch (const Error& e) {
    check_error(e, "decode whole");
  }

  // A region anywhere, partly outside the image at times (the decoder clamps it).
  const Rect wanted{static_cast<int>(p.b[8] * (scaled.width + 16) / 256) - 8,
                    static_cast<int>(p.b[9] * (scaled.height + 16) / 256) - 8,
                    1 + static_cast<int>(p.b[10] * scaled.width / 128),
                    1 + static_cast<int>((p.b[11] & 0x7f) * scaled.height / 64)};
  const JpegRequest region_request{denom, wanted};
  try {
    const Rect r = decoder.decoded_region(header, region_request);
    const ImageView out = guarded_view(region_arena, r, ch, 0);
    decoder.decode(jpeg, header, region_request, out);
    // Where both decodes succeeded on strict settings, the region must equal the whole image.
    if (whole && options.strict) {
      const int x0 = std::max(wanted.x, 0);
      const int y0 = std::max(wanted.y, 0);
      const int x1 = std::min(wanted.x + wanted.width, scaled.width);
      const int y1 = std::min(wanted.y + wanted.height, scaled.height);
      for (int y = y0; y < y1; ++y) {
        if (std::memcmp(out.row(y - r.y) + (x0 - r.x) * ch, whole->row(y) + x0 * ch,
                        static_cast<std::size_t>(x1 - x0) * ch) != 0) {
          finding("region decode", "row " + std::to_string(y) + " differs from the whole decode");
        }
      }
    }
  } catch (const Error& e) {
    check_error(e, "decode region");
  }
  compare_entropy_decoders(jpeg, options, whole_request);
  compare_entropy_decoders(jpeg, options, region_request);

  if (whole) {
    try {
      const Size2 image{header.width, header.height};
      SampleGeometry plan = plan_geometry(make_chain(p), image, p.key());
      plan = scale_plan(plan, image, denom);
      resample_and_normalize(plan, *whole, Rect{0, 0, scaled.width, scaled.height}, p);
    } catch (const Error& e) {
      check_program_error(e, "image ops");
    }
  }
  return true;
}

// Path 3: the image ops on a synthetic image when there is no JPEG to decode.
void run_synthetic(std::span<const std::uint8_t> bytes, const Params& p) {
  static GuardedArena arena;
  Size2 image{1 + ((p.b[8] | p.b[9] << 8) % 1024), 1 + ((p.b[10] | p.b[11] << 8) % 1024)};
  if (static_cast<std::uint64_t>(image.width) * image.height > kMaxImagePixels) image.height = kMaxImagePixels / image.width;
  const int ch = (p.b[4] & 1) != 0 ? 1 : 3;
  try {
    SampleGeometry plan = plan_geometry(make_chain(p), image, p.key());
    const int denom = (p.b[4] & 8) == 0 ? choose_denom(plan) : 1;
    plan = scale_plan(plan, image, denom);
    const Size2 scaled{(image.width + denom - 1) / denom, (image.height + denom - 1) / denom};
    const ImageView src = guarded_view(arena, Rect{0, 0, scaled.width, scaled.height}, ch, 0);
    const std::size_t n = static_cast<std::size_t>(scaled.width) * scaled.height * ch;
    for (std::size_t i = 0; i < n; ++i) src.data[i] = bytes.empty() ? static_cast<std::uint8_t>(i) : bytes[i % bytes.size()];
    resample_and_normalize(plan, src, Rect{0, 0, scaled.width, scaled.height}, p);
  } catch (const Error& e) {
    check_program_error(e, "image ops (synthetic)");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < kParamBytes) return -1;  // not worth keeping in the corpus
  Params p;
  std::memcpy(p.b, data, kParamBytes);
  const std::span<const std::uint8_t> jpeg(data + kParamBytes, size - kParamBytes);
  if (!run_kernels(jpeg, p)) run_synthetic(jpeg, p);
  run_program(jpeg, p);
  return 0;
}
