// The fused per-sample chain: read -> header -> plan -> decode (scale, region) -> resample ->
// normalize into the batch slot, timing each stage.
#include "stages/program/sample_program.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>

#include "sluice/core/error.hpp"
#include "sluice/core/rng.hpp"
#include "stages/decode/exif.hpp"
#include "stages/image/orient.hpp"
#include "stages/source/read_file.hpp"

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

// How much of each worker buffer make_workspace faults in: what an ImageNet-sized sample writes
// (on imagenet-photos every share but the coefficients' was 2 MiB or less, those 4 MiB), so set-up
// stays bounded however large the largest probed image makes a share.
constexpr std::uint64_t kPrefaultBytes = std::uint64_t{4} << 20;

bool worth_a_region(const Rect& needed, Size2 image) {
  const std::int64_t image_pixels = static_cast<std::int64_t>(image.width) * image.height;
  const std::int64_t needed_pixels = static_cast<std::int64_t>(needed.width) * needed.height;
  return needed.width > 0 && image_pixels >= kRegionMinImagePixels &&
         static_cast<double>(needed_pixels) <= kRegionMaxShare * static_cast<double>(image_pixels);
}

ImageView view_of(AlignedBuffer& buffer, int width, int height, int channels, std::size_t offset = 0) {
  const std::size_t row = static_cast<std::size_t>(width) * channels;
  buffer.reserve(offset + row * static_cast<std::size_t>(height));
  return ImageView{buffer.data() + offset, width, height, channels, static_cast<std::ptrdiff_t>(row)};
}

// A cached decoded image: this header, then the HWC pixels.
struct DecodedHeader {
  std::uint32_t magic;
  std::uint32_t width;
  std::uint32_t height;
  std::uint32_t channels;
};
constexpr std::uint32_t kDecodedMagic = 0x49444c53;  // "SLDI"
constexpr std::size_t kDecodedHeaderBytes = 64;      // keeps the pixels 64-byte aligned

// A cache entry is input like any file (a disk cache can be crafted): each dimension is bounded
// by max_image_pixels before they are multiplied, so the product neither wraps nor exceeds it.
std::optional<ConstImageView> parse_decoded(std::span<const std::uint8_t> bytes, int channels,
                                            std::uint64_t max_image_pixels) {
  if (bytes.size() < kDecodedHeaderBytes) return std::nullopt;
  DecodedHeader h;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (h.magic != kDecodedMagic || static_cast<int>(h.channels) != channels || h.width == 0 || h.height == 0 ||
      h.width > max_image_pixels || h.height > max_image_pixels || h.width > INT32_MAX || h.height > INT32_MAX ||
      std::uint64_t{h.width} * h.height > max_image_pixels) {
    return std::nullopt;
  }
  const std::uint64_t pixels = std::uint64_t{h.width} * h.height * h.channels;
  if (bytes.size() != kDecodedHeaderBytes + pixels) {
    return std::nullopt;
  }
  return ConstImageView(bytes.data() + kDecodedHeaderBytes, static_cast<int>(h.width), static_cast<int>(h.height),
                        channels, static_cast<std::ptrdiff_t>(h.width) * channels);
}

