// Planning a pipeline: checks the stage chain, loads the data set and assembles the plan.
#include "stages/pipeline_plan.hpp"

#include <cmath>
#include <string>

#include "sluice/core/error.hpp"
#include "sluice/core/rng.hpp"
#include "stages/read_file.hpp"

namespace sluice::stages {

namespace {

[[noreturn]] void bad(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

std::string at(std::size_t index, const spec::Stage& stage) {
  return std::string(spec::name_of(stage)) + " (stage " + std::to_string(index + 1) + ")";
}

void check_size(const std::string& where, int w, int h) {
  if (w <= 0 || h <= 0) {
    bad(where + ": size must be positive, got " + std::to_string(w) + "x" + std::to_string(h));
  }
  if (static_cast<std::int64_t>(w) * h > (std::int64_t{1} << 28)) {
    bad(where + ": output of " + std::to_string(w) + "x" + std::to_string(h) + " pixels is too large");
  }
}

void check_geometry_op(const std::string& where, const GeometryOp& op) {
  if (const auto* o = std::get_if<spec::ResizeShorter>(&op)) check_size(where, o->size, o->size);
  if (const auto* o = std::get_if<spec::Resize>(&op)) check_size(where, o->width, o->height);
  if (const auto* o = std::get_if<spec::CenterCrop>(&op)) check_size(where, o->width, o->height);
  if (const auto* o = std::get_if<spec::RandomCrop>(&op)) {
    check_size(where, o->width, o->height);
    if (o->options.padding < 0) bad(where + ": padding must be >= 0");
  }
  if (const auto* o = std::get_if<spec::RandomResizedCrop>(&op)) {
    check_size(where, o->width, o->height);
    const auto& r = o->options;
    if (!(r.scale_min > 0 && r.scale_min <= r.scale_max)) {
      bad(where + ": scale range must satisfy 0 < scale_min <= scale_max, got [" +
          std::to_string(r.scale_min) + ", " + std::to_string(r.scale_max) + "]");
    }
    if (!(r.ratio_min > 0 && r.ratio_min <= r.ratio_max)) {
      bad(where + ": ratio range must satisfy 0 < ratio_min <= ratio_max, got [" +
          std::to_string(r.ratio_min) + ", " + std::to_string(r.ratio_max) + "]");
    }
  }
  if (const auto* o = std::get_if<spec::FlipHorizontal>(&op)) {
    if (!(o->probability >= 0 && o->probability <= 1)) {
      bad(where + ": probability must be in [0, 1], got " + std::to_string(o->probability));
    }
  }
}

std::optional<std::uint64_t> op_seed(const GeometryOp& op) {
  if (const auto* o = std::get_if<spec::RandomResizedCrop>(&op)) return o->options.seed;
  if (const auto* o = std::get_if<spec::RandomCrop>(&op)) return o->options.seed;
  if (const auto* o = std::get_if<spec::FlipHorizontal>(&op)) return o->options.seed;
  return std::nullopt;
}

std::optional<GeometryOp> as_geometry(const spec::Stage& stage) {
  return std::visit(
      [](const auto& s) -> std::optional<GeometryOp> {
        using T = std::decay_t<decltype(s)>;
        if constexpr (std::is_constructible_v<GeometryOp, T>) {
          return GeometryOp{s};
        } else {
          return std::nullopt;
        }
      },
      stage);
}

// The output size when no op fixes it: the first image's, every other image must match.
Size2 probe_first_image(const Dataset& dataset, const DecodeOptions& decode, const ReadOptions& read, FileOps* ops) {
  const Item& first = dataset.items.front();
  AlignedBuffer bytes;
  JpegDecoder decoder(decode);
  try {
    const std::size_t n = read_file(first.path, bytes, read.max_file_size, ops);
    const JpegHeader h = decoder.read_header({bytes.data(), n});
    return {h.width, h.height};
  } catch (const Error& e) {
    throw Error(e.code(),
                "cannot fix the sample size from the first image (" + e.cause() +
                    "); add resize() or a crop so the pipeline fixes it",
                first.path);
  }
}

}  // namespace

PipelinePlan plan_pipeline(const PipelineSpec& spec, const BuildOptions& options) {
  if (options.threads != autotune && options.threads < 1) {
    bad("build: threads must be >= 1 or sluice::autotune, got " + std::to_string(options.threads));
  }

  // Order: read, decode_jpeg, image ops, normalize, then batch and prefetch; shuffle anywhere
  // before batch (it reorders samples, which per-sample stages do not see).
  enum Phase { kStart, kRead, kDecoded, kNormalized, kBatched };
  Phase phase = kStart;
  SampleProgramConfig program;
  std::optional<spec::Normalize> normalize;
  std::optional<spec::Cache> cache;
  std::optional<spec::Shuffle> shuffle;
  std::optional<spec::Batch> batch;
  std::optional<spec::Prefetch> prefetch;
  std::optional<spec::ToDevice> to_device;
  for (std::size_t i = 0; i < spec.stages.size(); ++i) {
    const spec::Stage& stage = spec.stages[i];
    const std::string where = at(i, stage);
    if (const auto* s = std::get_if<spec::Read>(&stage)) {
      if (phase != kStart) bad(where + ": read() must come first, once");
      program.read = s->options;
      phase = kRead;
    } else if (const auto* s = std::get_if<spec::Cache>(&stage)) {
      if (cache) bad(where + ": only one cache() per pipeline");
      if (phase == kRead) {
        program.cache_point = CachePoint::kEncoded;
      } else if (phase == kDecoded && program.geometry.empty()) {
        program.cache_point = CachePoint::kDecoded;
      } else {
        bad(where + ": cache() goes right after read() (encoded files) or right after decode_jpeg() "
                    "(decoded images)");
      }
      if (const auto* disk = std::get_if<sluice::DiskCache>(&s->store); disk != nullptr && disk->path.empty()) {
        bad(where + ": DiskCache needs a path");
      }
      cache = *s;
    } else if (const auto* s = std::get_if<spec::DecodeJpeg>(&stage)) {
      if (phase != kRead) bad(where + ": decode_jpeg() must follow read(), once");
      if (s->options.max_image_pixels == 0) bad(where + ": max_image_pixels must be > 0");
      program.decode = s->options;
      phase = kDecoded;
    } else if (auto geometry = as_geometry(stage)) {
      if (phase != kDecoded) bad(where + ": image ops must come after decode_jpeg() and before normalize()");
      check_geometry_op(where, *geometry);
      const std::uint64_t seed = op_seed(*geometry).value_or(options.seed);
      // Keyed by the op's place among the image ops, not among all stages: adding a cache,
      // prefetch or to_device must not change a single augmentation.
      program.geometry.push_back(GeometryStep{*geometry, derive_key(seed, program.geometry.size())});
    } else if (const auto* s = std::get_if<spec::Normalize>(&stage)) {
      if (phase != kDecoded) bad(where + ": normalize() must follow decode_jpeg() and the image ops, once");
      normalize = *s;
      phase = kNormalized;
    } else if (const auto* s = std::get_if<spec::Shuffle>(&stage)) {
      if (shuffle) bad(where + ": only one shuffle() per pipeline");
      if (phase == kBatched) bad(where + ": shuffle() must come before batch(): it reorders samples");
      if (s->buffer < 1) bad(where + ": buffer must be >= 1, got " + std::to_string(s->buffer));
      shuffle = *s;
    } else if (const auto* s = std::get_if<spec::Batch>(&stage)) {
      if (phase != kDecoded && phase != kNormalized) {
        bad(where + ": batch() needs decoded samples: add read() and decode_jpeg() before it");
      }
      if (s->size < 1) bad(where + ": batch size must be at least 1, got " + std::to_string(s->size));
      batch = *s;
      phase = kBatched;
    } else if (const auto* s = std::get_if<spec::ToDevice>(&stage)) {
      if (phase != kBatched) bad(where + ": to_device() must follow batch()");
      if (to_device) bad(where + ": only one to_device() per pipeline");
      if (s->device.index < 0) bad(where + ": device index must be >= 0");
      to_device = *s;
    } else if (const auto* s = std::get_if<spec::Prefetch>(&stage)) {
      if (phase != kBatched) bad(where + ": prefetch() must follow batch()");
      if (s->depth < 1) bad(where + ": prefetch depth must be at least 1, got " + std::to_string(s->depth));
      prefetch = *s;
    }
  }
  if (phase == kStart) bad("build: the pipeline has no stages: add read().decode_jpeg()...batch(n)");
  if (phase == kRead) bad("build: add decode_jpeg() after read()");
  if (!batch) bad("build: add batch(n) at the end of the pipeline");

  const StaticGeometry geometry = analyse_geometry(program.geometry);
  if (geometry.error) bad(*geometry.error);
  program.normalize = normalize ? normalize->options
                                : NormalizeOptions{.mean = {}, .std = {}, .layout = Layout::kNHWC, .dtype = DType::kU8};
  NormalizeOptions device_normalize;
  if (to_device && to_device->options.normalize_on_device) {
    if (!normalize || normalize->options.dtype == DType::kU8) {
      bad("to_device: normalize_on_device needs a normalize() stage with an f32, f16 or bf16 output "
          "(it says what to compute on the device)");
    }
    // The host ships u8 HWC; the device casts, normalises and transposes.
    device_normalize = normalize->options;
    program.normalize = NormalizeOptions{.mean = {}, .std = {}, .layout = Layout::kNHWC, .dtype = DType::kU8};
  }

  PipelinePlan plan;
  plan.options = options;
  plan.dataset = load_dataset(spec.source);
  plan.order = EpochOrderOptions{
      .items = static_cast<std::int64_t>(plan.dataset.items.size()),
      .shard_rank = spec.shard_rank,
      .shard_world = spec.shard_world,
      .file_seed = spec.shuffle_files_seed,
      .shuffle_buffer = shuffle ? shuffle->buffer : 0,
      .shuffle_seed = shuffle ? shuffle->options.seed.value_or(options.seed) : 0,
  };
  const EpochOrder order(plan.order);  // validates the shard
  if (order.size() == 0) {
    bad("shard(" + std::to_string(spec.shard_rank) + ", " + std::to_string(spec.shard_world) +
        ") leaves no items: the data set has only " + std::to_string(plan.dataset.items.size()));
  }
  plan.batch_size = batch->size;
  plan.drop_last = batch->options.drop_last;
  if (plan.drop_last && order.size() < plan.batch_size) {
    bad("batch(" + std::to_string(plan.batch_size) + ", drop_last) leaves no batch: the epoch has only " +
        std::to_string(order.size()) + " samples");
  }
  plan.prefetch = prefetch ? prefetch->depth : 2;
  plan.prefetch_set = prefetch.has_value();
  plan.skip_key = derive_key(options.seed, 0x736b6970);  // "skip"
  plan.cache = cache;
  plan.to_device = to_device;
  plan.device_normalize = device_normalize;

  program.file_ops = options.file_ops;
  program.output = geometry.out ? *geometry.out
                                : probe_first_image(plan.dataset, program.decode, program.read, options.file_ops);
  plan.program = std::move(program);
  return plan;
}

}  // namespace sluice::stages
