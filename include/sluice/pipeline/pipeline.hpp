// The pipeline builder: a fluent description of where samples come from and what happens to them,
// and Loader, the running pipeline that build() returns.
//
//   auto loader = sluice::Pipeline::from_folder("train")
//       .shuffle_files(seed).read().decode_jpeg()
//       .random_resized_crop(224).flip_horizontal(0.5)
//       .normalize({.mean = {...}, .std = {...}}).batch(256)
//       .build({.threads = sluice::autotune});
//   for (sluice::Batch& b : loader.epoch(e)) step(b);
//
// The builder only records a PipelineSpec; build() validates it (bad configuration fails there,
// naming what to change) and hands it to the runtime, which defines Loader's behaviour.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sluice/core/shape.hpp"
#include "sluice/pipeline/batch.hpp"
#include "sluice/pipeline/options.hpp"
#include "sluice/pipeline/spec.hpp"
#include "sluice/pipeline/stats.hpp"

namespace sluice {

class Loader;

class Pipeline {
 public:
  // Only regular files are listed (a FIFO, socket or device named .jpg is not); symlinks whose
  // targets leave `dir` are refused unless FolderOptions::allow_outside_root says otherwise.
  static Pipeline from_folder(std::string dir, FolderOptions options = {});
  // Relative entries that climb out of the list's folder with ".." are refused unless
  // ListOptions::allow_outside_root says otherwise.
  static Pipeline from_list(std::string list_file, ListOptions options = {});
  static Pipeline from_items(std::vector<Item> items);
  // Uncompressed tar shards holding key.jpg + key.cls (an integer label) or key.class (a class
  // name; labels = indices of the sorted names) per sample, e.g. "train-{000000..000146}.tar" or
  // "shards/*.tar". Images are read in place with pread at their offset; each shard's index is
  // built on first open (docs/shards.md). With shuffle_files(seed) the shard order and the order
  // within each shard are shuffled every epoch; shard(rank, world) gives each rank a contiguous
  // run of the epoch's shard-ordered samples (whole shards when there are at least as many shards
  // as ranks). A damaged member (cut, bad header checksum) is a bad sample, named shard:member.
  static Pipeline from_shards(std::string pattern, ShardOptions options = {});
  static Pipeline from_shards(std::vector<std::string> patterns, ShardOptions options = {});
  // from_shards({"a-*.tar", "b.tar"}): without it, two string literals in braces could also be a
  // std::string's (first, last) and the call would be ambiguous.
  static Pipeline from_shards(std::initializer_list<std::string> patterns, ShardOptions options = {}) {
    return from_shards(std::vector<std::string>(patterns), options);
  }
  explicit Pipeline(PipelineSpec spec) : spec_(std::move(spec)) {}

  // Keeps items i with i % world == rank of each epoch's order: disjoint slices covering the set
  // (every rank must use the same seed). Tar shards: a contiguous run of the epoch's order per
  // rank instead (from_shards).
  Pipeline& shard(int rank, int world);
  // shard(rank, world) with the rank and world size the launcher (mpirun, srun) gave this process
  // (launcher_rank(), launcher.hpp); rank 0 of 1 when started without one. Read when called.
  Pipeline& shard_from_launcher();
  Pipeline& shuffle_files(std::uint64_t seed);
  Pipeline& read(ReadOptions options = {});
  // After read(): caches encoded files; after decode_jpeg(): decoded images (then every crop is
  // taken from the cached full image, with no region decode or DCT scaling).
  Pipeline& cache(MemoryCache options);
  Pipeline& cache(DiskCache options);
  Pipeline& decode_jpeg(DecodeOptions options = {});
  Pipeline& resize_shorter(int size, ResizeOptions options = {});
  Pipeline& resize(int width, int height, ResizeOptions options = {});
  Pipeline& center_crop(int size) { return center_crop(size, size); }
  Pipeline& center_crop(int width, int height);
  Pipeline& random_resized_crop(int size, RandomResizedCropOptions options = {});
  Pipeline& random_resized_crop(int width, int height, RandomResizedCropOptions options = {});
  Pipeline& random_crop(int size, RandomCropOptions options = {});
  Pipeline& random_crop(int width, int height, RandomCropOptions options = {});
  Pipeline& flip_horizontal(double probability = 0.5, FlipOptions options = {});
  Pipeline& normalize(NormalizeOptions options = {});
  Pipeline& normalize(std::vector<float> mean, std::vector<float> std, Layout layout,
                      DType dtype);
  Pipeline& shuffle(std::int64_t buffer, ShuffleOptions options = {});
  Pipeline& batch(int size, BatchOptions options = {});
  Pipeline& prefetch(int depth);
  // Batches go to `device` (after batch()); sluice::cuda(i) without a usable GPU fails at build().
  Pipeline& to_device(DeviceId device, ToDeviceOptions options = {});

  const PipelineSpec& spec() const { return spec_; }

  // Validates and starts the pipeline's runtime. Throws sluice::Error(kInvalidArgument) with a
  // message naming the stage and what to change.
  Loader build(const BuildOptions& options = {}) const;

 private:
  PipelineSpec spec_;
};

class LoaderImpl;

// A built pipeline. Iterate one epoch at a time; batches come in order (deterministic for a
// seed) unless BuildOptions::ordered is false.
class Loader {
 public:
  class Iterator;
  struct Sentinel {};
  class EpochRange;

  explicit Loader(std::unique_ptr<LoaderImpl> impl);
  Loader(Loader&&) noexcept;
  Loader& operator=(Loader&&) noexcept;
  ~Loader();

  EpochRange epoch(std::int64_t e);

  std::int64_t samples_per_epoch() const;
  std::int64_t batches_per_epoch() const;
  Shape batch_shape() const;  // of a full batch
  DType dtype() const;
  Stats stats() const;

  // Resumable iteration. state() is where the consumer is: the epoch and the next batch, with a
  // fingerprint of the pipeline. Every order and random choice is a function of (seed, epoch,
  // position), so that is all a resume needs: after restore(state), the next epoch(e) with the
  // saved epoch starts at the saved batch, delivering exactly the batches the uninterrupted run
  // would have, without decoding the ones before it. Throws sluice::Error(kInvalidArgument) for
  // a state from another pipeline or a damaged one. Statistics and memory caches start afresh.
  std::vector<std::uint8_t> state() const;
  void restore(std::span<const std::uint8_t> state);
  // The epoch restore() resumes (the next one to iterate), or 0 without a restore.
  std::int64_t resume_epoch() const;

 private:
  std::unique_ptr<LoaderImpl> impl_;
};

class Loader::Iterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = Batch;
  using difference_type = std::ptrdiff_t;

  Iterator() = default;
  Iterator(LoaderImpl* impl, std::int64_t epoch);

  Batch& operator*() { return current_; }
  Batch* operator->() { return &current_; }
  Iterator& operator++();  // releases the current batch (unless moved out) and waits for the next
  void operator++(int) { ++*this; }
  friend bool operator==(const Iterator& it, Sentinel) { return it.done_; }

 private:
  void fetch();

  LoaderImpl* impl_ = nullptr;
  std::int64_t epoch_ = 0;
  Batch current_;
  bool done_ = true;
};

class Loader::EpochRange {
 public:
  EpochRange(LoaderImpl* impl, std::int64_t epoch) : impl_(impl), epoch_(epoch) {}
  Iterator begin() { return Iterator(impl_, epoch_); }
  Sentinel end() { return {}; }

 private:
  LoaderImpl* impl_;
  std::int64_t epoch_;
};

}  // namespace sluice