// A file: its path, size and mtime now. A tar member: shard:member, its size and the shard's
// mtime when indexed (a changed shard fails the read anyway, stages/source/read_file.hpp).
CacheKey disk_key(const ItemTable& items, std::int64_t item, ItemReader& reader) {
  const ItemTable::Location at = items.locate(item);
  if (at.kind == ItemTable::Kind::kMember) {
    return CacheKey{items.path(item), at.size, items.shards()[static_cast<std::size_t>(at.shard)].mtime_ns};
  }
  const std::string& path = reader.file_path(at);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return CacheKey{path, 0, -1};  // read_file will say why
  return CacheKey{path, static_cast<std::uint64_t>(st.st_size),
                  static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

std::uint64_t mix(std::uint64_t h, std::uint64_t v) { return derive_key(h ^ v, 0x5eed); }

}  // namespace

void RecoveryLog::record(std::int64_t item, const std::string& path, std::string_view warning) {
  if (item < 0) return;
  const auto index = static_cast<std::size_t>(item);
  std::lock_guard lock(mutex_);
  if (index >= seen_.size()) seen_.resize(index + 1);
  if (seen_[index]) return;
  seen_[index] = true;
  ++count_;
  if (listed_.size() < kListed) listed_.push_back(RecoveredSample{path, std::string(warning)});
}

std::int64_t RecoveryLog::count() const {
  std::lock_guard lock(mutex_);
  return count_;
}

std::vector<RecoveredSample> RecoveryLog::listed() const {
  std::lock_guard lock(mutex_);
  return listed_;
}

const char* StageCounters::name(int stage) {
  switch (stage) {
    case kRead: return "read";
    case kDecode: return "decode";
    case kTransform: return "transform";
    case kNormalize: return "normalize";
    default: return "?";
  }
}

SampleProgram::SampleProgram(SampleProgramConfig config, SampleCaches caches)
    : config_(std::move(config)), caches_(caches) {
  channels_ = config_.decode.color == Color::kGrey ? 1 : 3;
  out_channels_ = channels_after(config_.pixel_ops, channels_);
  normalize_.setup(config_.normalize, out_channels_);
  resume_points_ = keeps_resume_points(config_);
}

bool SampleProgram::keeps_resume_points(const SampleProgramConfig& config) {
  if (config.cache_point == CachePoint::kDecoded) return false;  // whole images are decoded for the cache
  return std::any_of(config.geometry.begin(), config.geometry.end(), [](const GeometryStep& step) {
    return std::holds_alternative<spec::CenterCrop>(step.op) || std::holds_alternative<spec::RandomResizedCrop>(step.op) ||
           std::holds_alternative<spec::RandomCrop>(step.op);
  });
}

std::unique_ptr<SampleProgram::Workspace> SampleProgram::make_workspace() const {
  return std::make_unique<Workspace>(config_.decode, config_.file_ops);
}

std::unique_ptr<SampleProgram::Workspace> SampleProgram::make_workspace(MemoryBudget& budget,
                                                                        const WorkspaceShare& share) const {
  auto ws = make_workspace();
  ws->file.attach_share(budget, MemoryUse::kReadBuffers, share.file);
  ws->decoded.attach_share(budget, MemoryUse::kDecodeBuffers, share.decoded);
  ws->stored.attach_share(budget, MemoryUse::kDecodeBuffers, share.stored);
  ws->resized.attach_share(budget, MemoryUse::kDecodeBuffers, share.resized);
  ws->scratch.attach_share(budget, MemoryUse::kDecodeBuffers, share.scratch);
  ws->augment.attach_share(budget, MemoryUse::kDecodeBuffers, share.augment);
  // Each buffer at its whole share at once (reserved just above, so this takes no budget): one
  // grown a power of two at a time faults in again every page of each size it passes through, in
  // the epoch that first meets the larger samples.
  ws->file.reserve(share.file);
  ws->decoded.reserve(share.decoded);
  ws->stored.reserve(share.stored);
  ws->resized.reserve(share.resized);
  ws->scratch.reserve(share.scratch);
  ws->augment.reserve(share.augment);
  ws->decoder.attach(budget, MemoryUse::kDecodeBuffers, share.decoder);
  ws->formats.attach(budget, MemoryUse::kDecodeBuffers, share.formats);
  // And their first kPrefaultBytes faulted in here, in set-up (as the batch ring's slots are), not
  // by the first samples: on the VMs measured a fresh 2 MiB page took about 3 ms to clear where
  // the host had to back it, and these buffers' first touch put 5-33 ms of page clearing into
  // epoch 0 of imagenet-photos, most of it before its first batch (docs/performance.md). Only
  // the start of each: a share is sized for the largest probed image, and one 121-megapixel file
  // among photographs made every worker's decoded buffer 512 MiB, which faulted in whole took a
  // set-up of 17 s and 1 GB of resident memory the crops of later samples never wrote.
  for (AlignedBuffer* b : {&ws->file, &ws->decoded, &ws->stored, &ws->resized, &ws->scratch, &ws->augment}) {
    b->prefault(kPrefaultBytes);
  }
  ws->decoder.prefault(keeps_resume_points(config_), kPrefaultBytes);
  return ws;
}

WorkspaceShare SampleProgram::workspace_requirements(const SampleProgramConfig& config,
                                                     const WorkspaceProbes& probes) {
  // Images larger than any probed one grow their worker's buffers at run time (from free budget,
  // or in row bands); the headroom makes that rare.
  constexpr double kHeadroom = 1.25;
  const auto with_headroom = [](std::uint64_t v) {
    return AlignedBuffer::rounded_capacity(static_cast<std::size_t>(static_cast<double>(v) * kHeadroom) + 64);
  };
  const std::uint64_t channels = config.decode.color == Color::kGrey ? 1 : 3;
  const std::uint64_t out_row = static_cast<std::uint64_t>(config.output.width) * channels;
  WorkspaceShare share;
  const std::uint64_t file = ItemReader::workspace_requirements(probes.largest_file, probes.kind);
  share.file = probes.largest_file > 0 ? with_headroom(file) : 0;
  share.decoded = probes.largest_image > 0 ? with_headroom(probes.largest_image) : 0;
  // Any file may carry an orientation: its stored pixels take as much again before the turn.
  share.stored = config.decode.orientation == Orientation::kExif ? share.decoded : 0;
  // The pixel ops run in place in this buffer (with their own scratch below), the slot ops in the slot.
  share.resized = AlignedBuffer::rounded_capacity(out_row * static_cast<std::uint64_t>(config.output.height));
  const std::size_t augment = pixel_ops_workspace_bytes(config.pixel_ops, config.output, static_cast<int>(channels));
  share.augment = augment > 0 ? AlignedBuffer::rounded_capacity(augment) : 0;
  share.scratch = AlignedBuffer::rounded_capacity(Resampler::workspace_requirements(out_row));
  share.decoder = probes.decoder;
  // Coefficients: the same headroom, no power-of-two rounding, but whole 2 MiB from 1 MiB on
  // (JpegDecoder::kept_coefficient_bytes: the buffer kept for them is then all huge pages).
  share.decoder.coefficients = JpegDecoder::kept_coefficient_bytes(
      static_cast<std::uint64_t>(static_cast<double>(probes.decoder.coefficients) * kHeadroom));
  share.formats = probes.formats > 0 ? with_headroom(probes.formats) : 0;
  return share;
}

Shape SampleProgram::sample_shape() const {
  const Size2 s = config_.output;
  if (layout() == Layout::kNCHW) return Shape{out_channels_, s.height, s.width};
  return Shape{s.height, s.width, out_channels_};
}

std::uint64_t SampleProgram::cache_fingerprint(const SampleProgramConfig& config) {
  // Encoded entries depend on nothing but the file; decoded ones on how it was decoded.
  std::uint64_t h = mix(0x736c7563, static_cast<std::uint64_t>(config.cache_point));
  if (config.cache_point == CachePoint::kDecoded) {
    const DecodeOptions& d = config.decode;
    h = mix(h, static_cast<std::uint64_t>(d.color));
    // Bit 4 was accept_warnings, whose entries may hold made-up rows of truncated files: strict
    // takes a bit of its own, so no cache written with it is ever read again.
    h = mix(h, (d.fast_dct ? 1u : 0u) | (d.fast_upsample ? 2u : 0u) | (d.strict ? 8u : 0u) |
                   (d.orientation == Orientation::kExif ? 16u : 0u));
  }
  return h;
}

std::uint64_t SampleProgram::cache_entry_limit(const SampleProgramConfig& config) {
  if (config.cache_point != CachePoint::kDecoded) return config.read.max_file_size;
  const std::uint64_t channels = config.decode.color == Color::kGrey ? 1 : 3;
  const std::uint64_t pixels = std::min<std::uint64_t>(config.decode.max_image_pixels, UINT64_MAX / 8);
  return kDecodedHeaderBytes + pixels * channels;
}

std::uint64_t SampleProgram::decoded_entry_bytes(std::uint64_t width, std::uint64_t height, int channels) {
  return kDecodedHeaderBytes + width * height * static_cast<std::uint64_t>(channels);
}

void SampleProgram::run(const ItemTable& items, std::int64_t item, const SampleKey& key, Workspace& ws,
                        void* out) const {
  ws.reader.use(config_.file_ops);
  ws.key = key;
  try {
    run_unchecked(items, item, key, ws, out);
  } catch (const Error& e) {
    if (!e.path().empty()) throw;
    throw Error(e.code(), e.cause(), items.path(item));
  }
}

std::span<const std::uint8_t> SampleProgram::encoded_bytes(const ItemTable& items, std::int64_t item,
                                                            const SampleKey& key, Workspace& ws,
                                                            MemoryCacheStore::Handle& held) const {
  const bool cached = config_.cache_point == CachePoint::kEncoded;
  if (cached && caches_.memory != nullptr) {
    held = caches_.memory->lookup(key.item);
    if (held) return held.bytes();
  }
  CacheKey disk;
  if (cached && caches_.disk != nullptr) {
    disk = disk_key(items, item, ws.reader);
    if (const auto size = caches_.disk->lookup(disk, ws.file)) return {ws.file.data(), *size};
  }
  const std::span<const std::uint8_t> bytes = ws.reader.read(items, item, ws.file, config_.read.max_file_size);
  if (cached && caches_.memory != nullptr) caches_.memory->insert(key.item, bytes);
  if (cached && caches_.disk != nullptr) caches_.disk->insert(disk, bytes);
  return bytes;
}

std::optional<ConstImageView> SampleProgram::cached_image(const ItemTable& items, std::int64_t item,
                                                          const SampleKey& key, Workspace& ws,
                                                          MemoryCacheStore::Handle& held) const {
  if (caches_.memory != nullptr) {
    held = caches_.memory->lookup(key.item);
    if (held) {
      if (const auto image = parse_decoded(held.bytes(), channels_, config_.decode.max_image_pixels)) return *image;
      held = {};
    }
  }
  CacheKey disk;
  if (caches_.disk != nullptr) {
    disk = disk_key(items, item, ws.reader);
    if (const auto size = caches_.disk->lookup(disk, ws.decoded)) {
      if (const auto image = parse_decoded({ws.decoded.data(), *size}, channels_, config_.decode.max_image_pixels)) {
        return *image;
      }
    }
  }
  MemoryCacheStore::Handle none;
  const std::span<const std::uint8_t> bytes = encoded_bytes(items, item, key, ws, none);
  const bool other = ImageDecoder::handles(bytes);
  ImageProbe probe;
  JpegHeader header;
  if (other) {
    probe = ws.formats.probe(bytes);
  } else {
    header = ws.decoder.read_header(bytes);
  }
  // Cached upright: the crops of later epochs act on the upright image.
  const int exif = orientation_of(bytes);
  const Size2 stored{other ? probe.width : header.width, other ? probe.height : header.height};
  const auto [width, height] = upright_size(stored, exif);
  const std::size_t entry_bytes = kDecodedHeaderBytes + static_cast<std::size_t>(width) * height * channels_;
  if (!ws.decoded.try_reserve(entry_bytes)) {
    if (!other && exif == 1) return std::nullopt;  // not cached: decoded in bands instead
    ws.decoded.reserve(entry_bytes);  // the other formats and turned JPEGs decode whole: wait for the memory
  }
  const ImageView image = view_of(ws.decoded, width, height, channels_, kDecodedHeaderBytes);
  const ImageView target = exif == 1 ? image : view_of(ws.stored, stored.width, stored.height, channels_);
  // Cached as it is: recovered once, whatever later samples of it do.
  if (other) {
    ws.formats.decode(bytes, probe, target);
    if (const FormatWarnings& w = ws.formats.warnings(); w.count > 0) recovered_.record(key.item, items.path(item), w.first);
  } else {
    ws.decoder.decode(bytes, header, JpegRequest{1, Rect{}}, target);
    if (const JpegWarnings w = ws.decoder.warnings(); w.count > 0) recovered_.record(key.item, items.path(item), w.first);
  }
  if (exif != 1) orient(target, exif, image);
  const DecodedHeader h{kDecodedMagic, static_cast<std::uint32_t>(width), static_cast<std::uint32_t>(height),
                        static_cast<std::uint32_t>(channels_)};
  std::memset(ws.decoded.data(), 0, kDecodedHeaderBytes);
  std::memcpy(ws.decoded.data(), &h, sizeof h);
  const std::span<const std::uint8_t> entry(ws.decoded.data(), entry_bytes);
  if (caches_.memory != nullptr) caches_.memory->insert(key.item, entry);
  if (caches_.disk != nullptr) caches_.disk->insert(disk, entry);
  return ConstImageView(image);
}

void SampleProgram::run_unchecked(const ItemTable& items, std::int64_t item, const SampleKey& key, Workspace& ws,
                                  void* out) const {
  auto t = Clock::now();
  MemoryCacheStore::Handle held;  // keeps a memory-cache entry alive while it is the source
  if (config_.cache_point == CachePoint::kDecoded) {
    if (const std::optional<ConstImageView> image = cached_image(items, item, key, ws, held)) {
      ws.counters.add(StageCounters::kDecode, elapsed_ns(t),
                      static_cast<std::int64_t>(image->width) * image->height * channels_);
      const SampleGeometry plan = plan_geometry(config_.geometry, {image->width, image->height}, key);
      finish(plan, *image, Rect{0, 0, image->width, image->height}, ResamplerState::kNotSetUp, ws, out, t);
      return;
    }
    // Too large to hold whole: at full scale and fancy upsampling as the cached samples are, in
    // bands, not cached.
    MemoryCacheStore::Handle none;
    const std::span<const std::uint8_t> bytes = encoded_bytes(items, item, key, ws, none);
    const JpegHeader header = ws.decoder.read_header(bytes);
    const SampleGeometry plan = plan_geometry(config_.geometry, {header.width, header.height}, key);
    const JpegRequest as_cached{.scale_denom = 1, .region = {}, .fast_upsample = false};
    decode_in_bands(plan, bytes, header, as_cached, ws, out);
    ws.counters.add(StageCounters::kDecode, elapsed_ns(t), static_cast<std::int64_t>(sample_bytes()));
    if (const JpegWarnings w = ws.decoder.warnings(); w.count > 0) recovered_.record(key.item, items.path(item), w.first);
    return;
  }

  const std::span<const std::uint8_t> bytes = encoded_bytes(items, item, key, ws, held);
  ws.counters.add(StageCounters::kRead, elapsed_ns(t), static_cast<std::int64_t>(bytes.size()));
  if (ImageDecoder::handles(bytes)) {
    run_other_format(items, item, key, bytes, ws, out, t);
    return;
  }
  const JpegHeader header = ws.decoder.read_header(bytes);
  // The plan is for the upright image; the decoder works in stored coordinates (orient.hpp).
  const int exif = orientation_of(bytes);
  const Size2 image = upright_size({header.width, header.height}, exif);
  SampleGeometry plan = plan_geometry(config_.geometry, image, key);
  const int denom = config_.decode.dct_scaling ? choose_denom(plan) : 1;
  plan = scale_plan(plan, image, denom);
  const Size2 stored_scaled = JpegDecoder::scaled_size(header, denom);
  const Size2 scaled = upright_size(stored_scaled, exif);

  // The source pixels the output needs: the crop itself when it is a plain copy, else the
  // resampler's footprint.
  Rect needed;
  const bool copy = is_identity(plan.x) && is_identity(plan.y);
  if (copy) {
    needed = Rect{static_cast<int>(plan.x.origin), static_cast<int>(plan.y.origin), plan.out.width, plan.out.height};
  } else {
    ws.resampler.setup(ResampleParams{plan.x, plan.y, channels_, plan.filter, plan.antialias, plan.fill});
    needed = ws.resampler.footprint();
  }
  JpegRequest request{.scale_denom = denom, .region = {},
                      .fast_upsample = fast_upsample_for(plan, header, denom)};
  if (config_.decode.roi && worth_a_region(needed, scaled)) request.region = stored_rect(needed, stored_scaled, exif);
  const Rect stored_region = ws.decoder.decoded_region(header, request);
  const Rect region = upright_rect(stored_region, stored_scaled, exif);
  if (exif != 1) {
    run_turned_jpeg(plan, bytes, header, request, stored_region, exif, copy, ws, out, t);
    if (const JpegWarnings w = ws.decoder.warnings(); w.count > 0) recovered_.record(key.item, items.path(item), w.first);
    return;
  }
  // Room for the whole scaled image if the budget has it, not just this region: region sizes vary
  // with every random crop, image sizes do not, so the buffer stops growing once the largest image
  // has been seen. Else room for the region; else (an image larger than the plan, a budget with
  // nothing free) row bands through the buffer as it is.
  const std::size_t region_bytes = static_cast<std::size_t>(region.width) * region.height * channels_;
  if (!ws.decoded.try_reserve(static_cast<std::size_t>(scaled.width) * scaled.height * channels_) &&
      !ws.decoded.try_reserve(region_bytes)) {
    decode_in_bands(plan, bytes, header, request, ws, out);
    ws.counters.add(StageCounters::kDecode, elapsed_ns(t), static_cast<std::int64_t>(region_bytes));
    if (const JpegWarnings w = ws.decoder.warnings(); w.count > 0) recovered_.record(key.item, items.path(item), w.first);
    return;
  }
  const ImageView decoded = view_of(ws.decoded, region.width, region.height, channels_);
  if (resume_points_ && stored_region.y > 0 && request.region.width != 0 && !header.progressive) {
    // Rows above the region: from the item's resume points, found on its first reads.
    resume_.get(item, bytes, ws.points);
    const std::size_t known = ws.points.size();
    ws.decoder.decode(bytes, header, request, decoded, ws.points);
    if (ws.points.size() > known) resume_.put(item, bytes, ws.points);
  } else {
    ws.decoder.decode(bytes, header, request, decoded);
  }
  const JpegWarnings warnings = ws.decoder.warnings();  // valid until the decoder's next call
  ws.counters.add(StageCounters::kDecode, elapsed_ns(t), static_cast<std::int64_t>(region_bytes));
  finish(plan, decoded, region, copy ? ResamplerState::kNotSetUp : ResamplerState::kSetUp, ws, out, t);
  if (warnings.count > 0) recovered_.record(key.item, items.path(item), warnings.first);
}

void SampleProgram::run_other_format(const ItemTable& items, std::int64_t item, const SampleKey& key,
                                     std::span<const std::uint8_t> bytes, Workspace& ws, void* out,
                                     Clock::time_point& t) const {
  const ImageProbe probe = ws.formats.probe(bytes);
  const std::size_t decoded_bytes = static_cast<std::size_t>(probe.width) * probe.height * channels_;
  if (const int exif = orientation_of(bytes); exif != 1) {
    // A WebP with an EXIF orientation: decoded whole as stored, turned upright into ws.decoded.
    const ImageView stored = view_of(ws.stored, probe.width, probe.height, channels_);
    ws.formats.decode(bytes, probe, stored);
    if (const FormatWarnings& w = ws.formats.warnings(); w.count > 0) recovered_.record(key.item, items.path(item), w.first);
    const Size2 image = upright_size({probe.width, probe.height}, exif);
    const ImageView upright = view_of(ws.decoded, image.width, image.height, channels_);
    orient(stored, exif, upright);
    ws.counters.add(StageCounters::kDecode, elapsed_ns(t), static_cast<std::int64_t>(decoded_bytes));
    const SampleGeometry plan = plan_geometry(config_.geometry, image, key);
    finish(plan, upright, Rect{0, 0, image.width, image.height}, ResamplerState::kNotSetUp, ws, out, t);
    return;
  }
  if (!ws.decoded.try_reserve(decoded_bytes)) {
    // Larger than the worker holds or can get now: row bands where the format gives rows in
    // order, with the pixels of the whole-image path; else wait for the memory (or kTooLarge).
    const SampleGeometry plan = plan_geometry(config_.geometry, {probe.width, probe.height}, key);
    if (other_format_in_bands(plan, bytes, probe, ws, out)) {
      if (const FormatWarnings& w = ws.formats.warnings(); w.count > 0) recovered_.record(key.item, items.path(item), w.first);
      ws.counters.add(StageCounters::kDecode, elapsed_ns(t), static_cast<std::int64_t>(sample_bytes()));
      return;
    }
    ws.decoded.reserve(decoded_bytes);
  }
  const ImageView decoded = view_of(ws.decoded, probe.width, probe.height, channels_);
  ws.formats.decode(bytes, probe, decoded);
  if (const FormatWarnings& w = ws.formats.warnings(); w.count > 0) recovered_.record(key.item, items.path(item), w.first);
  ws.counters.add(StageCounters::kDecode, elapsed_ns(t),
                  static_cast<std::int64_t>(probe.width) * probe.height * channels_);
  const SampleGeometry plan = plan_geometry(config_.geometry, {probe.width, probe.height}, key);
  finish(plan, decoded, Rect{0, 0, probe.width, probe.height}, ResamplerState::kNotSetUp, ws, out, t);
}

int SampleProgram::orientation_of(std::span<const std::uint8_t> bytes) const {
  return config_.decode.orientation == Orientation::kExif ? exif_orientation(bytes) : 1;
}

void SampleProgram::run_turned_jpeg(const SampleGeometry& plan, std::span<const std::uint8_t> bytes,
                                    const JpegHeader& header, const JpegRequest& request, Rect stored_region,
                                    int exif, bool copy, Workspace& ws, void* out, Clock::time_point& t) const {
  const ImageView stored = view_of(ws.stored, stored_region.width, stored_region.height, channels_);
  ws.decoder.decode(bytes, header, request, stored);
  const Rect region = upright_rect(stored_region, JpegDecoder::scaled_size(header, request.scale_denom), exif);
  const ImageView upright = view_of(ws.decoded, region.width, region.height, channels_);
  orient(stored, exif, upright);
  ws.counters.add(StageCounters::kDecode, elapsed_ns(t),
                  static_cast<std::int64_t>(region.width) * region.height * channels_);
  finish(plan, upright, region, copy ? ResamplerState::kNotSetUp : ResamplerState::kSetUp, ws, out, t);
}

bool SampleProgram::fast_upsample_for(const SampleGeometry& plan, const JpegHeader& header, int denom) const {
  if (!config_.decode.fast_upsample_when_shrunk || !plan.antialias) return false;
  // The resampler's filter must span a chroma sample (2 decoded pixels of a 4:2:0 file) on both
  // axes: an antialiased triangle does when it shrinks at all (its support is +-scale), a box
  // from a 2x shrink on.
  const double least = plan.filter == Filter::kArea ? 2.0 : 1.0;
  const bool shrunk = plan.x.scale > least && plan.y.scale > least;
  // Small whole images decode through the component planes (fancy, and faster than libjpeg's
  // merged path there); keep them on it.
  const bool planes_path = denom == 1 && JpegDecoder::working_bytes(header.width, header.height) > 0;
  return shrunk && !planes_path;
}

void SampleProgram::require_batch_size(const SampleGeometry& plan) const {
  if (plan.out != config_.output) {
    throw Error(ErrorCode::kInvalidArgument,
                "image gives a " + std::to_string(plan.out.width) + "x" + std::to_string(plan.out.height) +
                    " sample but the batch holds " + std::to_string(config_.output.width) + "x" +
                    std::to_string(config_.output.height) +
                    " samples: add resize() or a crop so every sample has one size");
  }
}

// Resample (unless a plain copy), then the sample's last steps. `source` holds source pixels
// `region` of the (scaled) image the plan maps into.
void SampleProgram::finish(const SampleGeometry& plan, ConstImageView source, Rect region, ResamplerState resampler,
                           Workspace& ws, void* out, Clock::time_point& t) const {
  require_batch_size(plan);
  ConstImageView sample;
  const bool direct = writes_direct(plan);
  if (is_identity(plan.x) && is_identity(plan.y)) {
    const int x = static_cast<int>(plan.x.origin) - region.x;
    const int y = static_cast<int>(plan.y.origin) - region.y;
    sample = ConstImageView(source.row(y) + x * channels_, plan.out.width, plan.out.height, channels_, source.stride);
  } else {
    if (resampler == ResamplerState::kNotSetUp) {
      ws.resampler.setup(ResampleParams{plan.x, plan.y, channels_, plan.filter, plan.antialias, plan.fill});
    }
    ws.scratch.reserve(ws.resampler.scratch_bytes());
    const ImageView target =
        direct ? ImageView{static_cast<std::uint8_t*>(out), plan.out.width, plan.out.height, channels_,
                           static_cast<std::ptrdiff_t>(plan.out.width) * channels_}
               : view_of(ws.resized, plan.out.width, plan.out.height, channels_);
    ws.resampler.run(source, region.x, region.y, target, ws.scratch.span(ws.resampler.scratch_bytes()));
    sample = target;
    ws.counters.add(StageCounters::kTransform, elapsed_ns(t),
                    static_cast<std::int64_t>(plan.out.width) * plan.out.height * channels_);
    if (direct) {
      run_slot_ops_on(ws, out);
      return;
    }
  }
  write_sample(plan, sample, ws, out, t);
}

bool SampleProgram::writes_direct(const SampleGeometry& plan) const {
  return normalize_.is_identity() && !plan.flip && !plan.flip_vertical && config_.pixel_ops.empty();
}

void SampleProgram::write_sample(const SampleGeometry& plan, ConstImageView sample, Workspace& ws, void* out,
                                 Clock::time_point& t) const {
  if (!config_.pixel_ops.empty()) {
    const ImageView image = view_of(ws.resized, sample.width, sample.height, channels_);
    if (sample.data != image.data) {
      const std::size_t row = static_cast<std::size_t>(sample.width) * channels_;
      for (int y = 0; y < sample.height; ++y) std::memcpy(image.row(y), sample.row(y), row);
    }
    const std::size_t scratch = pixel_ops_workspace_bytes(config_.pixel_ops, config_.output, channels_);
    ws.augment.reserve(scratch);
    sample = run_pixel_ops(config_.pixel_ops, image,
                           std::span<std::byte>(reinterpret_cast<std::byte*>(ws.augment.data()), scratch), ws.key);
    ws.counters.add(StageCounters::kTransform, elapsed_ns(t),
                    static_cast<std::int64_t>(sample.width) * sample.height * sample.channels);
  }
  if (plan.flip_vertical) {
    // Rows bottom-up: the view starts at the last row and steps back.
    sample = ConstImageView(sample.row(sample.height - 1), sample.width, sample.height, sample.channels, -sample.stride);
  }
  normalize_.run(sample, plan.flip, out);
  run_slot_ops_on(ws, out);
  ws.counters.add(StageCounters::kNormalize, elapsed_ns(t), static_cast<std::int64_t>(sample_bytes()));
}

void SampleProgram::run_slot_ops_on(Workspace& ws, void* out) const {
  if (config_.slot_ops.empty()) return;
  run_slot_ops(config_.slot_ops, SlotSample{out, normalize_.dtype(), normalize_.layout(), out_channels_, config_.output},
               ws.key);
}

}  // namespace sluice::stages
