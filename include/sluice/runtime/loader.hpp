// Loader: a built pipeline, what Pipeline::build() returns. Iterate one epoch at a time:
//
//   sluice::Loader loader = pipeline.build({.threads = sluice::autotune});
//   for (sluice::Batch& b : loader.epoch(e)) step(b);
//
// Batches come in order (deterministic for a seed) unless BuildOptions::ordered is false. The
// runtime module defines it (src/runtime/); sluice/sluice.hpp includes this header.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sluice/core/dtype.hpp"
#include "sluice/core/shape.hpp"
#include "sluice/pipeline/batch.hpp"
#include "sluice/pipeline/pipeline.hpp"
#include "sluice/pipeline/stats.hpp"

namespace sluice {

class LoaderImpl;

class Loader {
 public:
  class Iterator;
  struct Sentinel {};
  class EpochRange;

  explicit Loader(std::unique_ptr<LoaderImpl> impl);
  Loader(Loader&&) noexcept;
  Loader& operator=(Loader&&) noexcept;
  // Stops the workers. Batches still held stay valid until released (they share the loader's
  // slots), but iterators of this loader must not be advanced any more.
  ~Loader();

  EpochRange epoch(std::int64_t e);

  std::int64_t samples_per_epoch() const;
  std::int64_t batches_per_epoch() const;
  Shape batch_shape() const;  // of a full batch
  DType dtype() const;
  Stats stats() const;

  // The data set as the source listed it (every item, before a shard takes its slice), as
  // torchvision's ImageFolder describes its own: item i's path ("shard.tar:member" for a tar
  // member) and label, and the class names, label i being class_names()[i] (the sorted class
  // folders, or the class names of shards labelled by name; empty where labels are numbers).
  std::int64_t dataset_size() const;
  std::string item_path(std::int64_t item) const;
  std::int32_t item_label(std::int64_t item) const;
  const std::vector<std::string>& class_names() const;

  // Resumable iteration. state() is where the consumer is: the epoch and the next batch, with a
  // fingerprint of the pipeline. Every order and random choice is a function of (seed, epoch,
  // position), so that is all a resume needs: after restore(state), the next epoch(e) with the
  // saved epoch starts at the saved batch, delivering exactly the batches the uninterrupted run
  // would have, without decoding the ones before it. Throws sluice::Error(kInvalidArgument) for
  // a state from another pipeline or a damaged one. Statistics and memory caches start afresh.
  // Between restore(state) and the next epoch's start, state() is the restored state (where the
  // next epoch resumes), not where the abandoned epoch stopped.
  std::vector<std::uint8_t> state() const;
  void restore(std::span<const std::uint8_t> state);
  // The epoch restore() resumes (the next one to iterate), or 0 without a restore.
  std::int64_t resume_epoch() const;

  // Cancellation, for a consumer that must stop while it waits for a batch (Ctrl-C, a shutdown,
  // a watchdog). cancel() may be called from any thread while the loader lives (not from a
  // signal handler: see set_wait_check): the consumer's wait in progress, or its next one if
  // none is, ends by throwing sluice::Error(kCancelled), and the epoch is abandoned (the iterator
  // is done; epoch(e) starts afresh). Every wait of the consumer wakes for it, including one for
  // a free slot while the consumer holds them all.
  void cancel();
  // While the consumer waits for a batch, `check` runs on the consumer's thread every `interval`;
  // when it returns true the wait ends as after cancel(). For a consumer that can only poll:
  // Python's signal handlers run when the waiting thread looks for them (the bindings check
  // every 50 ms), a command line's handler sets a flag. An empty `check` removes it.
  void set_wait_check(std::function<bool()> check, std::chrono::milliseconds interval);

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
