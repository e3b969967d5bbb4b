// Planning a pipeline: checks the stage chain, loads the data set and assembles the plan.
#include "stages/program/resolved_pipeline.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "sluice/detail/core/numbers.hpp"
#include "pipeline/stage_registry.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/rng.hpp"
#include "sluice/memory/budget.hpp"
#include "stages/decode/exif.hpp"
#include "stages/decode/image_decoder.hpp"
#include "stages/image/orient.hpp"
#include "stages/remote/remote_shards.hpp"
#include "stages/remote/remote_stats.hpp"
#include "stages/remote/remote_url.hpp"
#include "stages/source/read_file.hpp"

namespace sluice::stages {

namespace {

[[noreturn]] void bad(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

std::string at(std::size_t index, const spec::Stage& stage) {
  return std::string(spec::name_of(stage)) + " (stage " + std::to_string(index + 1) + ")";
}

// Files probed for the sample size under OnError::kSkip before the data set counts as unreadable
// (the loader gives up on as many bad replacements in a row).
constexpr int kMaxSizeProbes = 64;

// The output size when no op fixes it: that of the first image the pipeline reads (epoch 0's
// order) that gives an image header (any format the decode stage reads); every other image must match. A file before it that gives none
// is bad input like any other: under kFail build() fails naming it (epoch 0 would fail on it
// first), under kSkip the probe goes on to the next (the epoch will skip and count it).
Size2 probe_sample_size(const Dataset& dataset, const EpochOrderOptions& order_options, const DecodeOptions& decode,
                        const ReadOptions& read, OnError on_error, FileOps* file_ops) {
  std::vector<std::int64_t> order;
  EpochOrder(order_options).compute(0, order);
  if (dataset.fetcher) dataset.fetcher->fetch(order, {});  // epoch 0's shards: the epoch reads them first
  AlignedBuffer bytes;
  JpegDecoder decoder(decode);
  ImageDecoder others(decode);
  ItemReader reader(file_ops);
  const std::size_t probes = std::min<std::size_t>(order.size(), kMaxSizeProbes);
  for (std::size_t i = 0; i < probes; ++i) {
    const std::int64_t item = order[i];
    try {
      const std::span<const std::uint8_t> file = reader.read(dataset.items, item, bytes, read.max_file_size);
      const ImageProbe h = probe_image(file, decoder, others);
      // The ops see the upright image: an orientation of 5 to 8 swaps the sides.
      return upright_size({h.width, h.height}, decode.orientation == Orientation::kExif ? exif_orientation(file) : 1);
    } catch (const Error& e) {
      if (on_error == OnError::kFail) {
        throw Error(e.code(),
                    "cannot fix the sample size from the first image the pipeline reads (" + e.cause() +
                        "); under OnError::kSkip the next image fixes it, or add resize() or a crop so the "
                        "pipeline fixes it",
                    dataset.items.path(item));
      }
      if (i + 1 == probes) {
        throw Error(e.code(),
                    "cannot fix the sample size: none of the first " + std::to_string(probes) +
                        " images the pipeline reads gives an image header (the last: " + e.cause() +
                        "); check the data set with `sluice inspect`",
                    dataset.items.path(item));
      }
    }
  }
  throw Error(ErrorCode::kInternal, "probe_sample_size: no image to probe");  // resolve_pipeline refuses empty shards
}

using schema::Phase;

// What the stage chain asks for, collected in order: the sample program's parts and the stages
// the plan keeps whole.
struct Chain {
  SampleProgramConfig program;
  std::optional<spec::Normalize> normalize;
  std::optional<spec::Cache> cache;
  std::optional<spec::Shuffle> shuffle;
  std::optional<spec::Batch> batch;
  std::optional<spec::Prefetch> prefetch;
  std::optional<spec::ToDevice> to_device;
  std::vector<BatchMixParams> mixes;          // mixup() / cutmix(), in order
  std::optional<std::uint64_t> mix_seed;      // the first one's own seed
};

// The stage's ordering rule, from its descriptor: once-only first, then the phase it may follow.
void check_order(const schema::StageDescriptor& d, const spec::Stage& stage, std::vector<bool>& seen, Phase& phase,
                 const std::string& where) {
  if (d.order.once) {
    if (seen[stage.index()]) bad(where + ": only one " + d.name + "() per pipeline");
    seen[stage.index()] = true;
  }
  if (!d.order.allowed.contains(phase)) bad(where + ": " + d.order.misplaced);
  if (d.order.enters) phase = *d.order.enters;
}

// What each stage puts into the chain; `before` is the phase it followed. The visit is
// exhaustive on purpose: there is no catch-all, so a stage added to spec::Stage without its line
// here fails to compile instead of being silently ignored (docs/design.md, "Adding a stage").
struct Collect {
  Chain& chain;
  Phase before;
  std::uint64_t seed;  // BuildOptions::seed

  void operator()(const spec::Read& s) const { chain.program.read = s.options; }
  void operator()(const spec::Cache& s) const {
    chain.program.cache_point = before == Phase::kRead ? CachePoint::kEncoded : CachePoint::kDecoded;
    chain.cache = s;
  }
  void operator()(const spec::DecodeJpeg& s) const { chain.program.decode = s.options; }
  void operator()(const spec::Normalize& s) const { chain.normalize = s; }
  void operator()(const spec::Shuffle& s) const { chain.shuffle = s; }
  void operator()(const spec::Batch& s) const { chain.batch = s; }
  void operator()(const spec::ToDevice& s) const { chain.to_device = s; }
  void operator()(const spec::Prefetch& s) const { chain.prefetch = s; }
  void operator()(const spec::MixUp& s) const { mix(BatchMixKind::kMixUp, s.alpha, s.num_classes, s.seed); }
  void operator()(const spec::CutMix& s) const { mix(BatchMixKind::kCutMix, s.alpha, s.num_classes, s.seed); }
  // Image ops contribute through their descriptor's GeometryRule (collect_chain adds them to the
  // geometry steps before this visit is reached); listing them here keeps the visit exhaustive.
  void operator()(const spec::ResizeShorter& /*unused*/) const { image_op(); }
  void operator()(const spec::Resize& /*unused*/) const { image_op(); }
  void operator()(const spec::CenterCrop& /*unused*/) const { image_op(); }
  void operator()(const spec::RandomResizedCrop& /*unused*/) const { image_op(); }
  void operator()(const spec::RandomCrop& /*unused*/) const { image_op(); }
  void operator()(const spec::FlipHorizontal& /*unused*/) const { image_op(); }
  void operator()(const spec::FlipVertical& /*unused*/) const { image_op(); }
  // Pixel ops: run after the resampling, in the chain's order (augment_chain.hpp).
  void operator()(const spec::ColorJitter& s) const { add(chain.program.pixel_ops, kPixelStream, s, s.options.seed); }
  void operator()(const spec::Grayscale& s) const { add(chain.program.pixel_ops, kPixelStream, s, std::nullopt); }
  void operator()(const spec::RandomGrayscale& s) const {
    add(chain.program.pixel_ops, kPixelStream, s, s.options.seed);
  }
  void operator()(const spec::RandomRotation& s) const { pixel(s, s.options.warp.seed); }
  void operator()(const spec::RandomAffine& s) const { pixel(s, s.options.warp.seed); }
  void operator()(const spec::GaussianBlur& s) const { pixel(s, s.options.seed); }
  void operator()(const spec::RandomPosterize& s) const { pixel(s, s.options.seed); }
  void operator()(const spec::RandomSolarize& s) const { pixel(s, s.options.seed); }
  void operator()(const spec::RandomInvert& s) const { pixel(s, s.options.seed); }
  void operator()(const spec::RandomAutocontrast& s) const { pixel(s, s.options.seed); }
  void operator()(const spec::RandomEqualize& s) const { pixel(s, s.options.seed); }
  void operator()(const spec::RandomAdjustSharpness& s) const { pixel(s, s.options.seed); }
  void operator()(const spec::TrivialAugmentWide& s) const { pixel(s, s.options.seed); }
  void operator()(const spec::RandAugment& s) const { pixel(s, s.options.seed); }
  void operator()(const spec::AutoAugment& s) const { pixel(s, s.options.seed); }
  void operator()(const spec::RandomErasing& s) const { add(chain.program.slot_ops, kSlotStream, s, s.options.seed); }

 private:
  // Keyed by the op's place in its own list, on streams apart from the geometry ops': adding a
  // colour op changes no crop, and adding a crop no colour.
  static constexpr std::uint64_t kPixelStream = 0x706978656c;  // "pixel"
  static constexpr std::uint64_t kSlotStream = 0x736c6f74;     // "slot"
  void pixel(const spec::Stage& stage, std::optional<std::uint64_t> own) const {
    add(chain.program.pixel_ops, kPixelStream, stage, own);
  }
  void add(std::vector<AugmentStep>& steps, std::uint64_t stream, const spec::Stage& stage,
           std::optional<std::uint64_t> own) const {
    steps.push_back(AugmentStep{stage, derive_key(derive_key(own.value_or(seed), stream), steps.size())});
  }

  void mix(BatchMixKind kind, double alpha, int num_classes, std::optional<std::uint64_t> seed) const {
    if (chain.mixes.empty()) chain.mix_seed = seed;
    chain.mixes.push_back(BatchMixParams{kind, alpha, num_classes});
  }
  // Reached only if an image op's descriptor lost its GeometryRule: its effect would be lost.
  static void image_op() { throw Error(ErrorCode::kInternal, "an image op without a geometry rule"); }
};

// The pixel ops run on the sample at the output size, after the one resampling: a geometric op
// after one would have to run before it. Flips are the exception: they commute with every pixel op
// (contrast's mean included) and fold into the writing of the sample.
void refuse_after_pixel_ops(const Chain& chain, const spec::Stage& stage, const std::string& where) {
  if (chain.program.pixel_ops.empty()) return;
  if (std::holds_alternative<spec::FlipHorizontal>(stage) || std::holds_alternative<spec::FlipVertical>(stage)) return;
  bad(where + ": comes after " + spec::name_of(chain.program.pixel_ops.back().op) +
      ", but sluice runs the colour ops on the sample at its output size, after the crops and resizes: put " +
      spec::name_of(stage) + " before the colour ops");
}

// Walks the stages in order: each one's ordering rule and checks, then what it contributes.
Chain collect_chain(const PipelineSpec& spec, const BuildOptions& options) {
  Chain chain;
  Phase phase = Phase::kStart;
  std::vector<bool> seen(std::variant_size_v<spec::Stage>, false);
  for (std::size_t i = 0; i < spec.stages.size(); ++i) {
    const spec::Stage& stage = spec.stages[i];
    const schema::StageDescriptor& d = schema::descriptor_of(stage);
    const std::string where = at(i, stage);
    const Phase before = phase;
    check_order(d, stage, seen, phase, where);
    if (d.check != nullptr) d.check(stage, where);
    if (d.geometry != nullptr) {
      refuse_after_pixel_ops(chain, stage, where);
      const std::optional<std::uint64_t> own = d.geometry->seed ? d.geometry->seed(stage) : std::nullopt;
      // Keyed by the op's place among the image ops, not among all stages: adding a cache,
      // prefetch or to_device must not change a single augmentation.
      auto& steps = chain.program.geometry;
      steps.push_back(GeometryStep{stage, derive_key(own.value_or(options.seed), steps.size())});
    } else {
      std::visit(Collect{chain, before, options.seed}, stage);  // exhaustive: a new stage must say what it does
    }
  }
  if (phase == Phase::kStart) bad("build: the pipeline has no stages: add read().decode()...batch(n)");
  if (phase == Phase::kRead) bad("build: add decode() after read()");
  if (!chain.batch) bad("build: add batch(n) at the end of the pipeline");
  return chain;
}

// grayscale's channels against the sample's; random_erasing's values against the sample they are
// written into: one or one per channel, and for a u8 output whole grey levels (what torch's
// assignment into a uint8 tensor keeps).
void check_augment_ops(const Chain& chain) {
  int channels = chain.program.decode.color == Color::kGrey ? 1 : 3;
  for (const AugmentStep& step : chain.program.pixel_ops) {
    const auto* grey = std::get_if<spec::Grayscale>(&step.op);
    if (grey == nullptr) continue;
    if (grey->num_output_channels == 3 && channels == 1) {
      bad("grayscale: num_output_channels 3 needs an RGB sample, and this one has one channel here (decode_jpeg "
          "with color grey, or a grayscale with one output channel before it)");
    }
    channels = grey->num_output_channels;
  }
  const bool u8 = chain.program.normalize.dtype == DType::kU8;
  for (const AugmentStep& step : chain.program.slot_ops) {
    const auto& value = std::get<spec::RandomErasing>(step.op).options.value;
    if (value.size() > 1 && static_cast<int>(value.size()) != channels) {
      bad("random_erasing: value has " + std::to_string(value.size()) + " numbers but the sample has " +
          std::to_string(channels) + " channels: give one, or one per channel");
    }
    if (u8 && value.empty()) {
      bad("random_erasing: value \"random\" needs a float output (normalize with dtype f32, f16 or bf16), not u8");
    }
    for (const float v : value) {
      if (u8 && !(v >= 0 && v <= 255 && v == std::floor(v))) {
        bad("random_erasing: value " + std::to_string(v) + " cannot be written into a u8 sample: give a whole "
            "number from 0 to 255, or normalize to a float dtype");
      }
    }
  }
}

// The host's normalisation, and the device's with to_device({.normalize_on_device}) (returned).
NormalizeOptions split_normalize(Chain& chain) {
  const NormalizeOptions raw{.mean = {}, .std = {}, .layout = Layout::kNHWC, .dtype = DType::kU8};
  chain.program.normalize = chain.normalize ? chain.normalize->options : raw;
  check_augment_ops(chain);
  if (!chain.to_device || !chain.to_device->options.normalize_on_device) return {};
  if (!chain.program.slot_ops.empty()) {
    bad("random_erasing: the host writes u8 samples with to_device({.normalize_on_device}), and random_erasing "
        "erases the normalised sample: normalise on the host to use it");
  }
  if (!chain.normalize || chain.normalize->options.dtype == DType::kU8) {
    bad("to_device: normalize_on_device needs a normalize() stage with an f32, f16 or bf16 output "
        "(it says what to compute on the device)");
  }
  // The host ships u8 HWC; the device casts, normalises and transposes.
  chain.program.normalize = raw;
  return chain.normalize->options;
}

// mixup() / cutmix(): one width of soft labels, a float batch for mixup, a host batch, and every
// label a column of them.
BatchMixPlan batch_mix_plan(const Chain& chain, const ItemTable& items, std::uint64_t build_seed) {
  BatchMixPlan plan{chain.mixes, chain.mix_seed.value_or(build_seed)};
  if (plan.choices.empty()) return plan;
  const int classes = plan.choices.front().num_classes;
  for (const BatchMixParams& p : plan.choices) {
    if (p.num_classes != classes) bad("mixup and cutmix need the same num_classes, got " + std::to_string(classes) + " and " + std::to_string(p.num_classes));
    try {
      check_batch_mix_dtype(p.kind, chain.program.normalize.dtype);
    } catch (const Error& e) {
      bad(std::string(e.what()) + (chain.to_device ? " (with normalize_on_device the host batch is u8)" : ""));
    }
  }
  for (std::int64_t i = 0; i < items.size(); ++i) {
    const std::int32_t label = items.label(i);
    if (label < 0 || label >= classes) {
      bad("mixup/cutmix: num_classes is " + std::to_string(classes) + " but item " + std::to_string(i) + " has label " +
          std::to_string(label) + " (" + items.path(i) + ")");
    }
  }
  return plan;
}

// Tar shards split as their options say; every other source by samples.
ShardSplit shard_split(const spec::Source& source) {
  const auto* shards = std::get_if<spec::Shards>(&source);
  return shards != nullptr && shards->shard_by == ShardBy::kShards ? ShardSplit::kShards : ShardSplit::kSamples;
}

}  // namespace

namespace {

// Whether the source itself is named by URL (a list's entries are known only once it is read).
bool names_urls(const spec::Source& source) {
  if (const auto* l = std::get_if<spec::ListFile>(&source)) return remote::is_remote_url(l->path);
  if (const auto* s = std::get_if<spec::Shards>(&source)) {
    return std::any_of(s->patterns.begin(), s->patterns.end(), [](const std::string& p) { return remote::is_remote_url(p); });
  }
  return false;
}

}  // namespace

ResolvedPipeline resolve_pipeline(const PipelineSpec& spec, const BuildOptions& options, FileOps* file_ops) {
  // Bounded above too: thousands of workers run the process out of stacks and allocator arenas
  // (100,000 crashed inside libtbbmalloc) long before they help.
  if (options.threads != autotune && (options.threads < 1 || options.threads > core::max_threads())) {
    bad("build: threads must be from 1 to " + std::to_string(core::max_threads()) +
        " (4 x the hardware threads, at least 1024) or sluice::autotune, got " + std::to_string(options.threads));
  }
  if (options.samples_in_flight < 0 || options.samples_in_flight > 64 * core::max_threads()) {
    bad("build: samples_in_flight must be from 0 to " + std::to_string(64 * core::max_threads()) + ", got " +
        std::to_string(options.samples_in_flight));
  }
  // The order the descriptors' rules give: read, decode_jpeg, image ops, normalize, then batch
  // and prefetch; shuffle anywhere before batch (it reorders samples, which per-sample stages do
  // not see).
  Chain chain = collect_chain(spec, options);
  SampleProgramConfig& program = chain.program;
  const StaticGeometry geometry = analyse_geometry(program.geometry);
  if (geometry.error) bad(*geometry.error);
  const NormalizeOptions device_normalize = split_normalize(chain);
  const auto& shuffle = chain.shuffle;
  const auto& batch = chain.batch;
  const auto& prefetch = chain.prefetch;

  ResolvedPipeline plan;
  plan.options = options;
  // Reading whole shards (one rank, or a rank of several splitting by shards), remote shards
  // with an index file beside them stream in as the epochs read them (stages/tar/shard_fetcher.hpp);
  // split by samples, every rank reads every shard, fetched in build().
  const bool on_demand = shard_split(spec.source) == ShardSplit::kShards;
  // Fetches made while the data set loads (and while its size is probed) count into this
  // loader's counters and stop at options.stop (stages/remote/remote_stats.hpp). A source named
  // by URL holds its transfers' buffers from the budget while it fetches, as the loader will.
  plan.remote_counters = std::make_shared<remote::SourceCounters>();
  const remote::RemoteScope remote_scope(plan.remote_counters, options.stop);
  MemoryBudget fetch_budget(options.memory_budget, options.job_budget);
  std::optional<Reservation> fetch_buffers;
  if (names_urls(spec.source)) {
    fetch_buffers = fetch_budget.try_reserve(remote::remote_buffer_bytes(), MemoryUse::kRemote);
    if (!fetch_buffers) {
      throw Error(ErrorCode::kOutOfBudget, "the remote transfers' buffers (" + std::to_string(remote::remote_buffer_bytes()) +
                                               " bytes) do not fit the memory budget of " +
                                               std::to_string(options.memory_budget) + " bytes: raise memory_budget");
    }
  }
  // Epoch 0's first shard, where the order tells it from the shard count alone (one rank; rank
  // 0 of several without a shuffle buffer, which could take its first reads from further on):
  // a remote one comes with the index files.
  FirstShard first;
  if (spec.shard_world == 1 || (spec.shard_rank == 0 && !(shuffle && shuffle->buffer > 1))) {
    first = [seed = spec.shuffle_files_seed](std::size_t shards) {
      return static_cast<std::ptrdiff_t>(EpochOrder::first_group(seed, shards, 0));
    };
  }
  plan.dataset = load_dataset(spec.source, file_ops, on_demand, first);
  plan.order = EpochOrderOptions{
      .items = plan.dataset.items.size(),
      .shard_rank = spec.shard_rank,
      .shard_world = spec.shard_world,
      .file_seed = spec.shuffle_files_seed,
      .shuffle_buffer = shuffle ? shuffle->buffer : 0,
      .shuffle_seed = shuffle ? shuffle->options.seed.value_or(options.seed) : 0,
      .groups = plan.dataset.items.shard_starts(),
      .batch = batch->size,
      .drop_last = batch->options.drop_last,
      .split = shard_split(spec.source),
  };
  const EpochOrder order(plan.order);  // validates the shard
  // Shards streamed through memory (remote cache_limit 0): their buffers are a `remote` use too,
  // sized for the reads in flight at once (the shuffle buffer, and the batches of the deepest
  // prefetch the autotuner may reach, runtime/autotuner.hpp, with the consumer's and one
  // completing) straddle (stages/tar/shard_fetcher.hpp).
  constexpr std::int64_t kBatchesInFlight = 8 + 2;
  const std::uint64_t stream_window =
      plan.dataset.fetcher
          ? plan.dataset.fetcher->reserve_window(plan.order.shuffle_buffer + kBatchesInFlight * batch->size)
          : 0;
  std::optional<Reservation> stream_buffers;
  if (stream_window > 0) {
    stream_buffers = fetch_budget.try_reserve(stream_window, MemoryUse::kRemote);
    if (!stream_buffers) {
      throw Error(ErrorCode::kOutOfBudget, "the remote shards streamed through memory (cache_limit 0) need " +
                                               std::to_string(stream_window) + " bytes that do not fit the memory budget of " +
                                               std::to_string(options.memory_budget) +
                                               " bytes: raise memory_budget, or give the shards a cache folder");
    }
  }
  plan.batch_size = batch->size;
  plan.drop_last = batch->options.drop_last;
  if (plan.drop_last && order.batches() == 0) {
    bad("batch(" + std::to_string(plan.batch_size) + ", drop_last) leaves no batch: the epoch has only " +
        std::to_string(plan.dataset.items.size()) + " samples for " + std::to_string(spec.shard_world) + " rank(s)");
  }
  if (order.size() == 0) {
    bad("shard(" + std::to_string(spec.shard_rank) + ", " + std::to_string(spec.shard_world) +
        ") leaves no items: the data set has only " + std::to_string(plan.dataset.items.size()));
  }
  plan.prefetch = prefetch ? prefetch->depth : 2;
  plan.prefetch_set = prefetch.has_value();
  plan.skip_key = derive_key(options.seed, 0x736b6970);  // "skip"
  plan.cache = chain.cache;
  plan.to_device = chain.to_device;
  plan.device_normalize = device_normalize;
  plan.batch_mix = batch_mix_plan(chain, plan.dataset.items, options.seed);

  program.file_ops = file_ops;
  program.output = geometry.out ? *geometry.out
                                : probe_sample_size(plan.dataset, plan.order, program.decode, program.read,
                                                    options.on_error, file_ops);
  plan.program = std::move(program);
  if (plan.remote_counters->stats().empty()) {
    plan.remote_counters.reset();  // local data: nothing fetched, nothing to report
  } else {
    plan.remote_bytes = remote::remote_buffer_bytes() + stream_window;
  }
  return plan;
}

}  // namespace sluice::stages
