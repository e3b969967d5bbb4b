// SampleProgram: the per-sample stages fused into one call (docs/design.md principle 1). For one
// item it reads the file, parses the JPEG header, plans the geometry, picks the DCT scale and the
// region to decode, decodes just that, resamples once and writes the normalised sample straight
// into its slot of the batch buffer. The runtime calls run() from one oneTBB task per sample.
//
// The program is immutable and shared by all workers; everything that changes per sample lives
// in the caller's Workspace (one per worker thread), whose buffers only grow: after the first
// samples no allocation happens in sluice's code.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "sluice/core/shape.hpp"
#include "sluice/detail/memory/aligned_buffer.hpp"
#include "sluice/pipeline/spec.hpp"
#include "sluice/pipeline/stats.hpp"
#include "stages/cache/disk_cache.hpp"
#include "stages/program/augment_chain.hpp"
#include "stages/source/file_ops.hpp"
#include "stages/image/geometry.hpp"
#include "stages/source/item_table.hpp"
#include "stages/decode/image_decoder.hpp"
#include "stages/decode/jpeg_decoder.hpp"
#include "stages/cache/memory_cache.hpp"
#include "stages/image/normalize.hpp"
#include "stages/source/read_file.hpp"
#include "stages/image/resample.hpp"
#include "stages/program/resume_store.hpp"

namespace sluice::stages {

// What the stages of one worker did: busy nanoseconds, items and bytes produced. Relaxed atomics
// so stats() can read them while the worker runs; each has a single writer.
struct StageCounters {
  enum Stage { kRead, kDecode, kTransform, kNormalize, kStageCount };
  static const char* name(int stage);

  std::atomic<std::int64_t> busy_ns[kStageCount] = {};
  std::atomic<std::int64_t> items[kStageCount] = {};
  std::atomic<std::int64_t> bytes[kStageCount] = {};

  void add(int stage, std::int64_t ns, std::int64_t produced) {
    busy_ns[stage].fetch_add(ns, std::memory_order_relaxed);
    items[stage].fetch_add(1, std::memory_order_relaxed);
    bytes[stage].fetch_add(produced, std::memory_order_relaxed);
  }
};

// The files decoded in spite of libjpeg warnings (Stats::recovered), each once, by item. Workers
// record into it only for damaged files, so a mutex costs nothing in the common case.
class RecoveryLog {
 public:
  static constexpr std::size_t kListed = 1000;  // paths kept with their warning; the count goes on

  void record(std::int64_t item, const std::string& path, std::string_view warning);
  std::int64_t count() const;
  std::vector<RecoveredSample> listed() const;

 private:
  mutable std::mutex mutex_;
  std::vector<bool> seen_;  // by item index: a bit a file, however large the data set
  std::int64_t count_ = 0;
  std::vector<RecoveredSample> listed_;
};

// Where a cache sits: after read (encoded file bytes) or after decode_jpeg (whole decoded images).
enum class CachePoint : std::uint8_t { kNone, kEncoded, kDecoded };

// The caches a program uses; owned by the runtime (they hold budget reservations).
struct SampleCaches {
  MemoryCacheStore* memory = nullptr;
  DiskCacheStore* disk = nullptr;
};

// What the memory plan gives each worker's buffers (runtime/loader_memory_plan.cpp), as AlignedBuffer
// rounds capacities: reserved when the workspace is made, so a worker never waits for memory the
// plan counted on, and a batch slot or a cache cannot take it first.
struct WorkspaceShare {
  std::uint64_t file = 0;          // encoded bytes
  std::uint64_t decoded = 0;       // the decoded region (or the whole image, for a decoded cache)
  std::uint64_t stored = 0;        // the same as stored, before an EXIF orientation turns it (kExif only)
  std::uint64_t resized = 0;       // the resampled sample
  std::uint64_t scratch = 0;       // the resampler's rows
  DecoderShare decoder;            // component planes, libjpeg's coefficient buffer
  std::uint64_t formats = 0;       // the other formats' workspace (ImageDecoder::workspace_requirements)
  std::uint64_t augment = 0;       // the pixel ops' scratch (pixel_ops_workspace_bytes)
  std::uint64_t total() const {
    return file + decoded + stored + resized + scratch + decoder.planes + decoder.coefficients + formats + augment;
  }
};

// What the memory plan learned by probing files (runtime/loader_memory_plan.cpp): the largest of
// each, as found.
struct WorkspaceProbes {
  std::uint64_t largest_file = 0;   // encoded bytes
  std::uint64_t largest_image = 0;  // decoded bytes: width x height x channels
  DecoderShare decoder;             // JpegDecoder::workspace_requirements, the largest of each part
  std::uint64_t formats = 0;        // ImageDecoder::workspace_requirements, the largest (other formats)
  ItemTable::Kind kind = ItemTable::Kind::kFile;
};

struct SampleProgramConfig {
  CachePoint cache_point = CachePoint::kNone;
  ReadOptions read;
  DecodeOptions decode;
  std::vector<GeometryStep> geometry;
  std::vector<AugmentStep> pixel_ops;  // on the u8 sample after the resampling (augment_chain.hpp)
  std::vector<AugmentStep> slot_ops;   // on the normalised sample in its slot
  NormalizeOptions normalize;
  Size2 output;  // every sample's size (fixed by the ops, or probed at build)
  // The file system read() goes through; null: the real one. Tests hand a fault injector here
  // (tests/support/fault_fs.hpp); it must outlive the program and be safe to call from every
  // worker at once.
  FileOps* file_ops = nullptr;
};

class SampleProgram {
 public:
  struct Workspace {
    Workspace(const DecodeOptions& decode, FileOps* ops) : decoder(decode), formats(decode), reader(ops) {}
    AlignedBuffer file;      // encoded bytes (or a disk cache entry)
    AlignedBuffer decoded;   // the decoded region, HWC u8 (after a header, see sample_program.cpp)
    AlignedBuffer stored;    // a region as the file stores it, before its EXIF orientation turns it into decoded
    AlignedBuffer resized;   // the resampled sample, HWC u8
    AlignedBuffer scratch;   // the resampler's intermediate rows
    AlignedBuffer augment;   // the pixel ops' scratch (a warp's second image, filter rows)
    JpegDecoder decoder;
    ImageDecoder formats;    // PNG, WebP, GIF, BMP, PNM, TIFF (by their first bytes)
    ItemReader reader;       // the shards it keeps open, a file's path
    Resampler resampler;
    StageCounters counters;
    SampleKey key;  // the sample run() is making: the augmentations draw from its streams
    std::vector<ResumePoint> points;  // the item's JPEG resume points, between the store and the decoder
  };

