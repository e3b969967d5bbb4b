// The fused per-sample chain: read -> header -> plan -> decode (scale, region) -> resample ->
// normalize into the batch slot, timing each stage.
#include "stages/sample_program.hpp"

#include <chrono>

#include "sluice/core/error.hpp"
#include "stages/read_file.hpp"

namespace sluice::stages {

namespace {

using Clock = std::chrono::steady_clock;

std::int64_t elapsed_ns(Clock::time_point& since) {
  const auto now = Clock::now();
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now - since).count();
  since = now;
  return ns;
}

bool is_identity(const AxisMap& a) {
  return a.scale == 1.0 && a.origin == static_cast<double>(static_cast<int>(a.origin)) &&
         a.origin >= a.valid_lo && a.origin + a.out_size <= a.valid_hi;
}

// A region decode (libjpeg's crop and skip) has a fixed cost of its own and still entropy-decodes
// every row above the region; it pays when it skips a good share of a large image. Below these
// thresholds (e.g. a 32x32 image with a padded crop) the whole-image path is faster.
constexpr std::int64_t kRegionMinImagePixels = 64 * 64;
constexpr double kRegionMaxShare = 0.85;

bool worth_a_region(const Rect& needed, Size2 image) {
  const std::int64_t image_pixels = static_cast<std::int64_t>(image.width) * image.height;
  const std::int64_t needed_pixels = static_cast<std::int64_t>(needed.width) * needed.height;
  return needed.width > 0 && image_pixels >= kRegionMinImagePixels &&
         static_cast<double>(needed_pixels) <= kRegionMaxShare * static_cast<double>(image_pixels);
}

ImageView view_of(AlignedBuffer& buffer, int width, int height, int channels) {
  const std::size_t row = static_cast<std::size_t>(width) * channels;
  buffer.reserve(row * static_cast<std::size_t>(height));
  return ImageView{buffer.data(), width, height, channels, static_cast<std::ptrdiff_t>(row)};
}

}  // namespace

const char* StageCounters::name(int stage) {
  switch (stage) {
    case kRead: return "read";
    case kDecode: return "decode_jpeg";
    case kTransform: return "transform";
    case kNormalize: return "normalize";
    default: return "?";
  }
}

SampleProgram::SampleProgram(SampleProgramConfig config) : config_(std::move(config)) {
  channels_ = config_.decode.color == Color::kGrey ? 1 : 3;
  normalize_.setup(config_.normalize, channels_);
}

std::unique_ptr<SampleProgram::Workspace> SampleProgram::make_workspace() const {
  return std::make_unique<Workspace>(config_.decode);
}

Shape SampleProgram::sample_shape() const {
  const Size2 s = config_.output;
  if (layout() == Layout::kNCHW) return Shape{channels_, s.height, s.width};
  return Shape{s.height, s.width, channels_};
}

void SampleProgram::run(const Item& item, const SampleKey& key, Workspace& ws, void* out) const {
  try {
    run_unchecked(item, key, ws, out);
  } catch (const Error& e) {
    if (!e.path().empty()) throw;
    throw Error(e.code(), e.cause(), item.path);
  }
}

void SampleProgram::run_unchecked(const Item& item, const SampleKey& key, Workspace& ws,
                                  void* out) const {
  auto t = Clock::now();
  const std::size_t size = read_file(item.path, ws.file, config_.read.max_file_size);
  ws.counters.add(StageCounters::kRead, elapsed_ns(t), static_cast<std::int64_t>(size));

  const std::span<const std::uint8_t> bytes(ws.file.data(), size);
  const JpegHeader header = ws.decoder.read_header(bytes);
  const Size2 image{header.width, header.height};
  GeometryPlan plan = plan_geometry(config_.geometry, image, key);
  if (plan.out != config_.output) {
    throw Error(ErrorCode::kInvalidArgument,
                "image gives a " + std::to_string(plan.out.width) + "x" +
                    std::to_string(plan.out.height) + " sample but the batch holds " +
                    std::to_string(config_.output.width) + "x" + std::to_string(config_.output.height) +
                    " samples: add resize() or a crop so every sample has one size");
  }
  const int denom = config_.decode.dct_scaling ? choose_denom(plan) : 1;
  plan = scale_plan(plan, image, denom);
  const Size2 scaled = JpegDecoder::scaled_size(header, denom);

  // The source pixels the output needs: the crop itself when it is a plain copy, else the
  // resampler's footprint.
  const bool copy = is_identity(plan.x) && is_identity(plan.y);
  Rect needed;
  if (copy) {
    needed = Rect{static_cast<int>(plan.x.origin), static_cast<int>(plan.y.origin), plan.out.width,
                  plan.out.height};
  } else {
    ws.resampler.setup(ResampleParams{plan.x, plan.y, channels_, plan.filter, plan.antialias, plan.fill});
    needed = ws.resampler.footprint();
  }
  JpegRequest request{denom, Rect{}};
  if (config_.decode.roi && worth_a_region(needed, scaled)) request.region = needed;
  const Rect region = ws.decoder.decoded_region(header, request);
  // Room for the whole scaled image, not just this region: region sizes vary with every random
  // crop, image sizes do not, so the buffer stops growing once the largest image has been seen.
  ws.decoded.reserve(static_cast<std::size_t>(scaled.width) * scaled.height * channels_);
  const ImageView decoded = view_of(ws.decoded, region.width, region.height, channels_);
  ws.decoder.decode(bytes, header, request, decoded);
  ws.counters.add(StageCounters::kDecode, elapsed_ns(t),
                  static_cast<std::int64_t>(region.width) * region.height * channels_);

  ConstImageView sample;
  const bool direct = normalize_.is_identity() && !plan.flip;
  if (copy) {
    sample = ConstImageView(decoded.row(needed.y - region.y) + (needed.x - region.x) * channels_,
                            plan.out.width, plan.out.height, channels_, decoded.stride);
  } else {
    ws.scratch.reserve(ws.resampler.scratch_bytes());
    const ImageView target =
        direct ? ImageView{static_cast<std::uint8_t*>(out), plan.out.width, plan.out.height, channels_,
                           static_cast<std::ptrdiff_t>(plan.out.width) * channels_}
               : view_of(ws.resized, plan.out.width, plan.out.height, channels_);
    ws.resampler.run(decoded, region.x, region.y, target,
                     ws.scratch.span(ws.resampler.scratch_bytes()));
    sample = target;
    ws.counters.add(StageCounters::kTransform, elapsed_ns(t),
                    static_cast<std::int64_t>(plan.out.width) * plan.out.height * channels_);
    if (direct) return;
  }
  normalize_.run(sample, plan.flip, out);
  ws.counters.add(StageCounters::kNormalize, elapsed_ns(t), static_cast<std::int64_t>(sample_bytes()));
}

}  // namespace sluice::stages