  SampleProgram(SampleProgramConfig config, SampleCaches caches = {});

  // Whether a program of this config keeps JPEG resume points (resume_store.hpp): only where it
  // decodes crops of undecoded files, the one place a region can start below a file's top. The
  // memory plan reserves the store's bound only then.
  static bool keeps_resume_points(const SampleProgramConfig& config);

  std::unique_ptr<Workspace> make_workspace() const;
  // A workspace whose buffers count against `budget`, each holding its share from the start.
  std::unique_ptr<Workspace> make_workspace(MemoryBudget& budget, const WorkspaceShare& share) const;
  // The share make_workspace reserves, from what the probes found: each buffer's own requirement
  // (the reader's, the decoder's, the resampler's) with headroom where a probe estimated it.
  static WorkspaceShare workspace_requirements(const SampleProgramConfig& config, const WorkspaceProbes& probes);

  Size2 output_size() const { return config_.output; }
  // The sample's channels in the batch (one after grayscale(1), else the decoded image's).
  int channels() const { return out_channels_; }
  DType dtype() const { return normalize_.dtype(); }
  Layout layout() const { return normalize_.layout(); }
  std::size_t sample_bytes() const { return normalize_.sample_bytes(config_.output); }
  // (C, H, W) or (H, W, C)
  Shape sample_shape() const;

  // Runs the fused chain for item `item` of `items` into `out` (sample_bytes() bytes). Throws
  // sluice::Error naming the item's path (shard:member for a tar member).
  void run(const ItemTable& items, std::int64_t item, const SampleKey& key, Workspace& ws, void* out) const;

  // A fingerprint of the stages before the cache point: what a disk cache entry depends on.
  static std::uint64_t cache_fingerprint(const SampleProgramConfig& config);
  // The files decoded so far in spite of libjpeg warnings.
  const RecoveryLog& recovered() const { return recovered_; }

  // The largest cache entry this program writes (max_file_size for encoded entries, the largest
  // decoded image with its header for decoded ones): what a disk cache file may claim.
  static std::uint64_t cache_entry_limit(const SampleProgramConfig& config);
  // The bytes a decoded-image cache entry of a width x height image takes (header and pixels).
  static std::uint64_t decoded_entry_bytes(std::uint64_t width, std::uint64_t height, int channels);

 private:
  void run_unchecked(const ItemTable& items, std::int64_t item, const SampleKey& key, Workspace& ws, void* out) const;
  // The whole image at full scale, from the cache or decoded and inserted (kDecoded caches);
  // nullopt when it is too large for the memory the worker holds or can get now.
  std::optional<ConstImageView> cached_image(const ItemTable& items, std::int64_t item, const SampleKey& key,
                                             Workspace& ws, MemoryCacheStore::Handle& held) const;
  // The file's EXIF orientation (1 to 8) under DecodeOptions::orientation kExif, else 1.
  int orientation_of(std::span<const std::uint8_t> bytes) const;
  // A JPEG with an orientation other than 1: `stored_region` (of the image scaled as `request`
  // says) decoded into ws.stored, turned upright into ws.decoded, then resampled (or copied) into
  // `out`. Both are reserved whole, waiting for memory or failing with kTooLarge: row bands come in
  // stored order, which a turn reads across, so a turned image never decodes in bands.
  void run_turned_jpeg(const SampleGeometry& plan, std::span<const std::uint8_t> bytes, const JpegHeader& header,
                       const JpegRequest& request, Rect stored_region, int exif, bool copy, Workspace& ws, void* out,
                       std::chrono::steady_clock::time_point& t) const;
  // DecodeOptions::fast_upsample_when_shrunk for this plan (already scaled to 1/denom).
  bool fast_upsample_for(const SampleGeometry& plan, const JpegHeader& header, int denom) const;
  // An image whose decoded region does not fit the memory the worker holds or can get now: decoded
  // in row bands, each resampled into `out` as it comes, with the pixels of the whole-region path
  // (sample_bands.cpp). `decode` gives the scale and the upsampling; the region is the resampler's
  // footprint.
  void decode_in_bands(const SampleGeometry& plan, std::span<const std::uint8_t> bytes, const JpegHeader& header,
                       const JpegRequest& decode, Workspace& ws, void* out) const;
  // The same for another format whose decoder gives rows in order (ImageDecoder::begin_rows);
  // false, nothing done, when this image cannot be read so.
  bool other_format_in_bands(const SampleGeometry& plan, std::span<const std::uint8_t> bytes, const ImageProbe& probe,
                             Workspace& ws, void* out) const;
  // Where the rows of a band decode come from: the rectangle of source pixels they cover, the
  // start of the decode (once the window is reserved), the next rows top to bottom, and the end
  // after the last.
  struct RowSource {
    Rect region;
    std::function<void()> begin;
    std::function<void(ImageView)> read;
    std::function<void()> end;
  };
  // The band loop both use: `open` starts the decode of the resampler's footprint and says where
  // its rows come from.
  void resample_bands(const SampleGeometry& plan, Workspace& ws, void* out,
                      const std::function<RowSource(const Rect& footprint)>& open) const;
  // A PNG, WebP, GIF, BMP, PNM or TIFF file, whole, into ws.decoded (the decoded size reserved
  // first: growth past the worker's share waits for memory or fails with kTooLarge), then
  // resampled and normalised into `out` like a JPEG.
  void run_other_format(const ItemTable& items, std::int64_t item, const SampleKey& key,
                        std::span<const std::uint8_t> bytes, Workspace& ws, void* out,
                        std::chrono::steady_clock::time_point& t) const;
  // The file's bytes, from the cache or read and inserted (kEncoded caches) or just read.
  std::span<const std::uint8_t> encoded_bytes(const ItemTable& items, std::int64_t item, const SampleKey& key,
                                              Workspace& ws, MemoryCacheStore::Handle& held) const;
  // Throws kInvalidArgument when the plan's sample is not the batch's sample size.
  void require_batch_size(const SampleGeometry& plan) const;
  // kSetUp: the workspace's resampler already holds this plan's tables (the decode path set it up
  // to know the region it needs); kNotSetUp: finish() sets it up if the plan resamples.
  enum class ResamplerState : std::uint8_t { kNotSetUp, kSetUp };
  void finish(const SampleGeometry& plan, ConstImageView source, Rect region, ResamplerState resampler, Workspace& ws,
              void* out, std::chrono::steady_clock::time_point& t) const;
  // True when the resampler may write the sample straight into its slot: nothing comes between.
  bool writes_direct(const SampleGeometry& plan) const;
  // The u8 sample's last steps: the pixel ops (in ws.resized; a sample elsewhere, a plain copy of
  // the decoded image, is copied there first), normalize into the slot (mirrored as the plan
  // says), then the slot ops.
  void write_sample(const SampleGeometry& plan, ConstImageView sample, Workspace& ws, void* out,
                    std::chrono::steady_clock::time_point& t) const;
  void run_slot_ops_on(Workspace& ws, void* out) const;

  SampleProgramConfig config_;
  SampleCaches caches_;
  NormalizeKernel normalize_;
  int channels_ = 3;      // decoded and resampled
  int out_channels_ = 3;  // in the batch
  // Shared by the workers like the caches: what they found, not how they run.
  mutable RecoveryLog recovered_;
  mutable ResumeStore resume_;  // where each JPEG's MCU rows start, for later epochs' crops
  bool resume_points_ = false;  // keeps_resume_points(config_)
};

}  // namespace sluice::stages
